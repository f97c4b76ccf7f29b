// SPDX-License-Identifier: GPL-2.0

//! `rvram-series`: the kernel patch series, built from this repository's
//! files (see [`series`]).
//!
//! ```text
//! rvram-series export [SIGNOFF]
//!                         regenerate patches/<series>/ from series/; with
//!                         "Name <email>", signed off by and from them
//! rvram-series check      fail when patches/ is stale
//! rvram-series apply      apply every series of patches/ to the base in
//!                         order, print the head commit
//! rvram-series commits    every commit of the series, on one line of history
//!                         and each series on its prerequisites alone
//!                         (bisect check)
//! rvram-series cc         print the To: and Cc: of each series
//! ```
//!
//! The base kernel repository is `$RVRAM_CACHE/base/linux` (default cache:
//! `$XDG_CACHE_HOME/rvram` or `~/.cache/rvram`), as tools/fetch-kernel.sh
//! leaves it.

pub mod series;

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: rvram-series {export [SIGNOFF]|check|apply|commits|cc}";

fn cache_dir() -> PathBuf {
    if let Some(c) = std::env::var_os("RVRAM_CACHE") {
        return c.into();
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(x).join("rvram");
    }
    PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/".into())).join(".cache/rvram")
}

fn repo_root() -> PathBuf {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--show-toplevel"])
        .output();
    match out {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        _ => PathBuf::from("."),
    }
}

fn run(verb: &str, signoff: Option<&str>) -> Result<ExitCode, series::Error> {
    let paths = series::Paths {
        repo: repo_root(),
        base: cache_dir().join("base/linux"),
    };
    match verb {
        "export" => {
            let who = series::Identity {
                signoff: signoff.filter(|s| !s.trim().is_empty()).map(str::to_string),
            };
            let n = series::export(&paths, &who)?;
            eprintln!("rvram-series: wrote {n} files to patches/");
            if who.signoff.is_some() {
                eprintln!("rvram-series: signed off: send them, do not commit them");
                if let Some(steps) = series::before_sending(&paths)? {
                    eprintln!("rvram-series: not ready to send; first:");
                    for (i, step) in steps.iter().enumerate() {
                        eprintln!("  {}. {step}", i + 1);
                    }
                }
            }
        }
        "cc" => {
            for (name, r) in series::cc(&paths)? {
                println!("{name}:");
                println!("  To: {}", r.to.join(", "));
                println!("  Cc: {}", r.cc.join(", "));
            }
        }
        "check" => {
            let stale = series::check(&paths)?;
            if !stale.is_empty() {
                eprintln!("rvram-series: patches/ is stale; run `make series`. Differs:");
                for s in stale {
                    eprintln!("  {s}");
                }
                return Ok(ExitCode::FAILURE);
            }
            eprintln!("rvram-series: patches/ is current");
        }
        "apply" => {
            let commits = series::apply(&paths)?;
            println!("{}", commits.last().expect("apply returns at least one"));
        }
        "commits" => {
            for c in series::build_commits(&paths)? {
                println!("{c}");
            }
        }
        _ => {
            eprintln!("{USAGE}");
            return Ok(ExitCode::from(2));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (verb, signoff) = match args.as_slice() {
        ["export", signoff] => ("export", Some(*signoff)),
        [verb] => (*verb, None),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    run(verb, signoff).unwrap_or_else(|e| {
        eprintln!("rvram-series: {e}");
        ExitCode::FAILURE
    })
}
