// SPDX-License-Identifier: GPL-2.0

use super::*;

const GOOD: &str = r#"
subject = "rvram: P2P aliases for device-private pages"
cover = "series/rvram/cover.txt"
prefix = "RFC PATCH"
version = 3
change_id = "20261126-rvram-0123456789ab"

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

const LIST: &str = r#"
date = "2026-11-21 00:00:00 +0000"
sources = ["drivers"]
assisted_by = "LLM"
disclosure = "Made with an LLM."
series = ["fixes", "rvram"]

[base]
name = "v7.3.4"
"#;

fn set(series: Vec<Series>) -> Set {
    Set {
        manifest: Manifest::parse(LIST).unwrap(),
        series,
    }
}

fn fix() -> Series {
    Series::parse(
        "fixes",
        r#"
subject = "mm: fixes"
cover = "series/fixes/cover.txt"
change_id = "20261126-fixes-0123456789ab"

[[patch]]
subject = "mm/hmm: fix it"
body = "Fixes it.\n\nFixes: 0123456789ab (\"mm: break it\")\nCc: stable@vger.kernel.org"
diff = "series/fixes/0001.diff"
"#,
    )
    .unwrap()
}

#[test]
fn parses_a_good_series() {
    let s = Series::parse("rvram", GOOD).unwrap();
    assert_eq!(s.name, "rvram");
    assert_eq!(s.patches.len(), 2);
    assert_eq!(s.full_prefix(), "RFC PATCH v3");
    assert_eq!(fix().full_prefix(), "PATCH");
    assert_eq!(
        s.patches[0].files[Path::new("drivers/rvram/rvram.rs")],
        PathBuf::from("drivers/misc/rvram/rvram.rs")
    );
    assert_eq!(
        s.patches[1].diff.as_deref(),
        Some(Path::new("series/0002.diff"))
    );
}

#[test]
fn parses_the_list_of_series() {
    let m = Manifest::parse(LIST).unwrap();
    assert_eq!(m.series, ["fixes", "rvram"]);
    assert_eq!(m.base.commit, None);
    let with = LIST.replace("[base]", "[base]\ncommit = \"0123\"");
    assert!(Manifest::parse(&with)
        .unwrap_err()
        .0
        .contains("full commit id"));
    let full = LIST.replace(
        "[base]",
        &format!("[base]\ncommit = \"{}\"", "a".repeat(40)),
    );
    assert!(Manifest::parse(&full).unwrap().base.commit.is_some());
}

#[test]
fn requirements_come_before_and_exist() {
    let mut rvram = Series::parse("rvram", GOOD).unwrap();
    rvram.requires = vec!["fixes".into()];
    let ok = set(vec![fix(), rvram]);
    assert!(ok.validate().is_ok());
    assert_eq!(ok.prerequisites(1), [0]);
    assert!(ok.prerequisites(0).is_empty());

    let mut rvram = Series::parse("rvram", GOOD).unwrap();
    rvram.requires = vec!["nothing".into()];
    assert!(set(vec![fix(), rvram])
        .validate()
        .unwrap_err()
        .0
        .contains("not a series"));

    let mut early = fix();
    early.requires = vec!["rvram".into()];
    let rvram = Series::parse("rvram", GOOD).unwrap();
    assert!(set(vec![early, rvram])
        .validate()
        .unwrap_err()
        .0
        .contains("comes after"));
}

#[test]
fn rejects_a_file_added_twice_across_series() {
    let bad = GOOD.replace(
        "diff = \"series/0002.diff\"",
        "files = { \"drivers/rvram/rvram.rs\" = \"x/y.rs\" }",
    );
    let s = Series::parse("rvram", &bad).unwrap();
    let e = set(vec![fix(), s]).validate().unwrap_err();
    assert!(
        e.0.contains("added by rvram patch 1 and rvram patch 2"),
        "{e}"
    );
}

#[test]
fn change_ids_and_fixes_tags_are_checked() {
    assert!(check_change_id("20261126-rxe-fixes-286cc08cea33").is_ok());
    assert!(check_change_id("2026-rxe-286cc08cea33").is_err());
    assert!(check_change_id("20261126-rxe-286CC08CEA33").is_err());
    assert!(check_change_id("20261126-286cc08cea33").is_err());
    assert!(check_fixes("0123456789ab (\"mm: x\")").is_ok());
    assert!(check_fixes("0123456 (\"mm: x\")").is_err());
    assert!(check_fixes("0123456789ab mm: x").is_err());
    let bad = GOOD.replace("Adds an op.", "Adds.\\n\\nFixes: 0123 (\\\"x: y\\\")");
    assert!(Series::parse("rvram", &bad)
        .unwrap_err()
        .0
        .contains("12 hex digits"));
    let bad = GOOD.replace("RFC PATCH", "RFC");
    assert!(Series::parse("rvram", &bad).is_err());
}

#[test]
fn rejects_bad_subjects() {
    assert!(check_subject("rvram: add a driver").is_ok());
    assert!(check_subject("Documentation/mm: hmm: alias").is_ok());
    assert!(check_subject("add a driver").is_err());
    assert!(check_subject("rvram: add a driver.").is_err());
    assert!(check_subject(&format!("rvram: {}", "x".repeat(80))).is_err());
    let bad = GOOD.replace("mm/hmm: add an alias op", "an alias op");
    assert!(Series::parse("rvram", &bad)
        .unwrap_err()
        .0
        .starts_with("series rvram: patch 2"));
}

#[test]
fn rejects_long_body_lines_and_manual_signoff() {
    let long = GOOD.replace("Adds an op.", &"word ".repeat(20));
    assert!(Series::parse("rvram", &long)
        .unwrap_err()
        .0
        .contains("longer than 75"));
    let url = GOOD.replace(
        "Adds an op.",
        &format!("Link: https://lore.kernel.org/{}", "x".repeat(80)),
    );
    assert!(Series::parse("rvram", &url).is_ok());
    let sob = GOOD.replace("Adds an op.", "Signed-off-by: A <a@b>");
    assert!(Series::parse("rvram", &sob)
        .unwrap_err()
        .0
        .contains("Signed-off-by"));
    let ab = GOOD.replace("Adds an op.", "Assisted-by: X");
    assert!(Series::parse("rvram", &ab)
        .unwrap_err()
        .0
        .contains("Assisted-by"));
}

#[test]
fn assisted_by_joins_the_trailer_block() {
    assert_eq!(
        commit_message("a: b", "Text.\n", "LLM", None),
        "a: b\n\nText.\n\nAssisted-by: LLM\n"
    );
    assert_eq!(
        commit_message("a: b", "Text.\n", "LLM", Some("A B <a@b>")),
        "a: b\n\nText.\n\nAssisted-by: LLM\nSigned-off-by: A B <a@b>\n"
    );
    assert_eq!(
        commit_message(
            "a: b",
            "Text.\n\nFixes: 0123456789ab (\"x: y\")\nCc: stable@vger.kernel.org\n",
            "LLM",
            None
        ),
        "a: b\n\nText.\n\nFixes: 0123456789ab (\"x: y\")\n\
             Cc: stable@vger.kernel.org\nAssisted-by: LLM\n"
    );
    // A paragraph that only mentions a trailer is not a trailer block.
    assert!(
        commit_message("a: b", "Text.\n\nFixes the bug.", "LLM", None)
            .ends_with("bug.\n\nAssisted-by: LLM\n")
    );
}

#[test]
fn rejects_unknown_keys_and_empty_patches() {
    let typo = GOOD.replace("diff = \"series/0002.diff\"", "dif = \"x\"");
    assert!(Series::parse("rvram", &typo).is_err());
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
fn base_and_change_ids_follow_git_lines() {
    let text = "A (1):\n  x: y\n\n\nbase-commit: 1111\nprerequisite-patch-id: 2222\n\
                prerequisite-patch-id: 3333\n";
    let out = fill_base(
        text,
        "1111",
        "base-commit: abcd",
        "20261126-x-0123456789ab",
        &["20261126-y-0123456789ab:v1".to_string()],
    )
    .unwrap();
    assert_eq!(
        out,
        "A (1):\n  x: y\n\n\nbase-commit: abcd\nprerequisite-patch-id: 2222\n\
         prerequisite-patch-id: 3333\nchange-id: 20261126-x-0123456789ab\n\
         prerequisite-change-id: 20261126-y-0123456789ab:v1\n"
    );
    assert!(fill_base("no base", "1111", "b", "c", &[]).is_err());
}

#[test]
fn patch_prefixes_are_stripped() {
    assert_eq!(strip_patch_prefix("[RFC PATCH v3 1/3] x: y"), "x: y");
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

/// A scratch repository and base tree for the tests that build commits.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("rvram-series-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let sh = |dir: &Path, args: &[&str]| {
            let ok = Command::new("git")
                .args(args)
                .current_dir(dir)
                .stdout(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        for sub in ["repo", "base"] {
            let d = dir.join(sub);
            fs::create_dir_all(&d).unwrap();
            sh(&d, &["init", "-q"]);
            sh(&d, &["config", "user.name", "T"]);
            sh(&d, &["config", "user.email", "t@example.org"]);
        }
        let base = dir.join("base");
        fs::write(base.join("README"), "base\n").unwrap();
        sh(&base, &["add", "README"]);
        sh(&base, &["commit", "-q", "-m", "base"]);
        sh(&base, &["tag", "base"]);
        Scratch(dir)
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.0.join("repo").join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// A get_maintainer.pl in the base that finds nobody, for exports.
    fn no_maintainers(&self) {
        let scripts = self.0.join("base/scripts");
        fs::create_dir_all(&scripts).unwrap();
        fs::write(
            scripts.join("get_maintainer.pl"),
            "while (<STDIN>) {}\nexit 0;\n",
        )
        .unwrap();
    }

    fn paths(&self) -> Paths {
        Paths {
            repo: self.0.join("repo"),
            base: self.0.join("base"),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A driver posted in two pieces: the first patch's diff creates `d.c` at
/// its first version, the second brings it to the repository's.
fn pieces(s: &Scratch, second_diff: Option<&str>) {
    s.write(
        "series/series.toml",
        "date = \"2026-11-21 00:00:00 +0000\"\nsources = [\"drivers\"]\n\
         assisted_by = \"LLM\"\ndisclosure = \"Made with an LLM.\"\nseries = [\"drv\"]\n[base]\nname = \"v7.3.4\"\n",
    );
    s.write("series/drv/cover.txt", "The driver.\n");
    s.write("drivers/d.c", "int a;\nint b;\n");
    s.write(
        "series/drv/1.diff",
        "diff --git a/drivers/d.c b/drivers/d.c\nnew file mode 100644\n\
         --- /dev/null\n+++ b/drivers/d.c\n@@ -0,0 +1 @@\n+int a;\n",
    );
    s.write(
        "series/drv/2.diff",
        "diff --git a/README b/README\n--- a/README\n+++ b/README\n\
         @@ -1 +1,2 @@\n base\n+drv\n",
    );
    let mut toml = String::from(
        "subject = \"drv: a driver\"\ncover = \"series/drv/cover.txt\"\n\
         change_id = \"20261126-drv-0123456789ab\"\n\
         [[patch]]\nsubject = \"drv: add the core\"\nbody = \"Core.\"\n\
         diff = \"series/drv/1.diff\"\n\
         [[patch]]\nsubject = \"drv: add b\"\nbody = \"B.\"\n\
         files = { \"drivers/d.c\" = \"drivers/d.c\" }\n",
    );
    if let Some(d) = second_diff {
        toml.push_str(&format!(
            "[[patch]]\nsubject = \"drv: more\"\nbody = \"More.\"\ndiff = \"{d}\"\n"
        ));
    }
    s.write("series/drv/series.toml", &toml);
}

#[test]
fn a_piece_listed_after_its_diffs_is_final() {
    let s = Scratch::new("final");
    pieces(&s, None);
    let commits = build_commits(&s.paths()).unwrap();
    assert_eq!(commits.len(), 2);
    let dir = s.0.join("base");
    let base = Git::new(&dir);
    let show = |c: &str| base.run(&["show", &format!("{c}:drivers/d.c")]).unwrap();
    assert_eq!(show(&commits[0]), "int a;");
    assert_eq!(show(&commits[1]), "int a;\nint b;");
}

#[test]
fn a_later_hook_is_taken_back_from_the_file_it_changes() {
    let s = Scratch::new("hook");
    pieces(&s, Some("series/drv/2.diff"));
    // The third patch only touches README: the file is added final.
    assert_eq!(build_commits(&s.paths()).unwrap().len(), 3);
    // The third patch hooks a line into d.c: patch 2 adds the repository's
    // d.c without it, patch 3 adds it back, and the file is written once.
    s.write("drivers/d.c", "int a;\nint b;\nint c;\n");
    s.write(
        "series/drv/2.diff",
        "diff --git a/drivers/d.c b/drivers/d.c\n--- a/drivers/d.c\n+++ b/drivers/d.c\n\
         @@ -1,2 +1,3 @@\n int a;\n int b;\n+int c;\n",
    );
    let commits = build_commits(&s.paths()).unwrap();
    let dir = s.0.join("base");
    let base = Git::new(&dir);
    let show = |c: &str| base.run(&["show", &format!("{c}:drivers/d.c")]).unwrap();
    assert_eq!(show(&commits[0]), "int a;");
    assert_eq!(show(&commits[1]), "int a;\nint b;");
    assert_eq!(show(&commits[2]), "int a;\nint b;\nint c;");
}

#[test]
fn a_hook_that_does_not_match_the_repository_is_refused() {
    let s = Scratch::new("stalehook");
    pieces(&s, Some("series/drv/2.diff"));
    // The hook adds a line the repository's d.c does not end with.
    s.write(
        "series/drv/2.diff",
        "diff --git a/drivers/d.c b/drivers/d.c\n--- a/drivers/d.c\n+++ b/drivers/d.c\n\
         @@ -1,2 +1,3 @@\n int a;\n int b;\n+int c;\n",
    );
    let err = build_commits(&s.paths()).unwrap_err().0;
    assert!(
        err.contains("drv patch 2") && err.contains("does not take back"),
        "{err}"
    );
}

#[test]
fn a_cover_letter_names_its_base_in_words_and_discloses() {
    let s = Scratch::new("cover");
    pieces(&s, None);
    let paths = s.paths();
    s.no_maintainers();
    // Signed off without a public base commit: exported, not refused, and
    // the steps before sending are given.
    let who = Identity {
        signoff: Some("A Submitter <a@example.org>".into()),
    };
    assert_eq!(export(&paths, &who).unwrap(), 3);
    let cover =
        fs::read_to_string(paths.patches_dir().join("drv/0000-cover-letter.patch")).unwrap();
    assert!(
        cover.contains("The driver.\n\nMade with an LLM."),
        "{cover}"
    );
    assert!(cover.contains("\nbase: v7.3.4\n"), "{cover}");
    assert!(!cover.contains("base-commit:"), "{cover}");
    let steps = before_sending(&paths).unwrap().unwrap();
    assert!(steps.iter().any(|s| s.contains("rebase")), "{steps:?}");
    // A patch carries the trailers: Assisted-by, then the sign-off.
    let patch =
        fs::read_to_string(paths.patches_dir().join("drv/0001-drv-add-the-core.patch")).unwrap();
    assert!(
        patch.contains("Assisted-by: LLM\nSigned-off-by: A Submitter <a@example.org>\n"),
        "{patch}"
    );
}

#[test]
fn a_signed_off_export_names_the_submitter_not_a_placeholder() {
    let s = Scratch::new("identity");
    // The third patch names the repository's identity, as the MAINTAINERS
    // entry of a new driver does.
    s.write(
        "series/drv/3.diff",
        "diff --git a/README b/README\n--- a/README\n+++ b/README\n\
         @@ -1 +1,2 @@\n base\n+M:\tT <t@example.org>\n",
    );
    pieces(&s, Some("series/drv/3.diff"));
    let paths = s.paths();
    s.no_maintainers();
    let who = |s: &str| Identity {
        signoff: Some(s.into()),
    };
    // Unsigned: the repository's identity stays.
    export(&paths, &Identity::default()).unwrap();
    let third = || fs::read_to_string(paths.patches_dir().join("drv/0003-drv-more.patch")).unwrap();
    assert!(third().contains("+M:\tT <t@example.org>"), "{}", third());
    // Signed off: the submitter's.
    export(&paths, &who("A Submitter <a@example.org>")).unwrap();
    assert!(
        third().contains("+M:\tA Submitter <a@example.org>"),
        "{}",
        third()
    );
    assert!(!third().contains("T <t@example.org>"), "{}", third());
    // A placeholder address is refused, as the sign-off or in a diff.
    let err = export(&paths, &who("Nobody <n@users.noreply.seed.example>"))
        .unwrap_err()
        .0;
    assert!(err.contains("placeholder"), "{err}");
    s.write(
        "series/drv/3.diff",
        "diff --git a/README b/README\n--- a/README\n+++ b/README\n\
         @@ -1 +1,2 @@\n base\n+M:\tSomeone <s@seed.example>\n",
    );
    let err = export(&paths, &who("A Submitter <a@example.org>"))
        .unwrap_err()
        .0;
    assert!(err.contains("names a placeholder address"), "{err}");
}

/// A series of one patch has no cover letter: its text goes below the
/// patch's `---` line, before the diffstat, where `git am` drops it.
#[test]
fn one_patch_carries_its_cover_below_the_marker() {
    let patch = "Subject: [PATCH] a: b\n\nWhy.\n\nAssisted-by: LLM\n---\n a.c | 1 +\n\ndiff --git a/a.c b/a.c\n";
    let out = fill_notes(patch, "The cover.\n\nDisclosure.\n").unwrap();
    assert_eq!(
        out,
        "Subject: [PATCH] a: b\n\nWhy.\n\nAssisted-by: LLM\n---\nThe cover.\n\nDisclosure.\n\n a.c | 1 +\n\ndiff --git a/a.c b/a.c\n"
    );
    assert!(fill_notes("Subject: x\n\nno marker\n", "n").is_err());
}

/// Two series for different trees, each made on the base alone, that add
/// neighbouring lines of one file: the second's context is not the tree
/// the first leaves, and the test kernel merges it in.
#[test]
fn series_of_two_trees_that_touch_neighbouring_lines_apply_in_turn() {
    let s = Scratch::new("trees");
    let base = s.0.join("base");
    fs::write(base.join("inc.h"), "1\n2\n3\n4\n5\n6\n7\n8\n").unwrap();
    let sh = |args: &[&str]| {
        assert!(Command::new("git")
            .args(args)
            .current_dir(&base)
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success());
    };
    sh(&["add", "inc.h"]);
    sh(&["commit", "-q", "-m", "inc"]);
    sh(&["tag", "-f", "base"]);
    s.no_maintainers();
    s.write(
        "series/series.toml",
        "date = \"2026-11-21 00:00:00 +0000\"\nsources = [\"drivers\"]\n\
         assisted_by = \"LLM\"\ndisclosure = \"Made with an LLM.\"\nseries = [\"a\", \"b\"]\n\
         [base]\nname = \"v7.3.4\"\n",
    );
    // The hand-kept diffs carry one line of context, so that they apply
    // both on the base alone and one after the other; the patches made
    // from them carry three, as format-patch writes them.
    for (name, after) in [("a", 3), ("b", 5)] {
        s.write(&format!("series/{name}/cover.txt"), "Lines.\n");
        s.write(
            &format!("series/{name}/1.diff"),
            &format!(
                "diff --git a/inc.h b/inc.h\n--- a/inc.h\n+++ b/inc.h\n\
                 @@ -{after},2 +{after},3 @@\n {after}\n+{after}a\n {}\n",
                after + 1
            ),
        );
        s.write(
            &format!("series/{name}/series.toml"),
            &format!(
                "subject = \"{name}: a line\"\ncover = \"series/{name}/cover.txt\"\n\
                 change_id = \"20261126-{name}-0123456789ab\"\n\
                 [[patch]]\nsubject = \"{name}: add a line\"\nbody = \"A line.\"\n\
                 diff = \"series/{name}/1.diff\"\n"
            ),
        );
    }
    let paths = s.paths();
    export(&paths, &Identity::default()).unwrap();
    let commits = apply(&paths).unwrap();
    let dir = s.0.join("base");
    let git = Git::new(&dir);
    let last = commits.last().unwrap();
    assert_eq!(
        git.run(&["show", &format!("{last}:inc.h")]).unwrap(),
        "1\n2\n3\n3a\n4\n5\n5a\n6\n7\n8"
    );
}
