// SPDX-License-Identifier: GPL-2.0
//! Summary of one VM test run's results directory.
//!
//! The directory holds:
//! - `suites/<name>.tap` and `suites/<name>.rc`: each in-guest suite's
//!   (K)TAP output and exit code, written by the in-guest runner;
//! - `dmesg.txt`: the guest kernel log, absent if the guest died first;
//! - `console.log`: the serial console captured by the host, the kernel log
//!   of last resort;
//! - `console-boot<N>.log`: the consoles of boots that `tools/vm.sh` gave up
//!   on and retried. A retry is excused only by its one known benign cause,
//!   the base kernel's boot storm ([`KNOWN_SPLATS`]), whose reports are
//!   left out; a retried boot without it (one that hung or was too slow to
//!   start its plan), a splat there or a KUnit case that failed there fails
//!   the run like one in the last boot;
//! - `expected`: the suite names that must appear, one a line (`kunit:<name>`
//!   for a KUnit suite in the kernel log);
//! - `expected-skips`: `<name> <count> | <glob> | <glob>...` lines: how
//!   many cases of a suite skip (or are `# TODO`/`# XFAIL`), and which:
//!   each such case must match a glob (`*` matches any text), so a new skip
//!   cannot take the place of an old one. `<name> any` for a development
//!   plan whose cases are the caller's choice. A suite skips exactly what is
//!   declared, nothing if it is not;
//! - `timeout`: present when the host killed the guest;
//! - `kmemleak.txt`: kmemleak's report after the guest's final scans; a
//!   leak attributable to the series or rvram fails the run
//!   ([`crate::kmemleak`]), others are listed.

use std::collections::HashMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::Path;

use crate::kmemleak::{self, Leak};
use crate::ktap::{self, Counts, Outcome, Suite};

/// Kernel log substrings that mark a splat, taken from the printers of the
/// base kernel (Linux 7.3). Each is the header of a report; the lines that
/// follow it are not needed to judge the run.
const SPLAT_MARKERS: &[&str] = &[
    // BUG() is "kernel BUG at"; "BUG: " heads KASAN's reports
    // (mm/kasan/report.c), soft lockups ("watchdog: BUG: soft lockup",
    // kernel/watchdog.c), workqueue lockups ("BUG: workqueue lockup",
    // kernel/workqueue.c), sleeping in atomic context, bad page state,
    // lockdep's "[ BUG: Invalid wait context ]" and MAX_* overflows.
    "BUG:",
    "kernel BUG at",
    "Oops",
    "general protection fault",
    "RIP:",
    "Kernel panic",
    // mm/debug.c dump_page(): VM_BUG_ON_PAGE(), VM_WARN_ON_*_PAGE/FOLIO(),
    // bad page state and KASAN print it.
    "page dumped because:",
    // mm/page_alloc.c warn_alloc() from the page allocator (is_splat()
    // catches its other callers by the format they share).
    "page allocation failure",
    // Before every WARN() and BUG() (CUT_HERE) and UBSAN's reports: still
    // there when the header line after it is mangled on the console.
    "[ cut here ]",
    // WARN_ON() before Linux 6.19 (also matched by is_splat() since then).
    "WARNING: CPU:",
    // kernel/locking/lockdep.c: every report is a "WARNING: " title under
    // a "====" banner (is_splat_after() catches titles not listed here).
    "WARNING: possible circular locking dependency",
    "-unsafe lock order detected",
    "WARNING: possible recursive locking",
    "WARNING: chain_key collision",
    "WARNING: inconsistent lock state",
    "WARNING: possible irq lock inversion dependency",
    "WARNING: Nested lock was not taken",
    "WARNING: bad unlock balance",
    "WARNING: bad contention",
    "WARNING: held lock freed",
    " still has locks held!",
    "WARNING: lock held when returning to user space",
    "WARNING: suspicious RCU usage",
    "INFO: trying to register non-static key",
    // kernel/hung_task.c: "INFO: task comm:pid blocked for more than N
    // seconds." and the lines naming what it is blocked on.
    "INFO: task ",
    // kernel/rcu/tree_stall.h and tree_exp.h: "rcu: INFO: rcu_preempt
    // detected stalls on CPUs/tasks:", "... self-detected stall on CPU",
    // "... detected expedited stalls"; kernel/rcu/tasks.h.
    "rcu: INFO: ",
    "INFO: rcu_tasks detected stalls",
    // kernel/watchdog.c (the buddy detector of watchdog_buddy.c):
    // "watchdog: CPU1: Watchdog detected hard LOCKUP on cpu 0".
    "Watchdog detected hard LOCKUP",
    // lib/refcount.c, as the message of its WARN_ONCE().
    "refcount_t: ",
    // lib/ubsan.c: "UBSAN: array-index-out-of-bounds in file:line:col".
    "UBSAN:",
    // lib/list_debug.c, as the message of its WARN() or before its BUG().
    "list_add corruption",
    "list_del corruption",
    "list_add double add",
    // mm/debug.c dump_page(): VM_BUG_ON_PAGE(), VM_WARN_ON_FOLIO(), bad
    // page state, bad page map.
    "page dumped because: ",
    // warn_alloc() of a vmalloc() a user could ask for (lib/test_hmm's
    // bounce buffer before this series): a stack dump from user input.
    "vmalloc error: size",
];

/// How many splat lines the report prints.
const SHOWN_SPLATS: usize = 3;

/// Where a suite's results came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `suites/<name>.tap`, with the exit code from `suites/<name>.rc`;
    /// `None` if that file is missing, i.e. the suite did not finish.
    Tap {
        /// The suite's exit code.
        rc: Option<i32>,
    },
    /// A KUnit suite in the kernel log.
    Kunit,
}

/// One suite of the run.
#[derive(Clone, Debug)]
pub struct SuiteRun {
    /// File stem of the `.tap` file, or `kunit:<suite>`.
    pub name: String,
    /// Where the results came from.
    pub source: Source,
    /// The parsed results.
    pub suite: Suite,
    /// How many skips `expected-skips` declares for the suite (summed over
    /// the documents of one `.tap` file); `None` for `any`.
    pub expected_skips: Option<usize>,
    /// The suite's skips, summed as `expected_skips` is.
    pub skips_seen: usize,
    /// Its skipped cases that no declared glob names (all of them when a
    /// count is declared without names).
    pub unnamed_skips: Vec<String>,
}

impl SuiteRun {
    /// Whether the suite is complete, nothing failed, it exited with 0 and
    /// it skipped what was declared.
    pub fn passed(&self) -> bool {
        self.suite.ok()
            && matches!(self.source, Source::Kunit | Source::Tap { rc: Some(0) })
            && self.skips_as_expected()
    }

    /// Whether the suite skipped exactly as many cases as declared. Fewer
    /// fails too: a declaration above the real count would let that many
    /// new skips pass unseen.
    pub fn skips_as_expected(&self) -> bool {
        self.expected_skips
            .is_none_or(|n| n == self.skips_seen && self.unnamed_skips.is_empty())
    }

    /// Skipped and TODO/XFAIL cases by name, and a whole suite skipped by
    /// its plan (`1..0 # SKIP`) as one, named `(whole suite)`.
    fn skipped(&self) -> Vec<String> {
        let suite = &self.suite;
        let whole = suite.cases.is_empty()
            && suite
                .result
                .as_ref()
                .is_some_and(|r| r.outcome == Outcome::Skip);
        let mut names: Vec<String> = suite
            .cases
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Skip | Outcome::Todo))
            .map(|c| c.name.clone())
            .collect();
        if whole {
            names.push("(whole suite)".into());
        }
        names
    }

    /// Notes for the report: why the suite did not pass, apart from its
    /// failed cases, and why a whole suite was skipped.
    fn notes(&self) -> Vec<String> {
        let suite = &self.suite;
        let mut notes = Vec::new();
        match self.source {
            Source::Tap { rc: None } => notes.push("did not finish: no exit code".into()),
            Source::Tap { rc: Some(rc) } if rc != 0 => notes.push(format!("exit code {rc}")),
            _ => {}
        }
        if !suite.complete {
            let missing = suite.counts().missing;
            notes.push(match suite.plan {
                None if suite.cases.is_empty() => "no TAP output".into(),
                None => "no test plan".into(),
                Some(plan) if missing > 0 => format!("incomplete: {missing} of {plan} missing"),
                Some(_) => "incomplete".into(),
            });
        }
        if let Some(result) = &suite.result {
            match (result.outcome, &result.reason) {
                (Outcome::Fail, _) if suite.failures().next().is_none() => {
                    notes.push("suite reported not ok".into())
                }
                (Outcome::Skip, Some(reason)) => notes.push(format!("skipped: {reason}")),
                _ => {}
            }
        }
        notes.extend(suite.errors.iter().cloned());
        // An incomplete suite's count means nothing: it says so above.
        let counted = suite.complete && !self.skips_as_expected();
        if let Some(n) = self.expected_skips.filter(|_| counted) {
            notes.push(format!(
                "{} skipped, {n} expected (expect_skips in tests/vm/guest.sh)",
                self.skips_seen
            ));
            if let Some(first) = self.unnamed_skips.first() {
                notes.push(format!(
                    "{} skip(s) no expect_skips glob names, e.g. {first:?}",
                    self.unnamed_skips.len()
                ));
            }
        }
        notes
    }
}

/// A kernel log line that reports a bug, warning or crash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Splat {
    /// 1-based line number in the kernel log.
    pub line: usize,
    /// The line, as logged.
    pub text: String,
}

/// A boot that `tools/vm.sh` gave up on and retried.
#[derive(Clone, Debug, PartialEq)]
pub struct RetriedBoot {
    /// Its console, `console-boot<N>.log`.
    pub name: String,
    /// Splat lines in it, the known storm's reports left out.
    pub splats: Vec<Splat>,
    /// Whether a whole report of the known storm is in it: the one cause
    /// that excuses a retry.
    pub known_cause: bool,
    /// KUnit cases (`suite.case`, or a suite) that failed in it.
    pub kunit_failures: Vec<String>,
}

impl RetriedBoot {
    fn read(name: String, text: &str) -> Self {
        // tools/vm.sh killed these guests: their last lines may be cut.
        let (splats, known_cause) = splats_and_storm(text, true);
        let mut kunit_failures = Vec::new();
        for suite in ktap::parse(text).into_iter().filter(|s| s.nested) {
            let before = kunit_failures.len();
            kunit_failures.extend(
                suite
                    .failures()
                    .map(|c| format!("{}.{}", suite.name, c.name)),
            );
            let failed = suite
                .result
                .as_ref()
                .is_some_and(|r| r.outcome == Outcome::Fail);
            if failed && kunit_failures.len() == before {
                kunit_failures.push(suite.name.clone());
            }
        }
        Self {
            name,
            splats,
            known_cause,
            kunit_failures,
        }
    }

    /// Whether the retry hides nothing: its known cause is there, and no
    /// other report or failure.
    pub fn ok(&self) -> bool {
        self.known_cause && self.splats.is_empty() && self.kunit_failures.is_empty()
    }
}

/// The verdict on one test run.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Suites from `suites/*.tap`, then KUnit suites from the kernel log.
    pub suites: Vec<SuiteRun>,
    /// Expected suites that never ran.
    pub missing: Vec<String>,
    /// Which file served as the kernel log: `dmesg.txt` or `console.log`.
    pub kernel_log: &'static str,
    /// Splat lines in the kernel log.
    pub splats: Vec<Splat>,
    /// The boots `tools/vm.sh` retried (`console-boot<N>.log`), in order.
    pub retried_boots: Vec<RetriedBoot>,
    /// Whether the host killed the guest.
    pub timeout: bool,
    /// kmemleak's unreferenced objects after the final scans.
    pub leaks: Vec<Leak>,
}

impl Summary {
    /// Whether the run passed: at least one suite, every suite passed, no
    /// expected suite is missing, no splat and no timeout.
    pub fn ok(&self) -> bool {
        !self.suites.is_empty()
            && self.suites.iter().all(SuiteRun::passed)
            && self.missing.is_empty()
            && self.splats.is_empty()
            && self.retried_boots.iter().all(RetriedBoot::ok)
            && !self.timeout
            && self.leaks.iter().all(|leak| leak.ours.is_none())
    }

    /// Every skip as (suite, case, reason); the case is empty when a whole
    /// suite was skipped, the reason when none was given.
    pub fn skips(&self) -> Vec<(&str, &str, &str)> {
        let mut skips = Vec::new();
        for run in &self.suites {
            let suite = &run.suite;
            let whole = suite.result.iter().filter(|_| suite.cases.is_empty());
            for case in whole.chain(&suite.cases) {
                if case.outcome == Outcome::Skip {
                    let case_name = if suite.cases.is_empty() {
                        ""
                    } else {
                        &case.name
                    };
                    let reason = case.reason.as_deref().unwrap_or("");
                    skips.push((run.name.as_str(), case_name, reason));
                }
            }
        }
        skips
    }

    /// Case counts summed over all suites.
    pub fn totals(&self) -> Counts {
        self.suites
            .iter()
            .map(|run| run.suite.counts())
            .fold(Counts::default(), |a, b| Counts {
                pass: a.pass + b.pass,
                fail: a.fail + b.fail,
                skip: a.skip + b.skip,
                todo: a.todo + b.todo,
                missing: a.missing + b.missing,
            })
    }
}

/// Reads and judges the results directory `dir`.
pub fn summarize(dir: &Path) -> io::Result<Summary> {
    let mut suites = tap_suites(&dir.join("suites"))?;

    let console = read_optional(&dir.join("console.log"))?.unwrap_or_default();
    let (kernel_log, log) = match read_optional(&dir.join("dmesg.txt"))? {
        Some(log) => ("dmesg.txt", log),
        None => ("console.log", console.clone()),
    };
    // The guest writes dmesg.txt last, but a splat can still follow it (at
    // module unload, at shutdown): the console is always scanned too.
    let mut splat_lines = splats(&log);
    if kernel_log != "console.log" {
        for s in splats(&console) {
            let text = strip_timestamp(&s.text);
            if !splat_lines.iter().any(|d| strip_timestamp(&d.text) == text) {
                splat_lines.push(s);
            }
        }
    }
    // KUnit suites are always nested; a flat document in the log is
    // userspace output on the console, or an empty KUnit run.
    suites.extend(
        ktap::parse(&log)
            .into_iter()
            .filter(|suite| suite.nested)
            .map(|suite| SuiteRun {
                name: format!("kunit:{}", suite.name),
                source: Source::Kunit,
                suite,
                expected_skips: Some(0),
                skips_seen: 0,
                unnamed_skips: Vec::new(),
            }),
    );

    let expected = read_optional(&dir.join("expected"))?.unwrap_or_default();
    let missing = expected
        .lines()
        .map(str::trim)
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .filter(|&name| !suites.iter().any(|run| runs_as(&run.name, name)))
        .map(String::from)
        .collect();

    let skips = read_optional(&dir.join("expected-skips"))?.unwrap_or_default();
    check_skips(&mut suites, &parse_expected_skips(&skips));

    let mut retried_boots = Vec::new();
    for name in boot_consoles(dir)? {
        let text = read_optional(&dir.join(&name))?.unwrap_or_default();
        retried_boots.push(RetriedBoot::read(name, &text));
    }

    Ok(Summary {
        suites,
        missing,
        kernel_log,
        splats: splat_lines,
        retried_boots,
        timeout: dir.join("timeout").try_exists()?,
        leaks: kmemleak::parse(&read_optional(&dir.join("kmemleak.txt"))?.unwrap_or_default()),
    })
}

/// Whether the suite run `run` is (part of) the expected suite `name`: a
/// `.tap` file with several documents yields `<name>/<document>` runs.
fn runs_as(run: &str, name: &str) -> bool {
    run.strip_prefix(name)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// A line of `expected-skips`.
#[derive(Clone, Debug, PartialEq)]
struct Declared {
    name: String,
    /// `None` for `any`.
    count: Option<usize>,
    /// The globs that name the skipped cases.
    globs: Vec<String>,
}

/// `expected-skips`: `<name> <count> | <glob>...` or `<name> any` a line,
/// `#` comments. A malformed count reads as 0: the suite then fails if it
/// skips at all.
fn parse_expected_skips(text: &str) -> Vec<Declared> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut parts = l.split(" | ");
            let (name, count) = parts.next()?.split_once(char::is_whitespace)?;
            let count = match count.trim() {
                "any" => None,
                n => Some(n.parse().unwrap_or(0)),
            };
            Some(Declared {
                name: name.to_string(),
                count,
                globs: parts.map(|g| g.trim().to_string()).collect(),
            })
        })
        .collect()
}

/// Whether `text` matches `glob`, whose `*` matches any text.
fn glob_match(glob: &str, text: &str) -> bool {
    let mut parts = glob.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Holds each suite to its declared skips, none when undeclared. The
/// documents of one `.tap` file (`<name>/<document>`), and the runs of one
/// KUnit suite loaded several times, share their count.
fn check_skips(suites: &mut [SuiteRun], declared: &[Declared]) {
    let undeclared = Declared {
        name: String::new(),
        count: Some(0),
        globs: Vec::new(),
    };
    let group = |run: &SuiteRun| -> (String, &Declared) {
        declared
            .iter()
            .rev()
            .find(|d| runs_as(&run.name, &d.name))
            .map_or((run.name.clone(), &undeclared), |d| (d.name.clone(), d))
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    for run in suites.iter() {
        *seen.entry(group(run).0).or_default() += run.skipped().len();
    }
    for run in suites.iter_mut() {
        let (name, d) = group(run);
        let (count, globs) = (d.count, &d.globs);
        let unnamed = run
            .skipped()
            .into_iter()
            .filter(|c| !globs.iter().any(|g| glob_match(g, c)))
            .collect();
        run.expected_skips = count;
        run.skips_seen = seen[&name];
        run.unnamed_skips = if count.is_some() { unnamed } else { Vec::new() };
    }
}

/// The `console-boot<N>.log` files in `dir`, by boot.
fn boot_consoles(dir: &Path) -> io::Result<Vec<String>> {
    let entries = match fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        entries => entries?,
    };
    let mut boots = Vec::new();
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let n = name
            .strip_prefix("console-boot")
            .and_then(|r| r.strip_suffix(".log"));
        if let Some(n) = n {
            // A name that is not a number still is a console: read it last.
            boots.push((n.parse().unwrap_or(usize::MAX), name));
        }
    }
    boots.sort();
    Ok(boots.into_iter().map(|(_, name)| name).collect())
}

/// Parses `dir/*.tap` with their `.rc` files.
fn tap_suites(dir: &Path) -> io::Result<Vec<SuiteRun>> {
    let entries = match fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        entries => entries?,
    };
    let mut names = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let is_result = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("tap" | "rc")
        );
        if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
            if is_result {
                names.push(stem.to_string());
            }
        }
    }
    names.sort();
    names.dedup();

    let mut runs = Vec::new();
    for name in names {
        let text = read_optional(&dir.join(format!("{name}.tap")))?.unwrap_or_default();
        let rc = read_optional(&dir.join(format!("{name}.rc")))?;
        let source = Source::Tap {
            rc: rc.and_then(|rc| rc.trim().parse().ok()),
        };
        let mut parsed = ktap::parse_named(&text, &name);
        if parsed.is_empty() {
            parsed.push(Suite {
                name: name.clone(),
                plan: None,
                cases: Vec::new(),
                result: None,
                complete: false,
                nested: false,
                errors: Vec::new(),
            });
        }
        let several = parsed.len() > 1;
        runs.extend(parsed.into_iter().map(|suite| SuiteRun {
            name: if several {
                format!("{name}/{}", suite.name)
            } else {
                name.clone()
            },
            source: source.clone(),
            suite,
            expected_skips: Some(0),
            skips_seen: 0,
            unnamed_skips: Vec::new(),
        }));
    }
    Ok(runs)
}

/// Reads a file that may be absent, tolerating invalid UTF-8 (a serial
/// console carries line noise).
fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Splats of the base kernel that are not ours and not under test, as
/// (first line, a line of the same report).
///
/// - With 5-level paging, an interrupt that arrives while `identify_cpu()`
///   has cleared `boot_cpu_data`'s capabilities sees
///   `pgtable_l5_enabled()` false, and KASAN reports the handler's
///   direct-map accesses as wild: a wild-memory-access report in
///   `do_raw_spin_lock()` from `handle_edge_irq()`, seen intermittently
///   on stock 7.3.4 code under QEMU TCG. `tools/vm.sh` boots with
///   `no5lvl`, which closes the window; a report that still shows up is
///   not ours. Reports that keep coming stall the boot: `tools/vm.sh`
///   kills it, keeps its console as `console-boot<N>.log` and boots again.
///   These reports are left out there too, and nothing else is: the guest
///   boots with `kasan_multi_shot`, so they cannot hide a later report.
///   Any wild access the handler makes in that window is the same storm
///   (do_raw_spin_lock() is the one seen), and none can be ours: nothing
///   of the series or rvram runs before `identify_boot_cpu()` returns.
const KNOWN_SPLATS: &[(&str, &str)] =
    &[("BUG: KASAN: wild-memory-access in ", "identify_boot_cpu")];

/// How many lines a known splat's report spans at most, when KASAN's closing
/// banner does not end it sooner.
const KNOWN_SPAN: usize = 60;

/// Whether `line` is a banner of `=` (KASAN's, lockdep's).
fn is_banner(line: &str) -> bool {
    let t = strip_timestamp(line).trim_end();
    t.len() >= 20 && t.bytes().all(|b| b == b'=')
}

/// If a report of [`KNOWN_SPLATS`] starts at `lines[i]`, the index of the
/// first line after it. `complete` records the kinds seen whole so far.
///
/// A report ends at the next banner, or after [`KNOWN_SPAN`] lines, and is
/// known if its context line is in it. In the console of a guest that
/// `tools/vm.sh` killed (`killed`), which it does in the middle of the
/// storm, one cut short by the end of the log is known if a whole one of
/// the same kind came before it.
fn known_report(lines: &[&str], i: usize, killed: bool, complete: &mut [bool]) -> Option<usize> {
    for (k, (first, ctx)) in KNOWN_SPLATS.iter().enumerate() {
        if !lines[i].contains(first) {
            continue;
        }
        let cap = (i + KNOWN_SPAN).min(lines.len());
        let closing = (i + 1..cap).find(|&j| is_banner(lines[j]));
        let end = closing.map_or(cap, |j| j + 1);
        if lines[i..end].iter().any(|l| l.contains(ctx)) {
            complete[k] = true;
            return Some(end);
        }
        if killed && closing.is_none() && end == lines.len() && complete[k] {
            return Some(end);
        }
    }
    None
}

/// Finds the splat lines in a kernel log, leaving out the reports of
/// [`KNOWN_SPLATS`].
pub(crate) fn splats(log: &str) -> Vec<Splat> {
    splats_in(log, false)
}

/// [`splats`] of a log that ends where `tools/vm.sh` killed the guest
/// (`killed`), or not.
fn splats_in(log: &str, killed: bool) -> Vec<Splat> {
    splats_and_storm(log, killed).0
}

/// [`splats_in`], and whether a whole report of [`KNOWN_SPLATS`] was seen.
fn splats_and_storm(log: &str, killed: bool) -> (Vec<Splat>, bool) {
    let lines: Vec<&str> = log.lines().collect();
    let mut out = Vec::new();
    let mut complete = vec![false; KNOWN_SPLATS.len()];
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let after_banner = i > 0 && is_splat_after(lines[i - 1], line);
        if !is_splat(line) && !after_banner {
            i += 1;
            continue;
        }
        if let Some(end) = known_report(&lines, i, killed, &mut complete) {
            i = end;
            continue;
        }
        if injected_failure(&lines, i) {
            // Its stack dump ends the report: the registers of the task
            // in user space ("RIP: 0033:") are no splat there; anything
            // else that looks like one still is.
            let end = (i + 1..(i + INJECTED_REPORT_SPAN).min(lines.len()))
                .find(|&j| lines[j].contains("</TASK>"))
                .unwrap_or(i);
            for (j, line) in lines.iter().enumerate().take(end).skip(i + 1) {
                if is_splat(line) && !line.contains("RIP: 0033:") {
                    out.push(Splat {
                        line: j + 1,
                        text: line.trim_end().to_string(),
                    });
                }
            }
            i = end + 1;
            continue;
        }
        out.push(Splat {
            line: i + 1,
            text: line.trim_end().to_string(),
        });
        i += 1;
    }
    (out, complete.iter().any(|&c| c))
}

/// A kernel log line without its `[   12.345678] ` timestamp.
fn strip_timestamp(line: &str) -> &str {
    match line
        .trim_start()
        .strip_prefix('[')
        .and_then(|r| r.split_once("] "))
    {
        Some((ts, rest)) if ts.trim().chars().all(|c| c.is_ascii_digit() || c == '.') => rest,
        _ => line,
    }
}

/// How many lines before an allocation failure's report the fault
/// injection's notice may be (another CPU's lines can come in between).
const INJECTED_SPAN: usize = 4;

/// At most how many lines the stack dump of such a report takes, up to
/// its `</TASK>`.
const INJECTED_REPORT_SPAN: usize = 200;

/// Whether `lines[i]` is `warn_alloc()`'s report of a failure that fault
/// injection forced (tests/vm/rvram-probe-fail.sh): `lib/fault-inject.c`'s
/// `fail_dump()` prints its notice, "FAULT_INJECTION: forcing a failure."
/// and "name failslab, interval ...", as it fails the allocation, and
/// `warn_alloc()` prints right after, in the same task, when the failure
/// reaches a caller that does not pass `__GFP_NOWARN` (`vmalloc()` under
/// `kvmalloc()`). A test that injects failures must make every one print
/// its notice (`verbose` 1 and no rate limit): a report without a notice
/// just before it is a real one.
fn injected_failure(lines: &[&str], i: usize) -> bool {
    let line = lines[i];
    let alloc_failure = line.contains("page allocation failure")
        || line.contains("vmalloc error: size")
        || (line.contains(", mode:0x") && line.contains(", nodemask="));
    alloc_failure
        && lines[i.saturating_sub(INJECTED_SPAN)..i].iter().any(|l| {
            let l = strip_timestamp(l);
            l.contains("FAULT_INJECTION: forcing a failure.")
                || l.starts_with("name failslab, ")
                || l.starts_with("name fail_page_alloc, ")
        })
}

fn is_splat(line: &str) -> bool {
    SPLAT_MARKERS.iter().any(|marker| line.contains(marker))
        // WARN_ON() since Linux 6.19: "WARNING: file:line at func, CPU#0: comm/pid".
        || (line.contains("WARNING: ") && line.contains(", CPU#"))
        // warn_alloc(): "comm: what failed, mode:0x...(...), nodemask=...".
        || (line.contains(", mode:0x") && line.contains(", nodemask="))
}

/// Whether `line` is the title of a report under the banner `prev`: lockdep
/// (and KASAN, KCSAN, KFENCE) print a line of `=` and then a "WARNING: " or
/// "BUG: " title, so a title [`SPLAT_MARKERS`] does not know is still caught.
fn is_splat_after(prev: &str, line: &str) -> bool {
    let title = strip_timestamp(line);
    is_banner(prev)
        && ["WARNING: ", "BUG: ", "[ BUG: "]
            .iter()
            .any(|t| title.starts_with(t))
}

/// Comment lines shown under a failed case.
const SHOWN_NOTES: usize = 4;

/// What the test said about a failed case: the first comment lines after
/// its result line (TAP 13), or else the last ones before it (KUnit and the
/// kselftest harness).
fn why_failed(case: &ktap::Case) -> &[String] {
    if case.after.is_empty() {
        &case.before[case.before.len().saturating_sub(SHOWN_NOTES)..]
    } else {
        &case.after[..case.after.len().min(SHOWN_NOTES)]
    }
}

/// One `PASS`/`FAIL` line per suite with its counts and notes, its failed
/// cases indented below; a `MISS` line per expected suite that never ran;
/// the first splat lines, the timeout, and a final `SUMMARY:` line.
impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for run in &self.suites {
            let c = run.suite.counts();
            let verdict = if run.passed() { "PASS" } else { "FAIL" };
            write!(
                f,
                "{verdict}  {:<28} {:>4} pass {:>4} skip {:>4} fail",
                run.name, c.pass, c.skip, c.fail
            )?;
            if c.todo > 0 {
                write!(f, " {:>4} todo", c.todo)?;
            }
            let notes = run.notes();
            if !notes.is_empty() {
                write!(f, "  ({})", notes.join("; "))?;
            }
            writeln!(f)?;
            for case in run.suite.failures() {
                write!(f, "      not ok {}", case.name)?;
                if let Some(reason) = &case.reason {
                    write!(f, " # {reason}")?;
                }
                writeln!(f)?;
                for note in why_failed(case) {
                    writeln!(f, "        # {note}")?;
                }
            }
        }
        for name in &self.missing {
            writeln!(f, "MISS  {name} (never ran)")?;
        }
        if self.suites.is_empty() {
            writeln!(f, "no test suites found")?;
        }
        if !self.splats.is_empty() {
            writeln!(
                f,
                "SPLAT {} kernel log line(s) in {}:",
                self.splats.len(),
                self.kernel_log
            )?;
            for splat in self.splats.iter().take(SHOWN_SPLATS) {
                writeln!(f, "      {}: {}", splat.line, splat.text)?;
            }
            if self.splats.len() > SHOWN_SPLATS {
                writeln!(f, "      ... and {} more", self.splats.len() - SHOWN_SPLATS)?;
            }
        }
        for boot in &self.retried_boots {
            let name = &boot.name;
            if boot.ok() {
                writeln!(
                    f,
                    "note: {name}: a boot tools/vm.sh retried for the known storm, nothing else in it"
                )?;
                continue;
            }
            if !boot.known_cause {
                writeln!(
                    f,
                    "RETRY {name}: a boot tools/vm.sh retried without the known storm (it hung, or did not start its plan in time)"
                )?;
            }
            for case in &boot.kunit_failures {
                writeln!(
                    f,
                    "FAIL  kunit {case}, in {name}, a boot tools/vm.sh retried"
                )?;
            }
            let splats = &boot.splats;
            if splats.is_empty() {
                continue;
            }
            writeln!(
                f,
                "SPLAT {} kernel log line(s) in {name}, a boot tools/vm.sh retried:",
                splats.len()
            )?;
            for splat in splats.iter().take(SHOWN_SPLATS) {
                writeln!(f, "      {}: {}", splat.line, splat.text)?;
            }
            if splats.len() > SHOWN_SPLATS {
                writeln!(f, "      ... and {} more", splats.len() - SHOWN_SPLATS)?;
            }
        }
        if self.timeout {
            writeln!(f, "TIMEOUT: the host killed the guest")?;
        }
        // Ours first: they fail the run.
        let (ours, others): (Vec<&Leak>, Vec<&Leak>) =
            self.leaks.iter().partition(|leak| leak.ours.is_some());
        for leak in ours.iter().take(SHOWN_SPLATS) {
            writeln!(
                f,
                "LEAK  {} {}: {}",
                leak.object,
                leak.comm,
                leak.ours.as_deref().unwrap_or_default()
            )?;
        }
        if ours.len() > SHOWN_SPLATS {
            writeln!(
                f,
                "      ... and {} more leaks of ours",
                ours.len() - SHOWN_SPLATS
            )?;
        }
        if !others.is_empty() {
            writeln!(
                f,
                "note: {} kmemleak report(s) outside the series and rvram, e.g. {} at {}",
                others.len(),
                others[0].object,
                others[0].site
            )?;
        }
        let t = self.totals();
        writeln!(
            f,
            "SUMMARY: {} suites, {} pass, {} skip, {} fail: {}",
            self.suites.len() + self.missing.len(),
            t.pass,
            t.skip,
            t.fail,
            if self.ok() { "PASS" } else { "FAIL" }
        )
    }
}

#[cfg(test)]
mod tests;
