// SPDX-License-Identifier: GPL-2.0

use super::*;

const GOOD: &str = r#"
subject = "rvram: P2P aliases for device-private pages"
cover = "series/cover.txt"
date = "2026-11-21 00:00:00 +0000"
sources = ["drivers"]
assisted_by = "LLM"

[[patch]]
subject = "rvram: add a driver"
body = "Adds a driver."
files = { "drivers/rvram/rvram.rs" = "drivers/misc/rvram/rvram.rs" }
diff = "series/0001.diff"

[[patch]]
subject = "mm/hmm: add an alias op"
body = "Adds an op."
diff = "series/0002.diff"
"#;

#[test]
fn parses_a_good_manifest() {
    let m = Manifest::parse(GOOD).unwrap();
    assert_eq!(m.patches.len(), 2);
    assert_eq!(
        m.patches[0].files[Path::new("drivers/rvram/rvram.rs")],
        PathBuf::from("drivers/misc/rvram/rvram.rs")
    );
    assert_eq!(
        m.patches[1].diff.as_deref(),
        Some(Path::new("series/0002.diff"))
    );
}

#[test]
fn rejects_a_file_added_twice() {
    let bad = GOOD.replace(
        "diff = \"series/0002.diff\"",
        "files = { \"drivers/rvram/rvram.rs\" = \"x/y.rs\" }",
    );
    let e = Manifest::parse(&bad).unwrap_err();
    assert!(e.0.contains("added by patches 1 and 2"), "{e}");
}

#[test]
fn rejects_bad_subjects() {
    assert!(check_subject("rvram: add a driver").is_ok());
    assert!(check_subject("Documentation/mm: hmm: alias").is_ok());
    assert!(check_subject("add a driver").is_err());
    assert!(check_subject("rvram: add a driver.").is_err());
    assert!(check_subject(&format!("rvram: {}", "x".repeat(80))).is_err());
    let bad = GOOD.replace("mm/hmm: add an alias op", "an alias op");
    assert!(Manifest::parse(&bad).unwrap_err().0.starts_with("patch 2"));
}

#[test]
fn rejects_long_body_lines_and_manual_signoff() {
    let long = GOOD.replace("Adds an op.", &"word ".repeat(20));
    assert!(Manifest::parse(&long)
        .unwrap_err()
        .0
        .contains("longer than 75"));
    let url = GOOD.replace(
        "Adds an op.",
        &format!("Link: https://lore.kernel.org/{}", "x".repeat(80)),
    );
    assert!(Manifest::parse(&url).is_ok());
    let sob = GOOD.replace("Adds an op.", "Signed-off-by: A <a@b>");
    assert!(Manifest::parse(&sob)
        .unwrap_err()
        .0
        .contains("Signed-off-by"));
    let ab = GOOD.replace("Adds an op.", "Assisted-by: X");
    assert!(Manifest::parse(&ab).unwrap_err().0.contains("Assisted-by"));
}

#[test]
fn assisted_by_joins_the_trailer_block() {
    assert_eq!(
        commit_message("a: b", "Text.\n", "LLM"),
        "a: b\n\nText.\n\nAssisted-by: LLM\n"
    );
    assert_eq!(
        commit_message(
            "a: b",
            "Text.\n\nFixes: 0123456789ab (\"x: y\")\nCc: stable@vger.kernel.org\n",
            "LLM"
        ),
        "a: b\n\nText.\n\nFixes: 0123456789ab (\"x: y\")\n\
             Cc: stable@vger.kernel.org\nAssisted-by: LLM\n"
    );
    // A paragraph that only mentions a trailer is not a trailer block.
    assert!(commit_message("a: b", "Text.\n\nFixes the bug.", "LLM")
        .ends_with("bug.\n\nAssisted-by: LLM\n"));
}

#[test]
fn rejects_unknown_keys_and_empty_patches() {
    let typo = GOOD.replace("diff = \"series/0002.diff\"", "dif = \"x\"");
    assert!(Manifest::parse(&typo).is_err());
}

#[test]
fn cover_letter_is_filled_and_dated() {
    let tmpl = "From 0000 Mon Sep 17 00:00:00 2001\nFrom: A <a@b>\n\
                    Date: Thu, 1 Jan 2099 10:00:00 +0100\n\
                    Subject: [PATCH 0/2] *** SUBJECT HERE ***\n\n*** BLURB HERE ***\n\nA (2):\n";
    let out = fill_cover(
        tmpl,
        "mm/hmm: aliases",
        "Text.\n\n",
        "2026-11-21 00:00:00 +0000",
    )
    .unwrap();
    assert!(out.contains("Subject: [PATCH 0/2] mm/hmm: aliases\n"));
    assert!(out.contains("\n\nText.\n\nA (2):\n"));
    assert!(
        out.contains("Date: Sat, 21 Nov 2026 00:00:00 +0000\n"),
        "{out}"
    );
    assert!(fill_cover("no template", "s", "b", "d").is_err());
}

#[test]
fn patch_prefixes_are_stripped() {
    assert_eq!(strip_patch_prefix("[PATCH 2/5] mm/hmm: foo"), "mm/hmm: foo");
    assert_eq!(strip_patch_prefix("[PATCH] rvram: x"), "rvram: x");
    assert_eq!(strip_patch_prefix("[RFC] rvram: x"), "[RFC] rvram: x");
    assert_eq!(strip_patch_prefix("rvram: x"), "rvram: x");
}

#[test]
fn rfc2822_weekdays() {
    assert_eq!(
        rfc2822("2024-02-29 12:34:56 +0200"),
        "Thu, 29 Feb 2024 12:34:56 +0200"
    );
    assert_eq!(
        rfc2822("2000-01-01 00:00:00"),
        "Sat, 1 Jan 2000 00:00:00 +0000"
    );
    assert_eq!(rfc2822("garbage"), "garbage");
}
