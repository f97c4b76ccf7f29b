// SPDX-License-Identifier: GPL-2.0
//! The KTAP parser ([`crate::ktap`]) against the kernel's own corpus.
//!
//! `tools/testing/kunit/test_data/*.log` in the base tree are the KTAP logs
//! that kunit_tool's tests run `kunit_parser.py` on: whole runs, crashed
//! runs, prefixed and interleaved kernel logs. [`run`] parses each with
//! both parsers (`kunit_parser.py` itself, through `python3`, so that its
//! verdicts are never copied here) and compares the verdicts: a run passes
//! when nothing in it failed or crashed and it is a whole run, else fails.
//!
//! Where the two disagree on purpose, [`KNOWN`] says why; an entry that no
//! longer differs fails too, so that the list stays true.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use crate::ktap::{self, Outcome};

/// Prints `file status passed failed crashed skipped errors` per log, as
/// kunit_parser.py sees it. argv[1]: the kunit directory.
const KUNIT_PARSER: &str = r#"
import os, sys
sys.path.insert(0, sys.argv[1])
import kunit_parser
from kunit_printer import null_printer
d = os.path.join(sys.argv[1], 'test_data')
for f in sorted(os.listdir(d)):
    if not f.endswith('.log'):
        continue
    with open(os.path.join(d, f), errors='replace') as fh:
        t = kunit_parser.parse_run_tests(fh.readlines(), null_printer)
    c = t.counts
    print(f, t.status.name, c.passed, c.failed, c.crashed, c.skipped, c.errors)
"#;

/// Logs on which rvram's verdict differs from kunit_parser.py's, and why.
pub const KNOWN: &[(&str, &str)] = &[(
    "test_is_test_passed-missing_plan.log",
    "suites without a `1..N` plan: kunit_parser.py passes them, rvram calls \
     them incomplete, since without a plan a suite whose results stop (a \
     guest that died mid-suite) cannot be told from a whole one; KUnit \
     prints every suite's plan",
)];

/// One log as kunit_parser.py saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Theirs {
    /// `TestStatus` name: SUCCESS, FAILURE, SKIPPED, TEST_CRASHED, NO_TESTS,
    /// FAILURE_TO_PARSE_TESTS.
    pub status: String,
    /// Leaf tests that passed.
    pub passed: usize,
    /// Leaf tests that failed.
    pub failed: usize,
    /// Leaf tests that crashed.
    pub crashed: usize,
    /// Leaf tests skipped.
    pub skipped: usize,
    /// Parse errors.
    pub errors: usize,
}

impl Theirs {
    /// kunit_tool's exit status: 0 for SUCCESS and SKIPPED only.
    pub fn passed(&self) -> bool {
        matches!(self.status.as_str(), "SUCCESS" | "SKIPPED")
    }
}

/// rvram's verdict on a whole log: some suite, and every suite whole and
/// without a failure (as `rvram-report summary` judges a KUnit run).
pub fn ours(text: &str) -> (bool, String) {
    let suites = ktap::parse(text);
    let mut c = ktap::Counts::default();
    for s in &suites {
        let n = s.counts();
        c.pass += n.pass;
        c.fail += n.fail;
        c.skip += n.skip;
        c.missing += n.missing;
        // A suite skipped as a whole counts as one skip.
        if s.cases.is_empty()
            && s.result
                .as_ref()
                .is_some_and(|r| r.outcome == Outcome::Skip)
        {
            c.skip += 1;
        }
    }
    let pass = !suites.is_empty() && suites.iter().all(|s| s.ok());
    let incomplete = suites.iter().filter(|s| !s.complete).count();
    (
        pass,
        format!(
            "{} suite(s), {} pass {} fail {} skip {} missing, {incomplete} incomplete",
            suites.len(),
            c.pass,
            c.fail,
            c.skip,
            c.missing
        ),
    )
}

/// Parses the output of [`KUNIT_PARSER`].
pub fn parse_theirs(out: &str) -> Result<Vec<(String, Theirs)>, String> {
    out.lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [file, status, n @ ..] = f.as_slice() else {
                return Err(format!("kunit_parser.py printed {l:?}"));
            };
            let n: Vec<usize> = n
                .iter()
                .map(|x| {
                    x.parse()
                        .map_err(|_| format!("kunit_parser.py printed {l:?}"))
                })
                .collect::<Result<_, _>>()?;
            let [passed, failed, crashed, skipped, errors] = n.as_slice() else {
                return Err(format!("kunit_parser.py printed {l:?}"));
            };
            Ok((
                file.to_string(),
                Theirs {
                    status: status.to_string(),
                    passed: *passed,
                    failed: *failed,
                    crashed: *crashed,
                    skipped: *skipped,
                    errors: *errors,
                },
            ))
        })
        .collect()
}

/// Compares both parsers on every log of `kunit_dir/test_data` (the base
/// tree's `tools/testing/kunit`); TAP out, `true` when every verdict is
/// the same or a [`KNOWN`] difference.
pub fn run(kunit_dir: &Path) -> Result<(String, bool), String> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(KUNIT_PARSER)
        .arg(kunit_dir)
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "kunit_parser.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let theirs = parse_theirs(&String::from_utf8_lossy(&out.stdout))?;
    if theirs.is_empty() {
        return Err(format!(
            "no KTAP logs in {}",
            kunit_dir.join("test_data").display()
        ));
    }
    let mut text = String::from("TAP version 13\n");
    let mut ok = true;
    for (i, (file, t)) in theirs.iter().enumerate() {
        let path = kunit_dir.join("test_data").join(file);
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let (pass, what) = ours(&String::from_utf8_lossy(&bytes));
        let known = KNOWN.iter().find(|(f, _)| f == file);
        let same = pass == t.passed();
        let good = same != known.is_some();
        ok &= good;
        let verdict = |p: bool| if p { "pass" } else { "fail" };
        let _ = writeln!(
            text,
            "{} {} {file}: rvram {} ({what}); kunit_parser.py {} ({}: {} passed, {} failed, {} crashed, {} skipped, {} errors)",
            if good { "ok" } else { "not ok" },
            i + 1,
            verdict(pass),
            verdict(t.passed()),
            t.status,
            t.passed,
            t.failed,
            t.crashed,
            t.skipped,
            t.errors
        );
        match known {
            Some((_, why)) if !same => {
                let _ = writeln!(text, "# known difference: {why}");
            }
            Some(_) => {
                let _ = writeln!(text, "# listed in KNOWN but no longer differs");
            }
            None => {}
        }
    }
    for (file, _) in KNOWN {
        if !theirs.iter().any(|(f, _)| f == file) {
            ok = false;
            let _ = writeln!(text, "# KNOWN lists {file}, which the corpus does not have");
        }
    }
    let _ = writeln!(text, "1..{}", theirs.len());
    Ok((text, ok))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn their_lines_parse() {
        let t = parse_theirs("a.log SUCCESS 10 0 0 1 0\nb.log TEST_CRASHED 8 0 2 0 3\n").unwrap();
        assert_eq!(t.len(), 2);
        assert!(t[0].1.passed());
        assert!(!t[1].1.passed());
        assert_eq!(t[1].1.crashed, 2);
        assert!(parse_theirs("a.log SUCCESS 1 2").is_err());
        assert!(parse_theirs("a.log SUCCESS x 0 0 0 0").is_err());
    }

    #[test]
    fn our_verdict() {
        let pass = "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: s\n    1..1\n    ok 1 a\nok 1 s\n";
        assert!(ours(pass).0);
        let fail = "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: s\n    1..1\n    not ok 1 a\nnot ok 1 s\n";
        assert!(!ours(fail).0);
        assert!(!ours("no test output here\n").0);
    }
}
