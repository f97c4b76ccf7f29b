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
    /// The last [`NOTES`] comment lines at the case's level between the
    /// previous result line and this one: where KUnit and the kselftest
    /// harness print why a case failed.
    pub before: Vec<String>,
    /// The first [`NOTES`] comment lines at the case's level after this
    /// result line, up to the next: where TAP 13 puts diagnostics.
    pub after: Vec<String>,
}

/// Comment lines kept on each side of a result line.
pub const NOTES: usize = 8;

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
    /// The last [`NOTES`] comment lines at this level since the last result
    /// line.
    comments: Vec<String>,
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

    /// Keeps a comment line for the result lines on either side of it.
    fn comment(&mut self, text: &str) {
        if let Some(Entry {
            case: Some(last), ..
        }) = self.entries.last_mut()
        {
            if last.after.len() < NOTES {
                last.after.push(text.into());
            }
        }
        if self.comments.len() == NOTES {
            self.comments.remove(0);
        }
        self.comments.push(text.into());
    }

    fn add_result(&mut self, number: Option<usize>, mut case: Case) {
        case.before = std::mem::take(&mut self.comments);
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
        let body = body.trim_end();
        if let Some(line) = classify(body) {
            self.structural(indent, line);
        } else if body.starts_with('#') {
            if let Some(top) = self.stack.last_mut().filter(|d| d.indent == indent) {
                top.comment(body.trim_start_matches('#').trim());
            }
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
                before: Vec::new(),
                after: Vec::new(),
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
            before: Vec::new(),
            after: Vec::new(),
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
mod tests;
