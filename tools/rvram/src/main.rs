// SPDX-License-Identifier: GPL-2.0

//! `rvram`: the project's tooling with logic in it.
//!
//! ```text
//! rvram series export [SIGNOFF]
//!                         regenerate patches/<series>/ from series/; with
//!                         "Name <email>", signed off by and from them
//! rvram series check      fail when patches/ is stale
//! rvram series apply      apply every series of patches/ to the base in
//!                         order, print the head commit
//! rvram series commits    every commit of the series, on one line of history
//!                         and each series on its prerequisites alone
//!                         (bisect check)
//! rvram series cc         print the To: and Cc: of each series
//! rvram report DIR        summarise a VM test run, exit 1 on any failure
//! rvram bench-plot DIR    the alias benchmark of a run: DIR/bench-alias.svg,
//!                         and its CPU mapping benchmark: DIR/bench-cpumap.svg
//! rvram splat-check DIR   the harness's own test: every kind of kernel report
//!                         in a run of the `splat` plan is found
//! rvram coverage DIR KOBJ RVRAM_KO
//!                         the kernel coverage of a `make coverage` run:
//!                         DIR/coverage.md
//! rvram ktap-corpus DIR   the KTAP parser against kunit_parser.py on the
//!                         kernel's corpus (DIR: tools/testing/kunit)
//! ```
//!
//! The base kernel repository is `$RVRAM_CACHE/base/linux` (default cache:
//! `$XDG_CACHE_HOME/rvram` or `~/.cache/rvram`), as tools/fetch-kernel.sh
//! leaves it.

pub mod benchplot;
pub mod coverage;
pub mod cpumap;
pub mod kmemleak;
pub mod ktap;
pub mod ktapcorpus;
pub mod report;
pub mod series;
pub mod splatcheck;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str =
    "usage: rvram series {export [SIGNOFF]|check|apply|commits|cc} | rvram report DIR | rvram bench-plot DIR | rvram coverage DIR KOBJ RVRAM_KO | rvram splat-check DIR | rvram ktap-corpus DIR";

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

fn series_cmd(verb: &str, signoff: Option<&str>) -> Result<ExitCode, series::Error> {
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
            eprintln!("rvram: wrote {n} files to patches/");
            if who.signoff.is_some() {
                eprintln!("rvram: signed off: send them, do not commit them");
                if let Some(steps) = series::before_sending(&paths)? {
                    eprintln!("rvram: not ready to send; first:");
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
                eprintln!("rvram: patches/ is stale; run `make series`. Differs:");
                for s in stale {
                    eprintln!("  {s}");
                }
                return Ok(ExitCode::FAILURE);
            }
            eprintln!("rvram: patches/ is current");
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

/// Prints a check's output and exits with its verdict, or reports why it
/// could not run on `dir`.
fn verdict(dir: &str, checked: std::io::Result<(String, bool)>) -> ExitCode {
    match checked {
        Ok((out, ok)) => {
            print!("{out}");
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("rvram: {dir}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["series", "export", signoff] => series_cmd("export", Some(signoff)).unwrap_or_else(|e| {
            eprintln!("rvram: {e}");
            ExitCode::FAILURE
        }),
        ["series", verb] => series_cmd(verb, None).unwrap_or_else(|e| {
            eprintln!("rvram: {e}");
            ExitCode::FAILURE
        }),
        ["report", dir] => verdict(
            dir,
            report::summarize(Path::new(dir)).map(|s| {
                let ok = s.ok();
                (s.to_string(), ok)
            }),
        ),
        ["coverage", dir, kobj, ko] => verdict(
            dir,
            coverage::run(Path::new(dir), Path::new(kobj), Path::new(ko)),
        ),
        ["splat-check", dir] => verdict(dir, splatcheck::run(Path::new(dir))),
        ["ktap-corpus", dir] => verdict(
            dir,
            ktapcorpus::run(Path::new(dir)).map_err(std::io::Error::other),
        ),
        ["bench-plot", dir] => match benchplot::run(std::path::Path::new(dir)) {
            Ok(plotted) => {
                for note in &plotted.notes {
                    eprintln!("rvram: bench-plot: {note}");
                }
                print!("{}", plotted.text);
                match cpumap::run(std::path::Path::new(dir)) {
                    Ok(Some(svg)) => println!("# CPU mapping benchmark: {}", svg.display()),
                    Ok(None) => eprintln!("rvram: bench-plot: no CPU mapping benchmark"),
                    Err(e) => {
                        eprintln!("rvram: bench-plot {dir}: {e}");
                        return ExitCode::FAILURE;
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rvram: bench-plot {dir}: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
