// SPDX-License-Identifier: GPL-2.0

use super::*;

fn case(name: &str, outcome: Outcome, reason: Option<&str>) -> Case {
    Case {
        name: name.into(),
        outcome,
        reason: reason.map(String::from),
        before: Vec::new(),
        after: Vec::new(),
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
    let garbage = "Linux version 7.3\nok computer\nnot okay\n# 1..3\nokay 1\n[  OK  ] Started\n";
    assert!(parse(&dmesg(garbage)).is_empty());
    // Results without a document are ignored.
    assert!(parse("ok 1 foo\nnot ok 2 bar\n").is_empty());
}

/// TAP 13 diagnostics follow their result line; at most [`NOTES`] are kept
/// on each side, and only those at the result's level.
#[test]
fn diagnostics_after_a_result() {
    let mut text = String::from("TAP version 13\nok 1 a\n# a fine\nnot ok 2 b\n");
    for i in 0..NOTES + 2 {
        text.push_str(&format!("# why {i}\n"));
    }
    text.push_str("    # deeper\nok 3 c\n1..3\n");
    let s = &parse(&text)[0];
    assert_eq!(s.cases[0].after, ["a fine"]);
    let why: Vec<_> = (0..NOTES).map(|i| format!("why {i}")).collect();
    assert_eq!(s.cases[1].after, why);
    assert_eq!(s.cases[1].before, ["a fine"]);
    let last: Vec<_> = (2..NOTES + 2).map(|i| format!("why {i}")).collect();
    assert_eq!(s.cases[2].before, last);
    assert!(s.cases[2].after.is_empty());
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
    let (name, reason) = (&s.cases[2].name, s.cases[2].reason.as_deref());
    assert_eq!(name, "hmm.hmm_device_coherent.open_close");
    assert_eq!(s.cases[2].outcome, Outcome::Skip);
    assert_eq!(reason, Some("DEVICE_COHERENT not available"));
    // The harness prints why a case failed before its result line.
    assert_eq!(
        s.cases[3].before,
        [
            "RUN           hmm.hmm_device_private.migrate ...",
            "hmm-tests.c:300:migrate:Expected ret (-1) == 0 (0)",
            "FAIL  hmm.hmm_device_private.migrate"
        ]
    );
    assert_eq!(s.cases[3].after, s.cases[4].before);
    assert!(s.cases[4].before.is_empty());
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
    let text = "KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: s\n    1..1\n    ok 1 a\n";
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
    let text = "KTAP version 1\n1..1\n\tKTAP version 1\n\t# Subtest: t\n\t1..1\n\tok 1 a\nok 1 t\n";
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
