// SPDX-License-Identifier: GPL-2.0

//! `rvram-report`: what a VM test run of rvram shows.
//!
//! ```text
//! rvram-report summary DIR
//!                         summarise a VM test run, exit 1 on any failure
//! rvram-report bench-plot DIR
//!                         the alias benchmark of a run: DIR/bench-alias.svg,
//!                         and its CPU mapping benchmark: DIR/bench-cpumap.svg
//! rvram-report splat-check DIR
//!                         the harness's own test: every kind of kernel report
//!                         in a run of the `splat` plan is found
//! rvram-report coverage DIR KOBJ RVRAM_KO
//!                         the kernel coverage of a `make coverage` run:
//!                         DIR/coverage.md
//! rvram-report ktap-corpus DIR
//!                         the KTAP parser against kunit_parser.py on the
//!                         kernel's corpus (DIR: tools/testing/kunit)
//! ```

pub mod benchplot;
pub mod coverage;
pub mod cpumap;
pub mod kmemleak;
pub mod ktap;
pub mod ktapcorpus;
pub mod report;
pub mod splatcheck;

use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: rvram-report {summary DIR|bench-plot DIR|coverage DIR KOBJ RVRAM_KO|splat-check DIR|ktap-corpus DIR}";

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
            eprintln!("rvram-report: {dir}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["summary", dir] => verdict(
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
                    eprintln!("rvram-report: bench-plot: {note}");
                }
                print!("{}", plotted.text);
                match cpumap::run(std::path::Path::new(dir)) {
                    Ok(Some(svg)) => println!("# CPU mapping benchmark: {}", svg.display()),
                    Ok(None) => eprintln!("rvram-report: bench-plot: no CPU mapping benchmark"),
                    Err(e) => {
                        eprintln!("rvram-report: bench-plot {dir}: {e}");
                        return ExitCode::FAILURE;
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rvram-report: bench-plot {dir}: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
