// SPDX-License-Identifier: GPL-2.0
//! Parser for KTAP v1 (KUnit) and TAP 13/14 (kselftest) output.
//!
//! [`parse`] scans arbitrary text, such as a whole kernel log with unrelated
//! lines interleaved, for test documents. A document starts at a
//! `KTAP version 1` or `TAP version 13/14` line, or at an un-versioned plan.
//! A flat document (one kselftest binary) becomes one [`Suite`]; a document
//! with indented subtests (a KUnit run) becomes one [`Suite`] per top-level
//! test, that is per KUnit suite. Deeper levels (parameterised KUnit tests)
//! are folded into the result line of the test that owns them.

/// Result of one test case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `ok` without a directive.
    Pass,
    /// `not ok` without a SKIP or TODO directive.
    Fail,
    /// A `# SKIP` directive, whether the line says `ok` or `not ok`.
    Skip,
    /// A `# TODO` (or kselftest `# XFAIL`) directive: an expected failure,
    /// not counted as a failure.
    Todo,
}

/// One test result line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The description after the test number, or `test N` if there is none.
    pub name: String,
    /// What the line reports.
    pub outcome: Outcome,
    /// The text after `#`: the SKIP/TODO reason or another diagnostic.
    pub reason: Option<String>,
}

/// One test suite: a flat TAP document or one top-level KUnit suite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suite {
    /// `# Subtest:` name or result line description for a KUnit suite; the
    /// caller's name for a flat document.
    pub name: String,
    /// The test count from the `1..N` plan line, if one was seen.
    pub plan: Option<usize>,
    /// The result lines of the suite's own tests, in order.
    pub cases: Vec<Case>,
    /// The suite's own result: the `ok N name` line that closes a KUnit
    /// suite, or a `1..0 # SKIP reason` plan.
    pub result: Option<Case>,
    /// Whether the suite ran to its end: the plan was seen and matches the
    /// number of results, there was no `Bail out!`, and a nested suite was
    /// closed by its result line. False when the kernel crashed or the test
    /// binary died mid-run.
    pub complete: bool,
    /// True for a suite that was a top-level test of a document with
    /// subtests, as every KUnit suite is; false for a flat document.
    pub nested: bool,
    /// Protocol errors: out-of-order test numbers, `Bail out!`, more results
    /// than planned.
    pub errors: Vec<String>,
}

/// Number of results of each kind in a [`Suite`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Passed cases.
    pub pass: usize,
    /// Failed cases.
    pub fail: usize,
    /// Skipped cases.
    pub skip: usize,
    /// TODO / XFAIL cases.
    pub todo: usize,
    /// Planned cases that never reported a result.
    pub missing: usize,
}

impl Suite {
    /// Counts the cases by outcome, and the planned cases that are missing.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts {
            missing: self.plan.unwrap_or(0).saturating_sub(self.cases.len()),
            ..Counts::default()
        };
        for case in &self.cases {
            match case.outcome {
                Outcome::Pass => counts.pass += 1,
                Outcome::Fail => counts.fail += 1,
                Outcome::Skip => counts.skip += 1,
                Outcome::Todo => counts.todo += 1,
            }
        }
        counts
    }

    /// The failed cases.
    pub fn failures(&self) -> impl Iterator<Item = &Case> {
        self.cases.iter().filter(|c| c.outcome == Outcome::Fail)
    }

    /// Whether the suite is complete, error-free, and nothing in it failed.
    pub fn ok(&self) -> bool {
        self.complete
            && self.errors.is_empty()
            && self.failures().next().is_none()
            && self
                .result
                .as_ref()
                .is_none_or(|r| r.outcome != Outcome::Fail)
    }
}

/// Parses every test document in `text`; flat documents are named `tap`
/// unless they carry a `# Subtest:` name.
pub fn parse(text: &str) -> Vec<Suite> {
    parse_named(text, "")
}

/// Parses every test document in `text`, naming flat documents `name`.
pub fn parse_named(text: &str, name: &str) -> Vec<Suite> {
    let mut parser = Parser {
        name,
        stack: Vec::new(),
        suites: Vec::new(),
    };
    for line in text.lines() {
        parser.line(line);
    }
    parser.finish_root();
    parser.suites
}

/// A line that matters to the document structure.
enum Line {
    Version,
    Plan(usize, Option<Case>),
    Subtest(String),
    Result(Option<usize>, Case),
    Bail(String),
}

/// A result line with the subtest document that preceded it, or a subtest
/// whose result line never came.
struct Entry {
    case: Option<Case>,
    sub: Option<Doc>,
}

/// A document being parsed.
#[derive(Default)]
struct Doc {
    indent: usize,
    name: Option<String>,
    plan: Option<usize>,
    /// A `1..0 # SKIP` plan.
    result: Option<Case>,
    entries: Vec<Entry>,
    results: usize,
    errors: Vec<String>,
    bailed: bool,
    /// A closed subtest, waiting for its result line.
    pending: Option<Box<Doc>>,
    /// A TAP 14 `# Subtest:` name for the next subtest.
    next_name: Option<String>,
}

impl Doc {
    fn new(indent: usize) -> Self {
        Doc {
            indent,
            ..Doc::default()
        }
    }

    fn started(&self) -> bool {
        self.plan.is_some() || !self.entries.is_empty() || self.pending.is_some()
    }

    /// Keeps a closed subtest for the next result line.
    fn hold(&mut self, sub: Doc) {
        self.orphan_pending();
        self.pending = Some(Box::new(sub));
    }

    /// Records a held subtest that will not get its result line.
    fn orphan_pending(&mut self) {
        if let Some(sub) = self.pending.take() {
            self.entries.push(Entry {
                case: None,
                sub: Some(*sub),
            });
        }
    }

    fn add_result(&mut self, number: Option<usize>, mut case: Case) {
        let expected = self.results + 1;
        if case.name.is_empty() {
            case.name = format!("test {}", number.unwrap_or(expected));
        }
        match number {
            Some(n) if n != expected => self.errors.push(format!(
                "test {n} ({}) out of order, expected {expected}",
                case.name
            )),
            _ => {}
        }
        self.results += 1;
        let sub = self.pending.take().map(|sub| *sub);
        self.entries.push(Entry {
            case: Some(case),
            sub,
        });
    }

    fn into_suite(self, name: String, closing: Option<Case>, nested: bool) -> Suite {
        let mut errors = self.errors;
        if let Some(plan) = self.plan.filter(|&plan| self.results > plan) {
            errors.push(format!("{} results for plan 1..{plan}", self.results));
        }
        // `1..0` without a SKIP directive, and nothing else: nothing ran.
        if self.plan == Some(0) && self.results == 0 && self.result.is_none() && closing.is_none() {
            errors.push("no tests ran (plan 1..0 without a SKIP directive)".into());
        }
        Suite {
            name,
            plan: self.plan,
            complete: !self.bailed
                && self.plan == Some(self.results)
                && (!nested || closing.is_some()),
            result: closing.or(self.result),
            cases: self.entries.into_iter().filter_map(|e| e.case).collect(),
            nested,
            errors,
        }
    }
}

struct Parser<'a> {
    /// Name for flat documents.
    name: &'a str,
    /// Open documents: the top-level one first, then nested ones.
    stack: Vec<Doc>,
    suites: Vec<Suite>,
}

impl Parser<'_> {
    fn line(&mut self, raw: &str) {
        let text = strip_log_prefix(raw.trim_matches('\r'));
        let body = text.trim_start_matches([' ', '\t']);
        // KTAP indents by four spaces per level; count a tab as one level.
        let indent = text[..text.len() - body.len()]
            .chars()
            .map(|c| if c == '\t' { 4 } else { 1 })
            .sum();
        if let Some(line) = classify(body.trim_end()) {
            self.structural(indent, line);
        }
    }

    fn structural(&mut self, indent: usize, line: Line) {
        if self.stack.is_empty() {
            // An indented version line means the log lost the top of a
            // KUnit run: supply the missing top-level document.
            let starts = match line {
                Line::Version => true,
                Line::Plan(..) => indent == 0,
                _ => false,
            };
            if !starts {
                return;
            }
            // Less than one level of indentation before the line that
            // starts a document is a prefix of the log's (kunit_parser.py
            // strips whatever precedes the version line): the document's
            // own level.
            self.stack
                .push(Doc::new(if indent < 4 { indent } else { 0 }));
        }
        while self.stack.len() > 1 && self.top().indent > indent {
            self.close_nested();
        }
        // A version line or second plan at the level of a document that
        // already has content starts a new document.
        let restarts = match line {
            Line::Version => self.top().started(),
            Line::Plan(..) => self.top().plan.is_some(),
            _ => false,
        };
        if indent > self.top().indent {
            self.open_nested(indent);
        } else if restarts {
            if self.stack.len() == 1 {
                // At the root's level, which is below one level of
                // indentation: the next document's prefix.
                self.finish_root();
                self.stack.push(Doc::new(indent));
            } else {
                self.close_nested();
                self.open_nested(indent);
            }
        }

        let top = self.top();
        match line {
            Line::Version => {}
            Line::Plan(count, result) => {
                top.plan = Some(count);
                top.result = result;
            }
            Line::Subtest(name) if top.started() => top.next_name = Some(name),
            Line::Subtest(name) => top.name = Some(name),
            Line::Result(number, case) => top.add_result(number, case),
            Line::Bail(reason) => {
                top.errors
                    .push(format!("Bail out! {reason}").trim_end().into());
                self.stack.iter_mut().for_each(|doc| doc.bailed = true);
            }
        }

        // A top-level document ends with its last planned result, so that
        // stray "ok" lines later in a log are not taken for more tests.
        if let [root] = self.stack.as_slice() {
            if root.plan == Some(root.results) {
                self.finish_root();
            }
        }
    }

    /// The innermost open document; the stack is never empty here.
    fn top(&mut self) -> &mut Doc {
        self.stack.last_mut().expect("an open document")
    }

    fn open_nested(&mut self, indent: usize) {
        let parent = self.top();
        parent.orphan_pending();
        let name = parent.next_name.take();
        self.stack.push(Doc {
            name,
            ..Doc::new(indent)
        });
    }

    /// Closes the innermost nested document, leaving it for its parent's
    /// next result line.
    fn close_nested(&mut self) {
        if self.stack.len() > 1 {
            if let Some(doc) = self.stack.pop() {
                self.top().hold(doc);
            }
        }
    }

    /// Closes all open documents and turns the top-level one into suites.
    fn finish_root(&mut self) {
        while self.stack.len() > 1 {
            self.close_nested();
        }
        let Some(mut root) = self.stack.pop() else {
            return;
        };
        root.orphan_pending();

        if root.entries.iter().all(|e| e.sub.is_none()) {
            let name = match (self.name, &root.name) {
                ("", Some(name)) => name.clone(),
                ("", None) => "tap".into(),
                (name, _) => name.into(),
            };
            self.suites.push(root.into_suite(name, None, false));
            return;
        }

        let first = self.suites.len();
        for Entry { case, sub } in root.entries {
            self.suites.push(match (sub, case) {
                (Some(doc), case) => {
                    let name = doc.name.clone();
                    let name = name.or_else(|| case.as_ref().map(|c| c.name.clone()));
                    doc.into_suite(name.unwrap_or_default(), case, true)
                }
                (None, Some(case)) => Suite {
                    name: case.name.clone(),
                    plan: None,
                    cases: Vec::new(),
                    result: Some(case),
                    complete: true,
                    nested: true,
                    errors: Vec::new(),
                },
                (None, None) => continue,
            });
        }
        // Problems of the top-level document belong to the suite it
        // stopped in.
        let found = self.suites.len() - first;
        if let Some(last) = self.suites.last_mut() {
            last.complete &= !root.bailed;
            last.errors.extend(root.errors);
            if let Some(plan) = root.plan.filter(|&plan| plan != found) {
                last.errors
                    .push(format!("{found} suites for top-level plan 1..{plan}"));
            }
        }
    }
}

/// Strips a printk prefix: an optional syslog level (`<6>`), a timestamp
/// (`[    1.234567]`) and caller id (`[    T1]`), and the space after them.
fn strip_log_prefix(line: &str) -> &str {
    let mut s = line;
    if let Some((level, rest)) = s.strip_prefix('<').and_then(|r| r.split_once('>')) {
        if !level.is_empty() && level.bytes().all(|b| b.is_ascii_digit()) {
            s = rest;
        }
    }
    let mut stripped = false;
    while let Some((inner, rest)) = s.strip_prefix('[').and_then(|r| r.split_once(']')) {
        let inner = inner.trim_start();
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        let time = digits(&inner.replacen('.', "", 1));
        let caller = inner.strip_prefix(['T', 'C']).is_some_and(digits);
        if !time && !caller {
            break;
        }
        s = rest;
        stripped = true;
    }
    if stripped {
        s.strip_prefix(' ').unwrap_or(s)
    } else {
        s
    }
}

/// Recognises the structural lines of (K)TAP; `s` has no indentation.
fn classify(s: &str) -> Option<Line> {
    if s.starts_with("KTAP version ") || s.starts_with("TAP version ") {
        return Some(Line::Version);
    }
    if let Some(name) = s.strip_prefix("# Subtest:") {
        return Some(Line::Subtest(name.trim().into()));
    }
    if let Some(reason) = s.strip_prefix("Bail out!") {
        return Some(Line::Bail(reason.trim().into()));
    }
    if let Some(rest) = s.strip_prefix("1..") {
        let (count, rest) = leading_number(rest);
        let count = count?;
        let (text, comment) = split_comment(rest);
        if !text.is_empty() {
            return None;
        }
        let result = match comment.map(directive) {
            Some((Some(Outcome::Skip), reason)) => Some(Case {
                name: String::new(),
                outcome: Outcome::Skip,
                reason,
            }),
            _ => None,
        };
        return Some(Line::Plan(count, result));
    }

    let (ok, rest) = match s.strip_prefix("not ok") {
        Some(rest) => (false, rest),
        None => (true, s.strip_prefix("ok")?),
    };
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
        return None;
    }
    let (number, rest) = leading_number(rest.trim_start());
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix('-') {
        Some(r) if r.is_empty() || r.starts_with(char::is_whitespace) => r.trim_start(),
        _ => rest,
    };
    let (description, comment) = split_comment(rest);
    let (directive, reason) = comment.map_or((None, None), directive);
    let outcome = directive.unwrap_or(if ok { Outcome::Pass } else { Outcome::Fail });
    let name = description.replace("\\#", "#");
    Some(Line::Result(
        number,
        Case {
            name,
            outcome,
            reason,
        },
    ))
}

/// Splits the leading decimal number off `s`.
fn leading_number(s: &str) -> (Option<usize>, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    (s[..end].parse().ok(), &s[end..])
}

/// Splits text at the first `#` that starts a word, into the trimmed text
/// before and the trimmed comment after it.
fn split_comment(s: &str) -> (&str, Option<&str>) {
    let hash = s
        .char_indices()
        .find(|&(i, c)| c == '#' && (i == 0 || s[..i].ends_with(char::is_whitespace)));
    match hash {
        Some((i, _)) => (s[..i].trim(), Some(s[i + 1..].trim())),
        None => (s.trim(), None),
    }
}

/// Reads a comment's SKIP/TODO/XFAIL directive (case-insensitive), and the
/// reason: the rest of a directive, or the whole comment otherwise.
fn directive(comment: &str) -> (Option<Outcome>, Option<String>) {
    let (word, rest) = comment
        .split_once(char::is_whitespace)
        .unwrap_or((comment, ""));
    let outcome = match word.trim_end_matches(':').to_ascii_lowercase().as_str() {
        "skip" | "skipped" => Some(Outcome::Skip),
        "todo" | "xfail" => Some(Outcome::Todo),
        _ => None,
    };
    let reason = match outcome {
        Some(_) => rest.trim(),
        None => comment,
    };
    (outcome, (!reason.is_empty()).then(|| reason.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(name: &str, outcome: Outcome, reason: Option<&str>) -> Case {
        Case {
            name: name.into(),
            outcome,
            reason: reason.map(String::from),
        }
    }

    fn counts(pass: usize, fail: usize, skip: usize, todo: usize, missing: usize) -> Counts {
        Counts {
            pass,
            fail,
            skip,
            todo,
            missing,
        }
    }

    /// Prefixes each line with a dmesg timestamp.
    fn dmesg(lines: &str) -> String {
        lines
            .lines()
            .enumerate()
            .map(|(i, l)| format!("[{:5}.{:06}] {l}\n", i / 100, i % 100 * 1000))
            .collect()
    }

    const HMM: &str = "\
TAP version 13
1..5
# Starting 5 tests from 2 test cases.
#  RUN           hmm.hmm_device_private.open_close ...
#            OK  hmm.hmm_device_private.open_close
ok 1 hmm.hmm_device_private.open_close
#  RUN           hmm.hmm_device_private.anon_read ...
#            OK  hmm.hmm_device_private.anon_read
ok 2 hmm.hmm_device_private.anon_read
#  RUN           hmm.hmm_device_coherent.open_close ...
#      SKIP      DEVICE_COHERENT not available
#            OK  hmm.hmm_device_coherent.open_close
ok 3 hmm.hmm_device_coherent.open_close # SKIP DEVICE_COHERENT not available
#  RUN           hmm.hmm_device_private.migrate ...
# hmm-tests.c:300:migrate:Expected ret (-1) == 0 (0)
#            FAIL  hmm.hmm_device_private.migrate
not ok 4 hmm.hmm_device_private.migrate
ok 5 hmm.hmm_device_private.mixed # XFAIL known broken
# FAILED: 2 / 5 tests passed.
# Totals: pass:2 fail:1 xfail:1 xpass:0 skip:1 error:0
";

    const KUNIT: &str = "\
KTAP version 1
1..2
    KTAP version 1
    # Subtest: rust_doctests_kernel
    # speed: normal
    1..3
    ok 1 rust_doctest_kernel_alloc_kbox_rs_0
    ok 2 rust_doctest_kernel_alloc_kbox_rs_1
    ok 3 rust_doctest_kernel_sync_rs_0
# rust_doctests_kernel: pass:3 fail:0 skip:0 total:3
# Totals: pass:3 fail:0 skip:0 total:3
ok 1 rust_doctests_kernel
    KTAP version 1
    # Subtest: rvram
    1..4
    ok 1 rvram_alloc
        KTAP version 1
        # Subtest: rvram_param
        ok 1 size 4096
        not ok 2 size 0
    not ok 2 rvram_param
    # rvram_skipped: no hardware
    ok 3 rvram_skipped # SKIP no hardware
    ok 4 rvram_free
# rvram: pass:2 fail:1 skip:1 total:4
not ok 2 rvram
";

    #[test]
    fn empty_and_garbage_inputs_have_no_suites() {
        assert!(parse("").is_empty());
        assert!(parse("\n\n").is_empty());
        let garbage =
            "Linux version 7.3\nok computer\nnot okay\n# 1..3\nokay 1\n[  OK  ] Started\n";
        assert!(parse(&dmesg(garbage)).is_empty());
        // Results without a document are ignored.
        assert!(parse("ok 1 foo\nnot ok 2 bar\n").is_empty());
    }

    #[test]
    fn kselftest_harness_output() {
        let suites = parse_named(HMM, "hmm-tests");
        assert_eq!(suites.len(), 1);
        let s = &suites[0];
        assert_eq!(s.name, "hmm-tests");
        assert_eq!(s.plan, Some(5));
        assert!(s.complete);
        assert!(!s.nested);
        assert!(s.errors.is_empty());
        assert_eq!(s.result, None);
        assert_eq!(s.counts(), counts(2, 1, 1, 1, 0));
        assert_eq!(
            s.cases[2],
            case(
                "hmm.hmm_device_coherent.open_close",
                Outcome::Skip,
                Some("DEVICE_COHERENT not available")
            )
        );
        assert_eq!(
            s.cases[4],
            case(
                "hmm.hmm_device_private.mixed",
                Outcome::Todo,
                Some("known broken")
            )
        );
        let failed: Vec<_> = s.failures().map(|c| c.name.as_str()).collect();
        assert_eq!(failed, ["hmm.hmm_device_private.migrate"]);
        assert!(!s.ok());
    }

    #[test]
    fn passing_flat_suite_is_ok() {
        let s = &parse("TAP version 13\n1..2\nok 1 a\nok 2 b # skip Not Here\n")[0];
        assert_eq!(s.name, "tap");
        assert_eq!(s.counts(), counts(1, 0, 1, 0, 0));
        assert_eq!(s.cases[1].reason.as_deref(), Some("Not Here"));
        assert!(s.ok());
    }

    #[test]
    fn truncated_flat_suite_is_incomplete() {
        let text = HMM.lines().take(9).collect::<Vec<_>>().join("\n");
        let s = &parse_named(&text, "hmm")[0];
        assert_eq!(s.plan, Some(5));
        assert_eq!(s.counts(), counts(2, 0, 0, 0, 3));
        assert!(!s.complete);
        assert!(!s.ok());
    }

    #[test]
    fn missing_plan_is_incomplete() {
        let s = &parse("TAP version 13\nok 1 a\n")[0];
        assert_eq!(s.plan, None);
        assert_eq!(s.counts(), counts(1, 0, 0, 0, 0));
        assert!(!s.complete);
    }

    #[test]
    fn bail_out_is_incomplete_with_error() {
        let s = &parse("TAP version 13\n1..3\nok 1 a\nBail out! no /dev/hmm_dmirror0 (2)\n")[0];
        assert!(!s.complete);
        assert_eq!(s.errors, ["Bail out! no /dev/hmm_dmirror0 (2)"]);
        assert_eq!(s.counts(), counts(1, 0, 0, 0, 2));
        assert!(!s.ok());
    }

    #[test]
    fn out_of_order_numbers_are_errors() {
        let s = &parse("TAP version 13\n1..3\nok 1 a\nok 3 c\nok 2 b\n")[0];
        assert!(s.complete);
        assert_eq!(
            s.errors,
            [
                "test 3 (c) out of order, expected 2",
                "test 2 (b) out of order, expected 3"
            ]
        );
        assert_eq!(s.counts(), counts(3, 0, 0, 0, 0));
        assert!(!s.ok());
    }

    #[test]
    fn surplus_results_are_errors() {
        // With the plan at the end, the document runs on until it.
        let s = &parse("TAP version 14\nok 1 a\nok 2 b\nok 3 c\n1..2\n")[0];
        assert!(!s.complete);
        assert_eq!(s.errors, ["3 results for plan 1..2"]);
    }

    #[test]
    fn plan_at_end() {
        let s = &parse("TAP version 14\nok 1 - a\nnot ok 2 - b # TODO later\n1..2\n")[0];
        assert!(s.complete);
        assert_eq!(s.cases[0].name, "a");
        assert_eq!(s.cases[1], case("b", Outcome::Todo, Some("later")));
        assert!(s.ok());
    }

    #[test]
    fn skipped_plan_is_the_suite_result() {
        let s = &parse_named("TAP version 13\n1..0 # SKIP hmm not built\n", "hmm")[0];
        assert!(s.complete);
        assert_eq!(s.plan, Some(0));
        assert_eq!(
            s.result,
            Some(case("", Outcome::Skip, Some("hmm not built")))
        );
        assert_eq!(s.counts(), Counts::default());
        assert!(s.ok());
    }

    #[test]
    fn directives_and_comments() {
        let text = "\
1..7
ok 1 # SKIP
not ok 2 broken # skip:   not applicable
not ok 3 x #  child exited with 9
not ok 4 y # error could not fork
ok 5 z # XPASS unexpectedly passed
ok 6 - has \\# hash - and dash
ok 7 no#comment
";
        let s = &parse(text)[0];
        let got: Vec<_> = s
            .cases
            .iter()
            .map(|c| (c.name.as_str(), c.outcome, c.reason.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("test 1", Outcome::Skip, None),
                ("broken", Outcome::Skip, Some("not applicable")),
                ("x", Outcome::Fail, Some("child exited with 9")),
                ("y", Outcome::Fail, Some("error could not fork")),
                ("z", Outcome::Pass, Some("XPASS unexpectedly passed")),
                ("has # hash - and dash", Outcome::Pass, None),
                ("no#comment", Outcome::Pass, None),
            ]
        );
        assert_eq!(s.counts(), counts(3, 2, 2, 0, 0));
    }

    #[test]
    fn kunit_suites_in_dmesg() {
        let log = format!(
            "[    0.000000] Linux version 7.3.0\n{}[    9.000000] Run /sbin/init\n",
            dmesg(KUNIT)
        );
        let suites = parse(&log);
        assert_eq!(suites.len(), 2);

        let doc = &suites[0];
        assert_eq!(doc.name, "rust_doctests_kernel");
        assert!(doc.nested && doc.complete && doc.ok());
        assert_eq!(doc.plan, Some(3));
        assert_eq!(doc.counts(), counts(3, 0, 0, 0, 0));
        assert_eq!(doc.cases[0].name, "rust_doctest_kernel_alloc_kbox_rs_0");
        assert_eq!(
            doc.result,
            Some(case("rust_doctests_kernel", Outcome::Pass, None))
        );

        let rvram = &suites[1];
        assert_eq!(rvram.name, "rvram");
        assert!(rvram.complete);
        assert!(rvram.errors.is_empty());
        // The parameterised test counts once, by its own result line.
        let names: Vec<_> = rvram.cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["rvram_alloc", "rvram_param", "rvram_skipped", "rvram_free"]
        );
        assert_eq!(rvram.counts(), counts(2, 1, 1, 0, 0));
        assert_eq!(rvram.cases[2].reason.as_deref(), Some("no hardware"));
        assert_eq!(
            rvram.result.as_ref().map(|r| r.outcome),
            Some(Outcome::Fail)
        );
        assert!(!rvram.ok());
    }

    #[test]
    fn kunit_with_interleaved_kernel_messages() {
        let text = "\
KTAP version 1
1..1
    KTAP version 1
    # Subtest: rvram
    1..2
rvram 0000:00:04.0: probed 64 MiB
random: crng init done
    ok 1 a
        # a debug line
    ok 2 b
ok 1 rvram
";
        let suites = parse(&dmesg(text));
        assert_eq!(suites.len(), 1);
        assert_eq!(suites[0].counts(), counts(2, 0, 0, 0, 0));
        assert!(suites[0].ok());
    }

    #[test]
    fn kunit_suite_failing_without_failed_cases() {
        let s = &parse(
            "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: s\n    1..0\nnot ok 1 s\n",
        )[0];
        assert!(s.complete);
        assert_eq!(s.counts(), Counts::default());
        assert!(!s.ok());
    }

    #[test]
    fn crash_mid_kunit_suite_is_incomplete() {
        let text = "\
KTAP version 1
1..3
    KTAP version 1
    # Subtest: first
    1..1
    ok 1 one
ok 1 first
    KTAP version 1
    # Subtest: rvram
    1..5
    ok 1 a
    ok 2 b
        KTAP version 1
        # Subtest: params
        ok 1 p0
BUG: kernel NULL pointer dereference, address: 0000000000000008
Oops: 0002 [#1] SMP KASAN
RIP: 0010:rvram_test+0x12/0x40
";
        let suites = parse(&dmesg(text));
        assert_eq!(suites.len(), 2);
        assert!(suites[0].ok());
        let s = &suites[1];
        assert_eq!(s.name, "rvram");
        assert!(!s.complete);
        assert_eq!(s.result, None);
        assert_eq!(s.counts(), counts(2, 0, 0, 0, 3));
        assert_eq!(s.errors, ["2 suites for top-level plan 1..3"]);
        assert!(!s.ok());
    }

    #[test]
    fn top_level_bail_out_marks_the_last_suite() {
        let text = "KTAP version 1\n1..2\n    KTAP version 1\n    # Subtest: a\n    1..1\n    ok 1 x\nok 1 a\nBail out! executor died\n";
        let suites = parse(text);
        assert_eq!(suites.len(), 1);
        assert!(!suites[0].complete);
        assert_eq!(
            suites[0].errors,
            [
                "Bail out! executor died",
                "1 suites for top-level plan 1..2"
            ]
        );
    }

    #[test]
    fn kunit_suite_without_closing_line_is_incomplete() {
        // All planned cases ran, but the suite's own line never came.
        let text =
            "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: s\n    1..1\n    ok 1 a\n";
        let s = &parse(text)[0];
        assert_eq!(s.counts(), counts(1, 0, 0, 0, 0));
        assert!(s.nested);
        assert!(!s.complete);
    }

    #[test]
    fn several_kunit_runs_in_one_log() {
        // Built-in suites at boot, then a module's suite on modprobe.
        let module = "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: rvram_mod\n    1..1\n    ok 1 m\nok 1 rvram_mod\n";
        let text = format!("{KUNIT}some other line\n{module}");
        let names: Vec<_> = parse(&dmesg(&text)).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["rust_doctests_kernel", "rvram", "rvram_mod"]);
    }

    #[test]
    fn several_flat_documents() {
        let text = "TAP version 13\n1..1\nok 1 a\nTAP version 13\n1..2\nok 1 b\n";
        let suites = parse_named(text, "x");
        assert_eq!(suites.len(), 2);
        assert!(suites[0].complete);
        assert!(!suites[1].complete);
        assert_eq!(suites[1].counts(), counts(1, 0, 0, 0, 1));
        // An un-versioned plan also starts a document.
        assert_eq!(parse("1..1\nok 1 a\n1..1\nnot ok 1 b\n").len(), 2);
    }

    #[test]
    fn empty_kunit_run_is_one_empty_flat_suite() {
        let suites = parse(&dmesg("KTAP version 1\n1..0\n"));
        assert_eq!(suites.len(), 1);
        assert!(!suites[0].nested);
        assert!(suites[0].complete);
        assert!(suites[0].cases.is_empty());
    }

    #[test]
    fn stray_results_after_a_complete_document_are_ignored() {
        let text = "TAP version 13\n1..1\nok 1 a\nok 2 stray\n";
        let suites = parse(text);
        assert_eq!(suites.len(), 1);
        assert!(suites[0].ok());
    }

    #[test]
    fn tap14_subtest_name_at_parent_level() {
        let text = "\
TAP version 14
1..2
# Subtest: foo
    1..2
    ok 1
    ok 2 - this passed
ok 1 - foo.tap
# Subtest: bar
    1..1
    not ok 1 nope
not ok 2 - bar.tap
";
        let suites = parse(text);
        let names: Vec<_> = suites.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["foo", "bar"]);
        assert_eq!(suites[0].cases[0].name, "test 1");
        assert!(suites[0].ok());
        assert_eq!(suites[1].counts(), counts(0, 1, 0, 0, 0));
    }

    #[test]
    fn old_kunit_format_without_nested_version_lines() {
        let text = "TAP version 14\n1..1\n    # Subtest: example\n    1..1\n    ok 1 - example_simple_test\nok 1 - example\n";
        let s = &parse(text)[0];
        assert_eq!(s.name, "example");
        assert!(s.ok());
    }

    #[test]
    fn log_that_lost_its_top_level_header() {
        let text = "    ok 40 x\n    ok 41 y\nok 1 lost\n    KTAP version 1\n    # Subtest: rvram\n    1..1\n    ok 1 a\nok 2 rvram\n";
        let suites = parse(&dmesg(text));
        assert_eq!(suites.len(), 1);
        assert_eq!(suites[0].name, "rvram");
        assert!(suites[0].complete);
        // The closing line's number is off because of the lost context.
        assert_eq!(
            suites[0].errors,
            ["test 2 (rvram) out of order, expected 1"]
        );
    }

    #[test]
    fn top_level_result_without_subtest_becomes_a_suite() {
        let text = "KTAP version 1\n1..2\n    KTAP version 1\n    # Subtest: a\n    1..1\n    ok 1 x\nok 1 a\nok 2 b # SKIP not built\n";
        let suites = parse(text);
        assert_eq!(suites.len(), 2);
        assert_eq!(suites[1].name, "b");
        assert_eq!(
            suites[1].result,
            Some(case("b", Outcome::Skip, Some("not built")))
        );
        assert!(suites[1].ok());
    }

    #[test]
    fn log_prefixes_are_stripped() {
        let text = "\
<6>[    1.000000][    T1] KTAP version 1\r
<6>[    1.000001][    T1] 1..1\r
<6>[    1.000002][    C0]     KTAP version 1\r
<6>[    1.000003][    T1]     # Subtest: s\r
<6>[    1.000004][    T1]     1..1\r
<6>[    1.000005][    T1]     ok 1 a\r
<6>[    1.000006][    T1] ok 1 s\r
";
        let suites = parse(text);
        assert_eq!(suites.len(), 1);
        assert_eq!(suites[0].name, "s");
        assert_eq!(suites[0].cases, [case("a", Outcome::Pass, None)]);
        assert!(suites[0].ok());
    }

    #[test]
    fn strip_log_prefix_cases() {
        assert_eq!(strip_log_prefix("[    1.234567] ok 1"), "ok 1");
        assert_eq!(strip_log_prefix("[    1.234567]     ok 1"), "    ok 1");
        assert_eq!(strip_log_prefix("[12345.000001][  T123] x"), "x");
        assert_eq!(strip_log_prefix("<4>[    1.5] x"), "x");
        assert_eq!(strip_log_prefix("[  OK  ] Started"), "[  OK  ] Started");
        assert_eq!(strip_log_prefix("[1.2.3] x"), "[1.2.3] x");
        assert_eq!(strip_log_prefix("    ok 1"), "    ok 1");
    }

    #[test]
    fn tabs_indent_like_four_spaces() {
        let text =
            "KTAP version 1\n1..1\n\tKTAP version 1\n\t# Subtest: t\n\t1..1\n\tok 1 a\nok 1 t\n";
        let suites = parse(text);
        assert_eq!(suites.len(), 1);
        assert!(suites[0].nested && suites[0].ok());
    }

    #[test]
    fn a_prefix_under_one_level_is_the_document_level() {
        // As in the kernel's test_pound_no_prefix.log: one space before
        // every line, a tab more for the suites, other output between.
        let text = " printk: console enabled\n TAP version 14\n 1..2\n \t# Subtest: s\n \t1..2\n \tok 1 - a\n  foo bar \t#\n \tok 2 - b\n ok 1 - s\n  foo bar \t# non-kunit output\n \t# Subtest: t\n \t1..1\n \tok 1 - c\n ok 2 - t\n List of all partitions:\n";
        let suites = parse(text);
        let names: Vec<&str> = suites.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["s", "t"]);
        assert_eq!(suites[0].counts().pass, 2);
        assert!(suites.iter().all(Suite::ok));
    }

    #[test]
    fn an_empty_plan_without_skip_is_not_ok() {
        let suites = parse("TAP version 14\n1..0\n");
        assert_eq!(suites.len(), 1);
        assert!(!suites[0].ok());
        let skipped = parse("TAP version 14\n1..0 # SKIP no device\n");
        assert!(skipped[0].ok());
    }

    #[test]
    fn a_prefixed_document_after_another() {
        let text = " TAP version 14\n 1..2\n ok 1 - a\n TAP version 14\n 1..1\n ok 1 - b\n";
        let suites = parse_named(text, "x");
        assert_eq!(suites.len(), 2);
        assert!(!suites[0].nested && !suites[0].complete);
        assert!(!suites[1].nested && suites[1].ok());
        assert_eq!(suites[1].cases[0].name, "b");
    }
}
