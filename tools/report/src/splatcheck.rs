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
//! reworded lockdep title, a new WARN format) fails this check. The kinds
//! that end the boot ([`FATAL_KINDS`]) come after the guest saved its log:
//! they are found in the console.

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
    // mm/page_alloc.c warn_alloc(), here from mm/vmalloc.c.
    ("alloc-fail", &["vmalloc error: size"]),
    // mm/debug.c dump_page(), as VM_WARN_ON_PAGE() and friends print it.
    ("dump-page", &["page dumped because: rvram_splat"]),
    // kernel/workqueue.c wq_watchdog_timer_fn().
    ("wq-lockup", &["BUG: workqueue lockup"]),
];

/// The kinds that end the boot, triggered by tests/vm/guest.sh after the
/// log was saved, and the texts that lines the scan finds in the console
/// after the trigger must hold, every one of them.
pub const FATAL_KINDS: &[(&str, &[&str])] = &[
    // VM_BUG_ON_PAGE(): the page dump, BUG(), and the panic of oops=panic.
    (
        "vm-bug",
        &[
            "page dumped because: VM_BUG_ON_PAGE",
            "kernel BUG at",
            "Kernel panic - not syncing",
        ],
    ),
];

/// Checks the console of a `splat` run for [`FATAL_KINDS`].
pub fn check_console(console: &str) -> Vec<Point> {
    let lines: Vec<&str> = console.lines().collect();
    let mut out = Vec::new();
    for (kind, wanted) in FATAL_KINDS {
        let name = format!("{kind}: the scan finds the kernel's report in the console");
        let trigger = format!("{TRIGGER}{kind}");
        let Some(k) = lines.iter().position(|l| l.trim_end().ends_with(&trigger)) else {
            out.push(Point {
                name,
                ok: false,
                detail: "never triggered".into(),
            });
            continue;
        };
        let found = report::splats(&lines[k + 1..].join("\n"));
        let missing: Vec<&&str> = wanted
            .iter()
            .filter(|w| !found.iter().any(|s| s.text.contains(**w)))
            .collect();
        out.push(Point {
            name,
            ok: missing.is_empty(),
            detail: if missing.is_empty() {
                format!("{} splat line(s)", found.len())
            } else {
                format!("{} splat line(s), none with {missing:?}", found.len())
            },
        });
    }
    out
}

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

/// `rvram-report splat-check DIR`: the TAP of the check, and whether all held.
pub fn run(dir: &Path) -> io::Result<(String, bool)> {
    let log = match fs::read_to_string(dir.join("dmesg.txt")) {
        Ok(l) => l,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::read_to_string(dir.join("console.log"))?
        }
        Err(e) => return Err(e),
    };
    let mut points = check_log(&log);
    let console = fs::read_to_string(dir.join("console.log")).unwrap_or_default();
    points.extend(check_console(&console));
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
        "sh: vmalloc error: size 25769803776, exceeds total pages, mode:0xcc0(GFP_KERNEL), nodemask=(null),cpuset=/,mems_allowed=0",
        "page dumped because: rvram_splat: a page dumped as VM_WARN_ON_PAGE does",
        "BUG: workqueue lockup - pool cpus=0 node=0 flags=0x0 nice=0 stuck for 5s!",
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
    fn the_fatal_kinds_are_found_in_the_console_whole() {
        let console = "[  100.0] rvram_splat: trigger vm-bug\n\
            [  100.1] page dumped because: VM_BUG_ON_PAGE(page)\n\
            [  100.1] kernel BUG at tests/splat/rvram_splat.c:190!\n\
            [  100.2] Kernel panic - not syncing: Fatal exception\n";
        let points = check_console(console);
        assert!(points.iter().all(|p| p.ok), "{points:#?}");
        // The panic missing (a guest that hung after the BUG) fails.
        let cut: String = console.lines().take(3).map(|l| format!("{l}\n")).collect();
        let points = check_console(&cut);
        assert!(!points[0].ok);
        assert!(points[0].detail.contains("Kernel panic"), "{points:#?}");
        // So does a console without the trigger.
        assert_eq!(check_console("")[0].detail, "never triggered");
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
