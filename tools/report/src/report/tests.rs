// SPDX-License-Identifier: GPL-2.0

use super::*;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A results directory under the system temp dir, removed on drop.
struct Run(PathBuf);

impl Run {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rvram-report-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("suites")).unwrap();
        fs::write(dir.join("console.log"), "").unwrap();
        Run(dir)
    }

    fn file(self, path: &str, text: &str) -> Self {
        fs::write(self.0.join(path), text).unwrap();
        self
    }

    fn without(self, path: &str) -> Self {
        fs::remove_file(self.0.join(path)).unwrap();
        self
    }

    fn suite(self, name: &str, tap: &str, rc: &str) -> Self {
        self.file(&format!("suites/{name}.tap"), tap)
            .file(&format!("suites/{name}.rc"), rc)
    }

    fn summary(&self) -> Summary {
        summarize(&self.0).unwrap()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Prefixes each line with a dmesg timestamp.
fn dmesg(lines: &str) -> String {
    lines
        .lines()
        .enumerate()
        .map(|(i, l)| format!("[{:5}.{:06}] {l}\n", 1 + i / 100, i % 100))
        .collect()
}

/// hmm-tests output: 5 pass, 3 skip.
const HMM: &str = "\
TAP version 13
1..8
# Starting 8 tests from 2 test cases.
#  RUN           hmm.hmm_device_private.open_close ...
#            OK  hmm.hmm_device_private.open_close
ok 1 hmm.hmm_device_private.open_close
ok 2 hmm.hmm_device_private.anon_read
ok 3 hmm.hmm_device_private.anon_write
ok 4 hmm.hmm_device_private.migrate
ok 5 hmm.hmm_device_private.mixedmap
#  RUN           hmm.hmm_device_coherent.open_close ...
#      SKIP      DEVICE_COHERENT not available
#            OK  hmm.hmm_device_coherent.open_close
ok 6 hmm.hmm_device_coherent.open_close # SKIP DEVICE_COHERENT not available
ok 7 hmm.hmm_device_coherent.anon_read # SKIP DEVICE_COHERENT not available
ok 8 hmm.hmm_device_private.hmm_gup_test # SKIP Could not open /sys/kernel/debug/gup_test
# PASSED: 8 / 8 tests passed.
# Totals: pass:5 fail:0 xfail:0 xpass:0 skip:3 error:0
";

/// A boot log with two passing KUnit suites: rust_doctests_kernel (3)
/// and rvram (2).
fn kunit_log() -> String {
    dmesg(
        "\
Linux version 7.3.0-rvram (root@build) #1 SMP PREEMPT_DYNAMIC
KTAP version 1
1..2
    KTAP version 1
    # Subtest: rust_doctests_kernel
    # speed: normal
    1..3
    ok 1 rust_doctest_kernel_alloc_kbox_rs_0
    ok 2 rust_doctest_kernel_alloc_kbox_rs_1
    ok 3 rust_doctest_kernel_sync_arc_rs_0
# rust_doctests_kernel: pass:3 fail:0 skip:0 total:3
ok 1 rust_doctests_kernel
    KTAP version 1
    # Subtest: rvram
    1..2
rvram 0000:00:04.0: 64 MiB VRAM at 0xfe000000
    ok 1 rvram_alloc_free
    ok 2 rvram_migrate
# rvram: pass:2 fail:0 skip:0 total:2
ok 2 rvram
Run /init as init process
",
    )
}

fn passing_run() -> Run {
    Run::new()
        .suite("hmm-tests-test_hmm", HMM, "0\n")
        .suite("rvram-probe", "TAP version 13\n1..1\nok 1 probe\n", "0\n")
        .file("dmesg.txt", &kunit_log())
        .file("expected", "hmm-tests-test_hmm\nrvram-probe\nkunit:rvram\n")
        .file("expected-skips", "# its 3 skips\nhmm-tests-test_hmm 3 | hmm.hmm_device_coherent.* | hmm.hmm_device_private.hmm_gup_test\n")
}

fn names(summary: &Summary) -> Vec<&str> {
    summary.suites.iter().map(|run| run.name.as_str()).collect()
}

#[test]
fn passing_run_is_ok() {
    let s = passing_run().summary();
    assert_eq!(
        names(&s),
        [
            "hmm-tests-test_hmm",
            "rvram-probe",
            "kunit:rust_doctests_kernel",
            "kunit:rvram"
        ]
    );
    assert!(s.suites.iter().all(SuiteRun::passed));
    assert_eq!(s.suites[0].source, Source::Tap { rc: Some(0) });
    assert_eq!(s.suites[3].source, Source::Kunit);
    assert!(s.missing.is_empty());
    assert!(s.splats.is_empty());
    assert_eq!(s.kernel_log, "dmesg.txt");
    assert!(!s.timeout);
    assert_eq!(s.totals().pass, 5 + 1 + 3 + 2);
    assert_eq!(s.totals().skip, 3);
    assert!(s.ok());

    let text = s.to_string();
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(
        lines[0],
        "PASS  hmm-tests-test_hmm              5 pass    3 skip    0 fail"
    );
    assert_eq!(
        lines[3],
        "PASS  kunit:rvram                     2 pass    0 skip    0 fail"
    );
    assert_eq!(lines[4], "SUMMARY: 4 suites, 11 pass, 3 skip, 0 fail: PASS");
}

#[test]
fn skip_reasons() {
    let run = passing_run()
        .suite(
            "zswap",
            "TAP version 13\n1..0 # SKIP zswap not enabled\n",
            "0\n",
        )
        .file("expected-skips", "hmm-tests-test_hmm 3 | hmm.hmm_device_coherent.* | hmm.hmm_device_private.hmm_gup_test\nzswap 1 | (whole suite)\n");
    let s = run.summary();
    assert_eq!(
        s.skips(),
        [
            (
                "hmm-tests-test_hmm",
                "hmm.hmm_device_coherent.open_close",
                "DEVICE_COHERENT not available"
            ),
            (
                "hmm-tests-test_hmm",
                "hmm.hmm_device_coherent.anon_read",
                "DEVICE_COHERENT not available"
            ),
            (
                "hmm-tests-test_hmm",
                "hmm.hmm_device_private.hmm_gup_test",
                "Could not open /sys/kernel/debug/gup_test"
            ),
            ("zswap", "", "zswap not enabled"),
        ]
    );
    assert!(s.ok());
    assert!(s
            .to_string()
            .contains("PASS  zswap                           0 pass    0 skip    0 fail  (skipped: zswap not enabled)\n"));
}

#[test]
fn failed_cases_are_listed() {
    let tap = "TAP version 13\n1..3\nok 1 a\nnot ok 2 b\nnot ok 3 c # child died\n";
    let s = passing_run().suite("rvram-probe", tap, "1\n").summary();
    let probe = &s.suites[1];
    assert_eq!(probe.suite.counts().fail, 2);
    assert!(!probe.passed());
    assert!(!s.ok());
    let text = s.to_string();
    assert!(text.contains(
            "FAIL  rvram-probe                     1 pass    0 skip    2 fail  (exit code 1)\n      not ok b\n      not ok c # child died\n"
        ));
    assert!(text.ends_with("SUMMARY: 4 suites, 11 pass, 3 skip, 2 fail: FAIL\n"));
}

/// A failed case shows why: the test's diagnostics after its result line
/// (TAP 13), or the harness's lines before it (KUnit, kselftest).
#[test]
fn failed_cases_show_why() {
    let mut tap = String::from("TAP version 13\nok 1 a\n# a is fine\nnot ok 2 b\n");
    for i in 0..6 {
        tap.push_str(&format!("# b: reason {i}\n"));
    }
    tap.push_str("# c: Expected 1 == 2\nnot ok 3 c\n1..3\n");
    let s = passing_run().suite("rvram-probe", &tap, "1\n").summary();
    let text = s.to_string();
    let b = "      not ok b\n        # b: reason 0\n        # b: reason 1\n        # b: reason 2\n        # b: reason 3\n      not ok c\n";
    assert!(text.contains(b), "{text}");
    // c has no lines after it: the last four before it.
    let c = "      not ok c\n        # b: reason 3\n        # b: reason 4\n        # b: reason 5\n        # c: Expected 1 == 2\n";
    assert!(text.contains(c), "{text}");
}

#[test]
fn nonzero_rc_fails_a_passing_suite() {
    let s = passing_run()
        .file("suites/rvram-probe.rc", "139\n")
        .summary();
    assert_eq!(s.suites[1].source, Source::Tap { rc: Some(139) });
    assert_eq!(s.suites[1].suite.counts().fail, 0);
    assert!(!s.suites[1].passed());
    assert!(!s.ok());
    assert!(s.to_string().contains(
        "FAIL  rvram-probe                     1 pass    0 skip    0 fail  (exit code 139)\n"
    ));
}

#[test]
fn missing_rc_means_the_suite_did_not_finish() {
    let run = passing_run().without("suites/hmm-tests-test_hmm.rc");
    let s = run.summary();
    assert_eq!(s.suites[0].source, Source::Tap { rc: None });
    assert!(s.suites[0].suite.ok());
    assert!(!s.suites[0].passed());
    assert!(!s.ok());
    assert!(s.to_string().contains("(did not finish: no exit code)"));
}

#[test]
fn truncated_tap_is_incomplete() {
    let tap: String = HMM.lines().take(7).map(|l| format!("{l}\n")).collect();
    let s = passing_run()
        .suite("hmm-tests-test_hmm", &tap, "0\n")
        .summary();
    assert_eq!(s.suites[0].suite.counts().missing, 6);
    assert!(!s.ok());
    assert!(s.to_string().contains(
            "FAIL  hmm-tests-test_hmm              2 pass    0 skip    0 fail  (incomplete: 6 of 8 missing)\n"
        ));
}

#[test]
fn rc_without_tap_output() {
    let s = passing_run()
        .file("suites/rvram-stress.rc", "0\n")
        .summary();
    let stress = s.suites.iter().find(|r| r.name == "rvram-stress").unwrap();
    assert!(!stress.passed());
    assert!(s.to_string().contains("(no TAP output)"));
    assert!(!s.ok());
}

#[test]
fn missing_expected_suite() {
    let s = passing_run()
        .file(
            "expected",
            "# comment\nhmm-tests-test_hmm\n\nkunit:rvram\nkunit:rvram_migrate\nrvram-stress\n",
        )
        .summary();
    assert_eq!(s.missing, ["kunit:rvram_migrate", "rvram-stress"]);
    assert!(s.suites.iter().all(SuiteRun::passed));
    assert!(!s.ok());
    let text = s.to_string();
    assert!(
        text.contains("MISS  kunit:rvram_migrate (never ran)\nMISS  rvram-stress (never ran)\n")
    );
    assert!(text.ends_with("SUMMARY: 6 suites, 11 pass, 3 skip, 0 fail: FAIL\n"));
}

#[test]
fn kunit_crash_without_dmesg_uses_console_log() {
    let console = dmesg(
        "\
KTAP version 1
1..2
    KTAP version 1
    # Subtest: rust_doctests_kernel
    1..1
    ok 1 rust_doctest_kernel_alloc_kbox_rs_0
ok 1 rust_doctests_kernel
    KTAP version 1
    # Subtest: rvram
    1..3
    ok 1 rvram_alloc_free
BUG: kernel NULL pointer dereference, address: 0000000000000010
Oops: Oops: 0002 [#1] SMP KASAN NOPTI
RIP: 0010:rvram_migrate_to_ram+0x4f/0x120
Kernel panic - not syncing: Fatal exception
",
    );
    let run = Run::new()
        .file("console.log", &console)
        .file("expected", "kunit:rvram\n");
    let s = run.summary();
    assert_eq!(s.kernel_log, "console.log");
    assert_eq!(names(&s), ["kunit:rust_doctests_kernel", "kunit:rvram"]);
    assert!(s.suites[0].passed());
    let rvram = &s.suites[1];
    assert!(!rvram.suite.complete);
    assert_eq!(rvram.suite.counts().missing, 2);
    assert!(!rvram.passed());
    assert!(s.missing.is_empty());
    assert_eq!(s.splats.len(), 4);
    assert_eq!(s.splats[2].line, 14);
    assert!(!s.ok());

    let text = s.to_string();
    assert!(text.contains(
            "FAIL  kunit:rvram                     1 pass    0 skip    0 fail  (incomplete: 2 of 3 missing)\n"
        ));
    assert!(text.contains(
            "SPLAT 4 kernel log line(s) in console.log:\n      12: [    1.000011] BUG: kernel NULL pointer dereference, address: 0000000000000010\n"
        ));
    assert!(text.contains("      14: [    1.000013] RIP: 0010:rvram_migrate_to_ram+0x4f/0x120\n      ... and 1 more\n"));
    assert!(!text.contains("Kernel panic"));
}

#[test]
fn a_splat_after_dmesg_was_written_is_caught_on_the_console() {
    let s = passing_run()
        .file("console.log", "[    5.000000] BUG: in the console only\n")
        .summary();
    assert_eq!(s.kernel_log, "dmesg.txt");
    assert_eq!(s.splats.len(), 1);
    assert!(!s.ok());
}

#[test]
fn known_base_kernel_splats_are_left_out_but_not_what_follows() {
    let log = "\
[    0.004350] BUG: KASAN: wild-memory-access in do_raw_spin_lock+0xb6/0x1f0
[    0.005783] RIP: 0010:identify_cpu+0x4e9/0x3430
[    0.005783]  identify_boot_cpu+0xd/0xa0
";
    assert!(splats(log).is_empty());
    let later = format!(
        "{log}{}",
        "[    1.0] x\n".repeat(KNOWN_SPAN) + "[    9.0] BUG: KASAN: use-after-free in f\n"
    );
    assert_eq!(splats(&later).len(), 1);
    // The same first line elsewhere is not the known report.
    let other = "[    5.0] BUG: KASAN: wild-memory-access in do_raw_spin_lock+0x1\n[    5.1]  rvram_probe+0x10\n";
    assert_eq!(splats(other).len(), 1);
}

/// One report of the boot storm, as KASAN prints it (banners included).
const STORM: &str = "\
==================================================================
BUG: KASAN: wild-memory-access in do_raw_spin_lock+0xb6/0x1f0
Read of size 4 at addr 1fffffff8396f8e4 by task swapper/0/0

CPU: 0 UID: 0 PID: 0 Comm: swapper/0 Not tainted 7.3.4-rvram #1 PREEMPT(full)
Hardware name: QEMU Standard PC (Q35 + ICH9, 2009), BIOS 1.16.3-debian-1.16.3-2 04/01/2014
Call Trace:
 <IRQ>
 dump_stack_lvl+0x68/0x90
 kasan_report+0xc5/0x100
 do_raw_spin_lock+0xb6/0x1f0
 handle_edge_irq+0x3a/0x7c0
 __common_interrupt+0x8c/0x170
 common_interrupt+0x7b/0xa0
 </IRQ>
 <TASK>
 asm_common_interrupt+0x26/0x40
RIP: 0010:identify_cpu+0x4e9/0x3430
Code: 48 89 df e8 00 00 00 00 48 8b 43 08
RSP: 0000:ffffffff83807e48 EFLAGS: 00000246
 identify_boot_cpu+0xd/0xa0
 arch_cpu_finalize_init+0x9/0x80
 start_kernel+0x3d9/0x450
 </TASK>
==================================================================
";

/// `reports` reports of the storm, as a console with timestamps.
fn storm(reports: usize) -> String {
    dmesg(&STORM.repeat(reports))
}

#[test]
fn a_splat_in_a_retried_boot_fails_the_run() {
    let boot = dmesg(
        "Linux version 7.3.4-rvram\nBUG: KASAN: use-after-free in rvram_probe+0x10/0x20 [rvram]\n",
    );
    let s = passing_run().file("console-boot1.log", &boot).summary();
    assert!(s.splats.is_empty());
    assert_eq!(s.retried_boots.len(), 1);
    assert_eq!(s.retried_boots[0].name, "console-boot1.log");
    assert_eq!(s.retried_boots[0].splats.len(), 1);
    assert_eq!(s.retried_boots[0].splats[0].line, 2);
    assert!(!s.ok());
    let text = s.to_string();
    assert!(text.contains(
            "SPLAT 1 kernel log line(s) in console-boot1.log, a boot tools/vm.sh retried:\n      2: [    1.000001] BUG: KASAN: use-after-free in rvram_probe"
        ));
    assert!(text.ends_with("FAIL\n"));
}

#[test]
fn the_storm_of_a_retried_boot_is_excused_and_nothing_else() {
    // Two whole reports, then one cut short where tools/vm.sh killed
    // the guest.
    let whole = storm(2);
    let cut: String = dmesg(STORM)
        .lines()
        .take(12)
        .map(|l| format!("{l}\n"))
        .collect();
    let boot = format!("{whole}{cut}");
    let s = passing_run().file("console-boot1.log", &boot).summary();
    assert_eq!(s.retried_boots[0].splats, []);
    assert!(s.retried_boots[0].known_cause);
    assert!(s.ok());
    assert!(s.to_string().contains(
            "note: console-boot1.log: a boot tools/vm.sh retried for the known storm, nothing else in it\n"
        ));

    // Anything else in the same console still fails the run.
    let other = dmesg("======================================================\nWARNING: inconsistent lock state\n");
    let s = passing_run()
        .file("console-boot1.log", &format!("{whole}{other}{cut}"))
        .summary();
    let found: Vec<_> = s.retried_boots[0]
        .splats
        .iter()
        .map(|s| strip_timestamp(&s.text))
        .collect();
    assert_eq!(found, ["WARNING: inconsistent lock state"]);
    assert!(!s.ok());
}

#[test]
fn a_cut_report_is_the_storm_only_after_a_whole_one_in_a_killed_boot() {
    let cut: String = dmesg(STORM)
        .lines()
        .take(12)
        .map(|l| format!("{l}\n"))
        .collect();
    // Without a whole report before it, a cut one cannot be told from
    // a wild access elsewhere.
    let found = splats_in(&cut, true);
    assert_eq!(found.len(), 1);
    assert!(found[0]
        .text
        .contains("wild-memory-access in do_raw_spin_lock"));
    // A log that tools/vm.sh did not cut short ends where the guest
    // did: a report cut there is a splat, storm or not.
    let log = storm(1) + &cut;
    assert_eq!(splats_in(&log, true), []);
    assert_eq!(splats(&log).len(), 1);
}

#[test]
fn the_storm_is_any_wild_access_in_the_window() {
    let other = STORM.replace(
        "in do_raw_spin_lock+0xb6/0x1f0\nRead",
        "in handle_edge_irq+0x3a/0x7c0\nRead",
    );
    assert_ne!(other, STORM);
    assert_eq!(splats(&dmesg(&other)), []);
    // Other KASAN reports there are not the storm.
    let uaf = STORM.replace("wild-memory-access", "slab-use-after-free");
    let found = splats(&dmesg(&uaf));
    assert!(found[0]
        .text
        .contains("slab-use-after-free in do_raw_spin_lock"));
}

#[test]
fn a_known_report_ends_at_its_banner() {
    // The storm leaves out its own report, not a splat right after it.
    let log = storm(1) + &dmesg("RIP: 0010:rvram_map+0x1/0x2 [rvram]\n");
    let found = splats(&log);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].line, STORM.lines().count() + 1);
}

#[test]
fn every_retried_boot_is_read_in_order() {
    let splat = dmesg("Kernel panic - not syncing: Fatal exception\n");
    let s = passing_run()
        .file("console-boot2.log", &splat)
        .file("console-boot10.log", "")
        .file("console-boot1.log", &storm(1))
        .file("console-boot1.txt", &splat)
        .summary();
    let boots: Vec<_> = s
        .retried_boots
        .iter()
        .map(|b| (b.name.as_str(), b.splats.len()))
        .collect();
    assert_eq!(
        boots,
        [
            ("console-boot1.log", 0),
            ("console-boot2.log", 1),
            ("console-boot10.log", 0)
        ]
    );
    assert!(!s.ok());
}

#[test]
fn a_retry_without_the_storm_fails_the_run() {
    // A boot that hung (or was too slow) before its plan, with nothing
    // in its console that a scan would call a splat.
    let hung = dmesg("Linux version 7.3.4-rvram\nRun /init as init process\n");
    let s = passing_run().file("console-boot1.log", &hung).summary();
    assert_eq!(s.retried_boots[0].splats, []);
    assert!(!s.retried_boots[0].known_cause);
    assert!(!s.ok());
    assert!(s
        .to_string()
        .contains("RETRY console-boot1.log: a boot tools/vm.sh retried without the known storm"));
}

#[test]
fn a_kunit_failure_in_a_retried_boot_fails_the_run() {
    // The storm, and a KUnit case that failed before tools/vm.sh gave up
    // on the boot: the next boot's pass does not hide it.
    let kunit = dmesg(
        "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: rust_kernel_mm_migrate\n    1..2\n    ok 1 migrates_a_page\n    not ok 2 eviction_leaves_a_folio_that_migrated_away\nnot ok 1 rust_kernel_mm_migrate\n",
    );
    let s = passing_run()
        .file("console-boot1.log", &format!("{}{kunit}", storm(1)))
        .summary();
    let boot = &s.retried_boots[0];
    assert!(boot.known_cause);
    assert_eq!(boot.splats, []);
    assert_eq!(
        boot.kunit_failures,
        ["rust_kernel_mm_migrate.eviction_leaves_a_folio_that_migrated_away"]
    );
    assert!(!s.ok());
    assert!(s.to_string().contains(
        "FAIL  kunit rust_kernel_mm_migrate.eviction_leaves_a_folio_that_migrated_away, in console-boot1.log"
    ));
}

fn skip_note(s: &Summary, name: &str) -> Option<String> {
    let run = s.suites.iter().find(|r| r.name == name).unwrap();
    run.notes().into_iter().find(|n| n.contains("expected"))
}

#[test]
fn more_skips_than_declared_fail_the_suite() {
    let s = passing_run()
        .file("expected-skips", "hmm-tests-test_hmm 2 | hmm.hmm_device_coherent.* | hmm.hmm_device_private.hmm_gup_test\n")
        .summary();
    assert!(!s.suites[0].passed());
    assert!(s.suites[0].suite.ok());
    assert!(!s.ok());
    assert!(s.to_string().contains(
            "FAIL  hmm-tests-test_hmm              5 pass    3 skip    0 fail  (3 skipped, 2 expected (expect_skips in tests/vm/guest.sh))\n"
        ));
}

#[test]
fn fewer_skips_than_declared_fail_the_suite() {
    let s = passing_run()
        .file("expected-skips", "hmm-tests-test_hmm 4 | hmm.hmm_device_coherent.* | hmm.hmm_device_private.hmm_gup_test\n")
        .summary();
    assert!(!s.suites[0].passed());
    assert_eq!(
        skip_note(&s, "hmm-tests-test_hmm").unwrap(),
        "3 skipped, 4 expected (expect_skips in tests/vm/guest.sh)"
    );
    assert!(!s.ok());
}

#[test]
fn an_undeclared_suite_may_not_skip() {
    let tap = "TAP version 13\n1..2\nok 1 a\nok 2 b # SKIP no memory cgroup\n";
    let s = passing_run().suite("rvram-abuse", tap, "0\n").summary();
    let abuse = s.suites.iter().find(|r| r.name == "rvram-abuse").unwrap();
    assert_eq!(abuse.expected_skips, Some(0));
    assert!(!abuse.passed());
    assert!(!s.ok());
    // Nor a whole suite that skips by its plan.
    let s = passing_run()
        .suite(
            "zswap",
            "TAP version 13\n1..0 # SKIP zswap not enabled\n",
            "0\n",
        )
        .summary();
    assert_eq!(
        skip_note(&s, "zswap").unwrap(),
        "1 skipped, 0 expected (expect_skips in tests/vm/guest.sh)"
    );
    assert!(!s.ok());
}

#[test]
fn a_kunit_skip_fails_unless_declared() {
    let log = kunit_log().replace("ok 2 rvram_migrate", "ok 2 rvram_migrate # SKIP no P2PDMA");
    let s = passing_run().file("dmesg.txt", &log).summary();
    assert!(!s.ok());
    assert!(skip_note(&s, "kunit:rvram").is_some());
    let s = passing_run()
        .file("dmesg.txt", &log)
        .file("expected-skips", "hmm-tests-test_hmm 3 | hmm.hmm_device_coherent.* | hmm.hmm_device_private.hmm_gup_test\nkunit:rvram 1 | rvram_migrate\n")
        .summary();
    assert!(s.ok());
}

#[test]
fn any_skips_and_documents_of_one_file() {
    let s = passing_run()
        .file("expected-skips", "hmm-tests-test_hmm any\n")
        .summary();
    assert_eq!(s.suites[0].expected_skips, None);
    assert!(s.ok());

    // The documents of one .tap file share its count.
    let tap = "TAP version 13\n1..1\nok 1 a # SKIP x\nTAP version 13\n1..1\nok 1 b # SKIP y\n";
    let run = Run::new().suite("pair", tap, "0\n");
    let s = run.file("expected-skips", "pair 2 | a | b\n").summary();
    assert!(s.suites.iter().all(SuiteRun::passed));
    let s = Run::new()
        .suite("pair", tap, "0\n")
        .file("expected-skips", "pair 1 | a | b\n")
        .summary();
    assert!(!s.suites.iter().any(SuiteRun::passed));
}

#[test]
fn an_incomplete_suite_has_no_skip_note() {
    let tap: String = HMM.lines().take(7).map(|l| format!("{l}\n")).collect();
    let s = passing_run()
        .suite("hmm-tests-test_hmm", &tap, "0\n")
        .summary();
    assert!(!s.suites[0].passed());
    assert_eq!(skip_note(&s, "hmm-tests-test_hmm"), None);
}

#[test]
fn a_splat_in_both_logs_is_counted_once() {
    let line = "[    5.000000] BUG: KASAN: use-after-free in f+0x1/0x2\n";
    let s = passing_run()
        .file("dmesg.txt", &(kunit_log() + line))
        .file("console.log", line)
        .summary();
    assert_eq!(s.splats.len(), 1);
}

#[test]
fn kasan_splat_fails_a_passing_run() {
    let log = kunit_log()
        + &dmesg(
            "\
==================================================================
BUG: KASAN: slab-use-after-free in rvram_free+0x2c/0x60
Read of size 8 at addr ffff888003a4c010 by task hmm-tests/231
",
        );
    let s = passing_run().file("dmesg.txt", &log).summary();
    assert!(s.suites.iter().all(SuiteRun::passed));
    assert_eq!(
        s.splats,
        [Splat {
            line: 23,
            text: "[    1.000001] BUG: KASAN: slab-use-after-free in rvram_free+0x2c/0x60".into()
        }]
    );
    assert!(!s.ok());
}

#[test]
fn splat_markers() {
    // Each as the base kernel's printer formats it, with a timestamp.
    let splat = [
            // kernel/panic.c __warn(), since 6.19 and before.
            "[   12.345678] WARNING: drivers/rvram/rvram.rs:42 at rvram_map+0x10/0x20, CPU#1: hmm-tests/200",
            "[   12.345678] WARNING: at rvram_map+0x10/0x20, CPU#0: hmm-tests/200",
            "[   12.345678] WARNING: CPU: 0 PID: 1 at mm/hmm.c:100 hmm_range_fault+0x1/0x2",
            "[   12.345678] ------------[ cut here ]------------",
            // kernel/locking/lockdep.c.
            "[   12.345678] WARNING: possible circular locking dependency detected",
            "[   12.345678] WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected",
            "[   12.345678] WARNING: possible recursive locking detected",
            "[   12.345678] WARNING: chain_key collision",
            "[   12.345678] WARNING: inconsistent lock state",
            "[   12.345678] WARNING: possible irq lock inversion dependency detected",
            "[   12.345678] [ BUG: Invalid wait context ]",
            "[   12.345678] WARNING: Nested lock was not taken",
            "[   12.345678] WARNING: bad unlock balance detected!",
            "[   12.345678] WARNING: bad contention detected!",
            "[   12.345678] WARNING: held lock freed!",
            "[   12.345678] WARNING: hmm-race/231 still has locks held!",
            "[   12.345678] WARNING: lock held when returning to user space!",
            "[   12.345678] WARNING: suspicious RCU usage",
            "[   12.345678] INFO: trying to register non-static key.",
            "[   12.345678] BUG: MAX_LOCKDEP_CHAINS too low!",
            // kernel/hung_task.c.
            "[  246.000001] INFO: task hmm-race:231 blocked for more than 122 seconds.",
            "[  246.000001] INFO: task kworker/u8:1:40 blocked in I/O wait for more than 122 seconds.",
            "[  246.000002] INFO: task hmm-race:231 is blocked on a mutex likely owned by task hmm-race:230.",
            // kernel/rcu/tree_stall.h, tree_exp.h, tasks.h.
            "[   80.100000] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
            "[   80.100000] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:",
            "[   80.100000] rcu: INFO: rcu_preempt self-detected stall on CPU",
            "[   80.100000] rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-... } 21003 jiffies s: 73 root: 0x2/.",
            "[   80.100000] INFO: rcu_tasks detected stalls on tasks:",
            // kernel/watchdog.c (buddy and soft lockup detectors).
            "[   50.000000] watchdog: CPU1: Watchdog detected hard LOCKUP on cpu 0",
            "[   50.000000] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [hmm-race:231]",
            // kernel/workqueue.c.
            "[   50.000000] BUG: workqueue lockup - pool cpus=0 node=0 flags=0x0 nice=0 stuck for 35s!",
            // lib/refcount.c, the message of its WARN_ONCE().
            "[   12.345678] refcount_t: underflow; use-after-free.",
            "[   12.345678] refcount_t: saturated; leaking memory.",
            "[   12.345678] refcount_t: addition on 0; use-after-free.",
            "[   12.345678] refcount_t: decrement hit 0; leaking memory.",
            // lib/ubsan.c.
            "[   12.345678] UBSAN: array-index-out-of-bounds in drivers/infiniband/sw/rxe/rxe_odp.c:210:9",
            "[   12.345678] UBSAN: shift-out-of-bounds in mm/hmm.c:301:23",
            // mm/kasan/report.c.
            "[   12.345678] BUG: KASAN: slab-use-after-free in rvram_free+0x2c/0x60 [rvram]",
            // lib/list_debug.c.
            "[   12.345678] list_add corruption. next->prev should be prev (ffff888003a4c010), but was 0000000000000000. (next=ffff888003a4c020).",
            "[   12.345678] list_del corruption, ffff888003a4c010->next is LIST_POISON1 (dead000000000100)",
            "[   12.345678] list_add double add: new=ffff888003a4c010, prev=ffff888003a4c010, next=ffff888003a4c020.",
            // mm/debug.c, mmdebug.h.
            "[   12.345678] page dumped because: VM_BUG_ON_FOLIO(!folio_test_locked(folio))",
            "[   12.345678] kernel BUG at mm/migrate.c:123!",
            "[   12.345678] BUG: Bad page state in process hmm-tests  pfn:10a000",
            // Oopses, panics.
            "[   12.345678] Oops: general protection fault, probably for non-canonical address 0xdffffc0000000002: 0000 [#1] SMP KASAN NOPTI",
            "[   12.345678] BUG: kernel NULL pointer dereference, address: 0000000000000010",
            "[   12.345678] RIP: 0010:rvram_migrate_to_ram+0x4f/0x120 [rvram]",
            "[   12.345678] Kernel panic - not syncing: Fatal exception",
            "[   12.345678] BUG: sleeping function called from invalid context at mm/migrate.c:1500",
            "[   12.345678] hmm-race: vmalloc error: size 4503599627370496, exceeds total pages, mode:0xcc0(GFP_KERNEL)",
        ];
    let benign = [
            "[    0.000000] Kernel command line: no5lvl oops=panic panic=-1 kasan_multi_shot modprobe.blacklist=rvram log_buf_len=4M",
            "[    0.000000] rcu: Preemptible hierarchical RCU implementation.",
            "[    0.000000] rcu: \tRCU CPU stall warnings timeout set to 60 (rcu_cpu_stall_timeout).",
            "[    0.100000] Lock dependency validator: Copyright (c) 2006 Red Hat, Inc., Ingo Molnar",
            "[    0.100000] ... MAX_LOCKDEP_CHAINS:      262144",
            "[    0.200000] NMI watchdog: Perf NMI watchdog permanently disabled",
            "[    0.200000] watchdog: Delayed init of the lockup detector failed: -19",
            "[    1.000000] workqueue: rvram_evict hogged CPU for >10000us 4 times, consider switching to WQ_UNBOUND",
            "[    1.0] kmemleak: Kernel memory leak detector initialized",
            // Judged from kmemleak.txt, by whose leak it is.
            "[   1.0] kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)",
            "[   1.0] WARNING: unrelated userspace message",
            "[   1.0] rvram: probe ok",
            "[   12.0] rvram-guest: plan single: start",
            "[   12.0] rvram-guest: suite hmm-tests-test_hmm: rc 0",
            "[   12.0] rvram 0000:03:00.0: rvram0: 256 MiB of VRAM in BAR2 (65536 pages, device-private)",
            "[   12.0] rvram 0000:03:00.0: rvram0: removed, 0 pages evicted, 0 of 65536 scanned",
            "[   12.0] sysrq: Show Blocked State",
            "[   12.0] task:hmm-race        state:D stack:0     pid:231   tgid:231   ppid:1      flags:0x00004002",
            "[   12.0] ==================================================================",
            "[   12.0] page: refcount:1 mapcount:0 mapping:0000000000000000 index:0x0 pfn:0x10a000",
        ];
    for line in splat {
        assert!(is_splat(line), "not caught: {line}");
    }
    for line in benign {
        assert!(!is_splat(line), "caught: {line}");
    }
}

#[test]
fn a_title_under_a_banner_is_a_splat() {
    let banner = "[   12.345678] ======================================================";
    // A lockdep title no marker lists.
    assert!(is_splat_after(
        banner,
        "[   12.345679] WARNING: some new lockdep report"
    ));
    assert!(is_splat_after(
        banner,
        "[   12.345679] BUG: KCSAN: data-race in f / g"
    ));
    assert!(!is_splat_after(
        banner,
        "[   12.345679] rvram: a line after a banner"
    ));
    assert!(!is_splat_after(
        "[   12.0] x",
        "[   12.345679] WARNING: some new lockdep report"
    ));
    let log = format!("{banner}\n[   12.345679] WARNING: some new lockdep report\n");
    assert_eq!(splats(&log).len(), 1);
    assert_eq!(splats(&log)[0].line, 2);
}

const LEAK_OURS: &str = "\
unreferenced object 0xffff888004d1c000 (size 64):
  comm \"hmm-tests\", pid 201, jiffies 4294893123
  backtrace (crc 6a1e3f0c):
    kmemleak_alloc+0x4e/0x90
    __kmalloc_cache_noprof+0x2a4/0x3b0
    dmirror_open+0x30/0x1c0 [rvram]
";

const LEAK_BASE: &str = "\
unreferenced object 0xffff888005000000 (size 32):
  comm \"swapper/0\", pid 1, jiffies 4294892000
  backtrace (crc 1):
    kmemleak_alloc+0x4e/0x90
    acpi_ds_build_internal_package_obj+0x1/0x2
";

#[test]
fn a_leak_of_ours_fails_the_run() {
    let s = passing_run()
        .file("kmemleak.txt", &format!("{LEAK_BASE}{LEAK_OURS}"))
        .summary();
    assert_eq!(s.leaks.len(), 2);
    assert!(!s.ok());
    let text = s.to_string();
    assert!(text.contains("LEAK  unreferenced object 0xffff888004d1c000 (size 64):"));
    assert!(text.contains("dmirror_open+0x30/0x1c0 [rvram]"));
    assert!(text.ends_with("FAIL\n"));
}

#[test]
fn a_leak_elsewhere_is_listed_but_passes() {
    let s = passing_run().file("kmemleak.txt", LEAK_BASE).summary();
    assert!(s.ok());
    let text = s.to_string();
    assert!(text.contains("note: 1 kmemleak report(s) outside the series and rvram"));
    assert!(text.contains("acpi_ds_build_internal_package_obj"));
    assert!(!text.contains("LEAK "));
}

#[test]
fn timeout_fails_the_run() {
    let s = passing_run().file("timeout", "").summary();
    assert!(s.timeout);
    assert!(!s.ok());
    assert!(s
        .to_string()
        .contains("\nTIMEOUT: the host killed the guest\n"));
}

#[test]
fn no_suites_at_all() {
    let run = Run::new();
    fs::remove_dir(run.0.join("suites")).unwrap();
    let s = run.summary();
    assert!(s.suites.is_empty());
    assert_eq!(s.kernel_log, "console.log");
    assert!(!s.ok());
    assert_eq!(
        s.to_string(),
        "no test suites found\nSUMMARY: 0 suites, 0 pass, 0 skip, 0 fail: FAIL\n"
    );
}

#[test]
fn userspace_tap_on_the_console_is_not_kunit() {
    let console = dmesg("KTAP version 1\n1..0\n") + "TAP version 13\n1..1\nok 1 x\n";
    let s = Run::new().file("console.log", &console).summary();
    assert!(s.suites.is_empty());
}

#[test]
fn tap_file_with_several_documents() {
    let tap = "TAP version 13\n1..1\nok 1 a\nTAP version 13\n1..1\nnot ok 1 b\n";
    let s = Run::new()
        .suite("pair", tap, "1\n")
        .file("expected", "pair\n")
        .summary();
    assert_eq!(names(&s), ["pair/pair", "pair/pair"]);
    assert!(s.missing.is_empty());
    assert!(!s.ok());
}

#[test]
fn invalid_utf8_in_console_log() {
    let mut console = b"\xff\xfe garbage\r\n".to_vec();
    console.extend(kunit_log().into_bytes());
    let run = Run::new();
    fs::write(run.0.join("console.log"), console).unwrap();
    let s = run.summary();
    assert_eq!(s.suites.len(), 2);
    assert!(s.ok());
}

#[test]
fn the_reports_of_the_dmirror_fuzz_bug_are_splats() {
    // The three reports of the bug that tests/vm/dmirror-fuzz.sh
    // reproduces (a device folio migrated twice, and folio_free in
    // softirq), as the debug kernel printed them: each run that prints one
    // must fail, whichever of its lines reaches the log.
    let reports: [&[&str]; 3] = [
        &[
            "[   80.123456] page dumped because: VM_WARN_ON_ONCE_FOLIO(!folio_test_hugetlb(old) && !objcg)",
            "[   80.123457] WARNING: mm/memcontrol.c:5595 at mem_cgroup_migrate+0x2a1/0x920, CPU#1: dmirror-fuzz/231",
            "[  140.000001] page dumped because: VM_WARN_ON_ONCE_FOLIO(!memcg && !mem_cgroup_disabled())",
            "[  140.000002] WARNING: include/linux/memcontrol.h:751 at folio_lruvec+0x1fe/0x310, CPU#0: dmirror-fuzz/232",
            "[  166.000000] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [dmirror-fuzz:232]",
            "[  190.000000] rcu: INFO: rcu_sched self-detected stall on CPU",
        ],
        &[
            "[  170.000000] WARNING: include/linux/leafops.h:400 at softleaf_entry_wait_on_locked+0x3c1/0x4a0, CPU#1: dmirror_fuzz/240",
            "[  300.000000] INFO: task dmirror_fuzz:240 blocked for more than 120 seconds.",
        ],
        &[
            "[   20.000000] WARNING: inconsistent lock state",
            "[   20.000001] inconsistent {SOFTIRQ-ON-W} -> {IN-SOFTIRQ-W} usage.",
        ],
    ];
    for report in reports {
        let log = report.join("\n") + "\n";
        let found = splats(&log);
        // Every line but lockdep's second one is a report's header.
        let headers = report
            .iter()
            .filter(|l| !l.contains("inconsistent {"))
            .count();
        assert_eq!(found.len(), headers, "in {log}");
    }
}

#[test]
fn allocation_failures_and_page_dumps_are_splats() {
    // warn_alloc() from the page allocator and from vmalloc, and a page
    // dump without a WARN around it (VM_WARN_ON_PAGE's first line).
    for line in [
        "kworker/0:1: page allocation failure: order:9, mode:0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), nodemask=(null),cpuset=/,mems_allowed=0",
        "rvram-stress: vmalloc error: size 4294967296, exceeds total pages, mode:0xdc0(GFP_KERNEL|__GFP_ZERO), nodemask=(null),cpuset=/,mems_allowed=0",
        "page dumped because: VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(folio))",
    ] {
        let found = splats(&dmesg(&format!("{line}\n")));
        assert_eq!(found.len(), 1, "{line}");
    }
    // A mode and a nodemask alone are no allocation failure.
    assert_eq!(splats(&dmesg("hmm: mode:0x1 set\n")), []);
}

#[test]
fn injected_allocation_failures_are_not_splats() {
    // What rvram-probe-fail.sh makes the kernel print: failslab's notice of
    // the failure it forces, then vmalloc()'s warn_alloc() with its stack.
    let notice = "FAULT_INJECTION: forcing a failure.\n\
                  name failslab, interval 1, probability 0, space 0, times -1\n";
    let report = "sh: vmalloc error: size 524288, vm_struct allocation failed, mode:0xdc0(GFP_KERNEL|__GFP_ZERO), nodemask=(null),cpuset=/,mems_allowed=0\n\
                  CPU: 0 UID: 0 PID: 321 Comm: sh Not tainted 7.3.4 #1 PREEMPT(voluntary)\n\
                  Call Trace:\n\
                  <TASK>\n\
                  warn_alloc+0x172/0x280\n\
                  entry_SYSCALL_64_after_hwframe+0x4b/0x53\n\
                  RIP: 0033:0x7feaf7165350\n\
                  RSP: 002b:00007ffdd68a1e48 EFLAGS: 00000202 ORIG_RAX: 0000000000000001\n\
                  </TASK>\n\
                  Mem-Info:\n";
    assert_eq!(splats(&dmesg(&format!("{notice}{report}"))), []);
    // A line of another CPU in between.
    assert_eq!(
        splats(&dmesg(&format!("{notice}e1000: link up\n{report}"))),
        []
    );
    // The same report without a notice, or long after one, is real.
    // (Its user registers are a splat line too.)
    let real = |log: &str| {
        let found = splats(&dmesg(log));
        !found.is_empty() && found[0].text.contains("vmalloc error")
    };
    assert!(real(report));
    let far = "x\n".repeat(INJECTED_SPAN);
    assert!(real(&format!("{notice}{far}{report}")));
    // Inside the excused report, only the user registers are excused: a
    // kernel RIP (another report interleaved) still counts, and so does
    // a report after its end.
    let kernel_rip = report.replace(
        "RIP: 0033:0x7feaf7165350",
        "RIP: 0010:gen_pool_add_owner+0x73/0x210",
    );
    assert_eq!(splats(&dmesg(&format!("{notice}{kernel_rip}"))).len(), 1);
    let after = format!("{notice}{report}BUG: KASAN: slab-use-after-free in x+0x1/0x2\n");
    assert_eq!(splats(&dmesg(&after)).len(), 1);
    // A notice excuses an allocation failure, nothing else.
    let oops = "BUG: KASAN: slab-use-after-free in pci_p2pdma_unmap_mappings+0x1c/0x60\n";
    assert_eq!(splats(&dmesg(&format!("{notice}{oops}"))).len(), 1);
    let page = "kworker/0:1: page allocation failure: order:9, mode:0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), nodemask=(null),cpuset=/,mems_allowed=0\n";
    assert_eq!(splats(&dmesg(&format!("{notice}{page}"))), []);
}

#[test]
fn skips_are_named_not_only_counted() {
    // The right count, but one skip is not the one declared: a new skip
    // took the place of an old one.
    let s = passing_run()
        .file(
            "expected-skips",
            "hmm-tests-test_hmm 3 | hmm.hmm_device_coherent.* | hmm.hmm_device_private.migrate\n",
        )
        .summary();
    assert!(!s.suites[0].passed());
    assert_eq!(
        s.suites[0].unnamed_skips,
        ["hmm.hmm_device_private.hmm_gup_test"]
    );
    assert!(s
        .to_string()
        .contains("1 skip(s) no expect_skips glob names"));
    // A count without names names nothing.
    let s = passing_run()
        .file("expected-skips", "hmm-tests-test_hmm 3\n")
        .summary();
    assert_eq!(s.suites[0].unnamed_skips.len(), 3);
    assert!(!s.ok());
}

#[test]
fn todo_and_xfail_cases_are_budgeted_like_skips() {
    let tap = "TAP version 13\n1..3\nok 1 a\nnot ok 2 b # TODO flaky\nok 3 c # XFAIL known\n";
    let s = passing_run().suite("odd", tap, "0\n").summary();
    let odd = s.suites.iter().find(|r| r.name == "odd").unwrap();
    assert_eq!(odd.skips_seen, 2);
    assert!(!odd.passed());
    let s = passing_run()
        .suite("odd", tap, "0\n")
        .file(
            "expected-skips",
            "hmm-tests-test_hmm 3 | hmm.hmm_device_coherent.* | hmm.hmm_device_private.hmm_gup_test\nodd 2 | b | c\n",
        )
        .summary();
    assert!(s.ok(), "{s}");
}

#[test]
fn globs_match_as_the_shell_does() {
    assert!(glob_match(
        "hmm.hmm_device_coherent.*",
        "hmm.hmm_device_coherent.open_close"
    ));
    assert!(!glob_match(
        "hmm.hmm_device_coherent.*",
        "hmm2.hmm_device_coherent.x"
    ));
    assert!(glob_match(
        "test_odp_*prefetch*",
        "test_odp_sync_prefetch_rc_traffic (tests.x)"
    ));
    assert!(glob_match("a", "a"));
    assert!(!glob_match("a", "ab"));
    assert!(glob_match("*b", "ab"));
    assert!(!glob_match("a*a", "a"));
}
