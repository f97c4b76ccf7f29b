// SPDX-License-Identifier: GPL-2.0
//! The harness's own test, against the kernel's own output.
//!
//! `tests/vm/splat.sh` (the `splat` plan) has `tests/splat/rvram_splat.c`
//! make the debug kernel print a real report of each kind in [`KINDS`],
//! each after a `rvram_splat: trigger KIND` line. Here every part of that
//! log goes through the same splat scan as every other run
//! ([`crate::report`]): each kind must be found in its own part, by the
//! line that heads its report, and nothing may be found before the first
//! trigger. A marker that no longer matches what the kernel prints (a
//! reworded lockdep title, a new WARN format) fails this check.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use crate::report;

/// Each kind `tests/vm/splat.sh` triggers, in its order, and the texts of
/// which a line the scan finds in its part of the log must hold one.
pub const KINDS: &[(&str, &[&str])] = &[
    // kernel/panic.c __warn().
    ("warn", &["WARNING: "]),
    // lib/refcount.c.
    ("refcount", &["refcount_t: addition on 0"]),
    // lib/ubsan.c.
    ("ubsan-bounds", &["UBSAN: array-index-out-of-bounds"]),
    ("ubsan-shift", &["UBSAN: shift-out-of-bounds"]),
    // kernel/locking/lockdep.c: one report a boot, and none after a
    // KASAN report (it turns lockdep off), so before "kasan".
    (
        "lockdep",
        &["WARNING: possible circular locking dependency detected"],
    ),
    // mm/kasan/report.c.
    ("kasan", &["BUG: KASAN: slab-use-after-free"]),
    // kernel/hung_task.c.
    ("hung-task", &["blocked for more than"]),
    // kernel/watchdog.c.
    ("soft-lockup", &["BUG: soft lockup"]),
    ("hard-lockup", &["Watchdog detected hard LOCKUP"]),
    // kernel/rcu/tree_stall.h.
    (
        "rcu-stall",
        &[
            "detected stalls on CPUs/tasks",
            "self-detected stall on CPU",
        ],
    ),
];

const TRIGGER: &str = "rvram_splat: trigger ";

/// The verdict on one kind (or on the log before the first trigger).
#[derive(Debug, PartialEq, Eq)]
pub struct Point {
    /// What is checked.
    pub name: String,
    /// Whether it held.
    pub ok: bool,
    /// What the scan found there (the first matching line, or the count).
    pub detail: String,
}

/// Checks a kernel log of the `splat` plan.
pub fn check_log(log: &str) -> Vec<Point> {
    let lines: Vec<&str> = log.lines().collect();
    // (kind, first line, end line) of each part.
    let starts: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let at = l.find(TRIGGER)?;
            Some((i, l[at + TRIGGER.len()..].trim()))
        })
        .collect();
    let part = |from: usize, to: usize| lines[from..to].join("\n");
    let mut out = Vec::new();
    let first = starts.first().map_or(lines.len(), |s| s.0);
    let before = report::splats(&part(0, first));
    out.push(Point {
        name: "no report before the first trigger".into(),
        ok: before.is_empty() && !starts.is_empty(),
        detail: match before.first() {
            Some(s) => s.text.clone(),
            None if starts.is_empty() => "no trigger line in the log".into(),
            None => String::new(),
        },
    });
    for (kind, wanted) in KINDS {
        let name = format!("{kind}: the scan finds the kernel's report");
        let Some(k) = starts.iter().position(|s| s.1 == *kind) else {
            out.push(Point {
                name,
                ok: false,
                detail: "never triggered".into(),
            });
            continue;
        };
        let end = starts.get(k + 1).map_or(lines.len(), |s| s.0);
        let found = report::splats(&part(starts[k].0 + 1, end));
        let hit = found
            .iter()
            .find(|s| wanted.iter().any(|w| s.text.contains(w)));
        out.push(Point {
            name,
            ok: hit.is_some(),
            detail: match hit {
                Some(s) => s.text.trim().to_string(),
                None => format!("{} other splat line(s), none with {wanted:?}", found.len()),
            },
        });
    }
    out
}

/// `rvram splat-check DIR`: the TAP of the check, and whether all held.
pub fn run(dir: &Path) -> io::Result<(String, bool)> {
    let log = match fs::read_to_string(dir.join("dmesg.txt")) {
        Ok(l) => l,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::read_to_string(dir.join("console.log"))?
        }
        Err(e) => return Err(e),
    };
    let mut points = check_log(&log);
    let rc = fs::read_to_string(dir.join("suites/splat.rc")).unwrap_or_default();
    points.push(Point {
        name: "the guest triggered every kind (suites/splat.tap)".into(),
        ok: rc.trim() == "0",
        detail: format!(
            "exit code {}",
            if rc.is_empty() { "missing" } else { rc.trim() }
        ),
    });
    let mut tap = String::from("TAP version 13\n");
    for (i, p) in points.iter().enumerate() {
        let verdict = if p.ok { "ok" } else { "not ok" };
        let _ = writeln!(tap, "{verdict} {} {}", i + 1, p.name);
        if !p.detail.is_empty() {
            let _ = writeln!(tap, "# {}", p.detail);
        }
    }
    let _ = writeln!(tap, "1..{}", points.len());
    Ok((tap, points.iter().all(|p| p.ok)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report's first line of each kind, as the kernel prints it.
    const SAMPLES: &[&str] = &[
        "WARNING: tests/splat/rvram_splat.c:52 at splat_warn+0x1c/0x30 [rvram_splat], CPU#1: sh/200",
        "refcount_t: addition on 0; use-after-free.",
        "UBSAN: array-index-out-of-bounds in tests/splat/rvram_splat.c:70:40",
        "UBSAN: shift-out-of-bounds in tests/splat/rvram_splat.c:75:38",
        "WARNING: possible circular locking dependency detected",
        "BUG: KASAN: slab-use-after-free in splat_kasan+0x5c/0x80 [rvram_splat]",
        "INFO: task sh:200 blocked for more than 2 seconds.",
        "watchdog: BUG: soft lockup - CPU#0 stuck for 3s! [sh:200]",
        "watchdog: CPU1: Watchdog detected hard LOCKUP on cpu 0",
        "rcu: INFO: rcu_preempt self-detected stall on CPU",
    ];

    fn all() -> Vec<(&'static str, &'static str)> {
        assert_eq!(SAMPLES.len(), KINDS.len());
        KINDS
            .iter()
            .zip(SAMPLES)
            .map(|((k, _), s)| (*k, *s))
            .collect()
    }

    fn log_with(kinds: &[(&str, &str)]) -> String {
        let mut log = String::from("[    1.000000] Linux version 7.3.4\n");
        for (kind, report) in kinds {
            log += &format!("[    2.000000] rvram_splat: trigger {kind}\n");
            if !report.is_empty() {
                log += &format!("[    2.100000] {report}\n");
            }
        }
        log
    }

    #[test]
    fn every_kind_found_in_its_part() {
        let points = check_log(&log_with(&all()));
        assert!(points.iter().all(|p| p.ok), "{points:#?}");
        assert_eq!(points.len(), KINDS.len() + 1);
    }

    #[test]
    fn a_kind_the_scan_misses_fails() {
        // A hung task that prints nothing the scan knows.
        let mut all = all();
        let k = all.iter().position(|(k, _)| *k == "hung-task").unwrap();
        all[k].1 = "task hmm-race:231 was stuck";
        let points = check_log(&log_with(&all));
        let bad: Vec<_> = points.iter().filter(|p| !p.ok).collect();
        assert_eq!(bad.len(), 1, "{points:#?}");
        assert!(bad[0].name.starts_with("hung-task"));
    }

    #[test]
    fn a_report_in_the_wrong_part_does_not_count() {
        // The KASAN report printed after the next trigger line.
        let mut all = all();
        let k = all.iter().position(|(k, _)| *k == "kasan").unwrap();
        all[k].1 = "";
        all[k + 1].1 = "BUG: KASAN: slab-use-after-free in splat_kasan+0x1/0x2";
        let points = check_log(&log_with(&all));
        let bad: Vec<_> = points.iter().filter(|p| !p.ok).map(|p| &p.name).collect();
        assert_eq!(bad.len(), 2, "{points:#?}");
    }

    #[test]
    fn a_splat_before_the_triggers_fails() {
        let log = format!(
            "[    0.5] BUG: KASAN: wild-memory-access in foo\n{}",
            log_with(&[])
        );
        let points = check_log(&log);
        assert!(!points[0].ok);
        // No trigger at all: every kind fails too.
        assert!(points[1..]
            .iter()
            .all(|p| !p.ok && p.detail == "never triggered"));
    }
}
