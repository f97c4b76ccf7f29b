// SPDX-License-Identifier: GPL-2.0
//! TAP 13 output.
//!
//! Results are written as they arrive, so a run that dies part way (a kernel
//! oops in the guest) still leaves its finished cases readable; the plan
//! comes last.

use std::io::{self, Write};

use crate::report::TestResult;

/// Formats one result as its TAP lines: `ok N - name` or `not ok N - name`,
/// then one `# ` line per diagnostic.
pub fn format_result(number: usize, result: &TestResult) -> String {
    let status = if result.passed { "ok" } else { "not ok" };
    let mut out = format!("{status} {number} - {}\n", description(&result.name));
    for diag in &result.diagnostics {
        for line in diag.lines() {
            out.push_str(&comment(line));
        }
    }
    out
}

/// Formats a `# ` comment line.
pub fn comment(text: &str) -> String {
    if text.is_empty() {
        "#\n".to_owned()
    } else {
        format!("# {text}\n")
    }
}

/// A test description safe for a result line: one line, and no `#`, which
/// would start a directive.
fn description(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '#' => 'N',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// Writes a TAP 13 document, numbering results in order.
///
/// Write errors (a closed pipe) do not stop the run; the first one is kept
/// and returned by [`Tap::finish`].
pub struct Tap<W: Write> {
    out: W,
    count: usize,
    error: Option<io::Error>,
}

impl<W: Write> Tap<W> {
    /// Starts a document: writes the version line.
    pub fn new(out: W) -> Self {
        let mut tap = Self {
            out,
            count: 0,
            error: None,
        };
        tap.write("TAP version 13\n");
        tap
    }

    /// Writes the next result.
    pub fn result(&mut self, result: &TestResult) {
        self.count += 1;
        self.write(&format_result(self.count, result));
    }

    /// Writes a comment line.
    pub fn comment(&mut self, text: &str) {
        self.write(&comment(text));
    }

    /// Number of results written so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Writes the plan `1..N` and returns the first write error, if any.
    pub fn finish(mut self) -> io::Result<W> {
        let plan = format!("1..{}\n", self.count);
        self.write(&plan);
        match self.error {
            Some(err) => Err(err),
            None => Ok(self.out),
        }
    }

    fn write(&mut self, text: &str) {
        if self.error.is_none() {
            if let Err(err) = self
                .out
                .write_all(text.as_bytes())
                .and_then(|()| self.out.flush())
            {
                self.error = Some(err);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::CaseKind;

    fn result(name: &str, passed: bool, diagnostics: &[&str]) -> TestResult {
        TestResult {
            name: name.into(),
            kind: CaseKind::WriteRead,
            mtu: None,
            passed,
            diagnostics: diagnostics.iter().map(|d| d.to_string()).collect(),
            words: None,
            vram: None,
        }
    }

    #[test]
    fn result_lines() {
        assert_eq!(format_result(1, &result("a b", true, &[])), "ok 1 - a b\n");
        assert_eq!(
            format_result(
                12,
                &result("x", false, &["read: 3 bytes wrong", "two\nlines"])
            ),
            "not ok 12 - x\n# read: 3 bytes wrong\n# two\n# lines\n"
        );
    }

    #[test]
    fn descriptions_cannot_inject_directives_or_lines() {
        assert_eq!(
            format_result(2, &result("case #3 # SKIP\nok 3", false, &[])),
            "not ok 2 - case N3 N SKIP ok 3\n"
        );
    }

    #[test]
    fn document() {
        let mut tap = Tap::new(Vec::new());
        tap.comment("device rxe0");
        tap.result(&result("one", true, &[]));
        tap.result(&result("two", false, &["why"]));
        tap.comment("");
        assert_eq!(tap.count(), 2);
        let out = String::from_utf8(tap.finish().unwrap()).unwrap();
        assert_eq!(
            out,
            "TAP version 13\n# device rxe0\nok 1 - one\nnot ok 2 - two\n# why\n#\n1..2\n"
        );
    }

    #[test]
    fn empty_document_has_an_empty_plan() {
        let out = Tap::new(Vec::new()).finish().unwrap();
        assert_eq!(out, b"TAP version 13\n1..0\n");
    }

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn write_errors_are_reported_at_the_end() {
        let mut tap = Tap::new(Broken);
        tap.result(&result("one", true, &[]));
        assert_eq!(tap.count(), 1);
        assert_eq!(
            tap.finish().err().map(|e| e.kind()),
            Some(io::ErrorKind::BrokenPipe)
        );
    }
}
