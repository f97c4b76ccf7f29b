// SPDX-License-Identifier: GPL-2.0

//! The kernel series: commits built from this repository's files, exported as
//! a mailing-list series.
//!
//! `series/series.toml` is the single description of the series. Each patch
//! names the repository files it adds to the kernel tree (their final
//! version: a file is introduced whole, in exactly one patch) and, optionally,
//! a diff against existing kernel files. Commits are made with a private index
//! in the base repository (no work tree is touched), with fixed dates and the
//! repository's git identity, so the exported series is byte-identical when
//! nothing changed.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Maximum length of a commit subject (checkpatch warns beyond 75 columns of
/// body; subjects are kept well inside the mailing-list convention).
const MAX_SUBJECT: usize = 75;
/// Maximum length of a commit message body line.
const MAX_BODY_LINE: usize = 75;

/// The series manifest (`series/series.toml`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Subject of the cover letter.
    pub subject: String,
    /// Cover letter text, relative to the repository root.
    pub cover: PathBuf,
    /// Author and committer date of every commit, in a format git accepts.
    pub date: String,
    /// Directories whose every file must be part of exactly one patch.
    pub sources: Vec<PathBuf>,
    /// The coding assistant every commit credits with an `Assisted-by:`
    /// trailer (Documentation/process/coding-assistants.rst). The commits
    /// carry no `Signed-off-by:`: only the human who reviews and sends the
    /// series can certify the DCO, and adds theirs.
    pub assisted_by: String,
    /// The patches, in order.
    #[serde(rename = "patch")]
    pub patches: Vec<Patch>,
}

/// One patch of the series.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    /// Commit subject, in kernel form (`subsystem: summary`).
    pub subject: String,
    /// Commit message body, ending with its trailers (`Fixes:`, `Cc:`),
    /// without `Assisted-by:` (added by the tool) or `Signed-off-by:`.
    pub body: String,
    /// New files: repository path -> path in the kernel tree.
    #[serde(default)]
    pub files: BTreeMap<PathBuf, PathBuf>,
    /// A diff against existing kernel files, relative to the repository root.
    pub diff: Option<PathBuf>,
}

/// An error of the series tooling, with a message for the user.
#[derive(Debug)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error(e.to_string())
    }
}

/// Result type of this module.
pub type Result<T> = std::result::Result<T, Error>;

macro_rules! bail {
    ($($arg:tt)*) => { return Err(Error(format!($($arg)*))) };
}

impl Manifest {
    /// Parses and validates a manifest.
    pub fn parse(text: &str) -> Result<Self> {
        let m: Manifest = toml::from_str(text).map_err(|e| Error(format!("series.toml: {e}")))?;
        m.validate()?;
        Ok(m)
    }

    /// Checks the rules a reviewer would otherwise catch by hand.
    fn validate(&self) -> Result<()> {
        if self.patches.is_empty() {
            bail!("series.toml: no patches");
        }
        let mut seen_src = BTreeMap::new();
        let mut seen_dst = BTreeMap::new();
        for (i, p) in self.patches.iter().enumerate() {
            let n = i + 1;
            check_subject(&p.subject).map_err(|e| Error(format!("patch {n}: {e}")))?;
            for (l, line) in p.body.lines().enumerate() {
                let url = line.contains("://") || line.starts_with("Fixes: ");
                if !url && line.chars().count() > MAX_BODY_LINE {
                    bail!(
                        "patch {n} ({}): body line {} is longer than {MAX_BODY_LINE} columns",
                        p.subject,
                        l + 1
                    );
                }
                if line.starts_with("Signed-off-by:") {
                    bail!(
                        "patch {n}: no Signed-off-by: the human submitter adds theirs \
                         (Documentation/process/coding-assistants.rst)"
                    );
                }
                if line.starts_with("Assisted-by:") {
                    bail!("patch {n}: Assisted-by is added by the tool, do not write it");
                }
            }
            if p.body.trim().is_empty() {
                bail!("patch {n} ({}): empty commit message body", p.subject);
            }
            if p.files.is_empty() && p.diff.is_none() {
                bail!("patch {n} ({}): neither files nor diff", p.subject);
            }
            for (src, dst) in &p.files {
                if let Some(prev) = seen_src.insert(src.clone(), n) {
                    bail!(
                        "{} is added by patches {prev} and {n}: a file is introduced whole, once",
                        src.display()
                    );
                }
                if let Some(prev) = seen_dst.insert(dst.clone(), n) {
                    bail!("{} is written by patches {prev} and {n}", dst.display());
                }
            }
        }
        Ok(())
    }

    /// Every repository file the manifest adds to the kernel tree.
    fn listed_files(&self) -> impl Iterator<Item = &PathBuf> {
        self.patches.iter().flat_map(|p| p.files.keys())
    }
}

/// Checks a commit subject for the `subsystem: summary` form.
fn check_subject(s: &str) -> std::result::Result<(), String> {
    let Some((prefix, summary)) = s.split_once(": ") else {
        return Err(format!(
            "subject '{s}' is not of the form 'subsystem: summary'"
        ));
    };
    if prefix.is_empty() || prefix.contains(' ') && !prefix.starts_with("Documentation") {
        return Err(format!("subject '{s}' has a malformed prefix"));
    }
    if summary.is_empty() || summary.ends_with('.') {
        return Err(format!(
            "subject '{s}': summary is empty or ends with a period"
        ));
    }
    if s.chars().count() > MAX_SUBJECT {
        return Err(format!(
            "subject '{s}' is longer than {MAX_SUBJECT} characters"
        ));
    }
    Ok(())
}

/// Where things are: this repository and the base kernel repository.
pub struct Paths {
    /// Root of this repository.
    pub repo: PathBuf,
    /// The base kernel git repository (tools/fetch-kernel.sh).
    pub base: PathBuf,
}

impl Paths {
    fn manifest(&self) -> Result<Manifest> {
        let path = self.repo.join("series/series.toml");
        let text =
            fs::read_to_string(&path).map_err(|e| Error(format!("{}: {e}", path.display())))?;
        Manifest::parse(&text)
    }

    fn patches_dir(&self) -> PathBuf {
        self.repo.join("patches")
    }
}

/// A git invocation on one repository, with an optional private index.
struct Git<'a> {
    dir: &'a Path,
    index: Option<PathBuf>,
    env: Vec<(&'static str, String)>,
}

impl<'a> Git<'a> {
    fn new(dir: &'a Path) -> Self {
        Git {
            dir,
            index: None,
            env: Vec::new(),
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        c.arg("-C").arg(self.dir);
        // Output must not depend on the user's configuration.
        for kv in [
            "core.abbrev=12",
            "diff.algorithm=myers",
            "diff.renames=true",
            "diff.noprefix=false",
            "diff.mnemonicPrefix=false",
            "format.signature=",
            "format.coverFromDescription=subject",
        ] {
            c.args(["-c", kv]);
        }
        c.args(args);
        if let Some(i) = &self.index {
            c.env("GIT_INDEX_FILE", i);
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs git, feeding `input` on stdin; returns trimmed stdout.
    fn run_with(&self, args: &[&str], input: Option<&[u8]>) -> Result<String> {
        let mut c = self.cmd(args);
        c.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| Error(format!("cannot run git: {e}")))?;
        if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(data)?;
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "git {} failed in {}: {}",
                args.join(" "),
                self.dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn run(&self, args: &[&str]) -> Result<String> {
        self.run_with(args, None)
    }
}

/// The commit the series applies to.
const BASE_REF: &str = "refs/tags/base";
/// Where the generated series head is recorded in the base repository.
const SERIES_REF: &str = "refs/rvram/series";

/// Builds the series commits from the repository; returns their ids in order.
pub fn build_commits(paths: &Paths) -> Result<Vec<String>> {
    let m = paths.manifest()?;
    check_sources(paths, &m)?;

    let ours = Git::new(&paths.repo);
    let name = ours.run(&["config", "user.name"])?;
    let email = ours.run(&["config", "user.email"])?;

    let mut git = Git::new(&paths.base);
    let git_dir = PathBuf::from(git.run(&["rev-parse", "--absolute-git-dir"])?);
    git.index = Some(git_dir.join("rvram-series.index"));
    git.env = vec![
        ("GIT_AUTHOR_NAME", name.clone()),
        ("GIT_AUTHOR_EMAIL", email.clone()),
        ("GIT_AUTHOR_DATE", m.date.clone()),
        ("GIT_COMMITTER_NAME", name.clone()),
        ("GIT_COMMITTER_EMAIL", email.clone()),
        ("GIT_COMMITTER_DATE", m.date.clone()),
    ];

    let mut parent = git.run(&["rev-parse", &format!("{BASE_REF}^{{commit}}")])?;
    let mut commits = Vec::new();
    for (i, p) in m.patches.iter().enumerate() {
        git.run(&["read-tree", &parent])?;
        if let Some(diff) = &p.diff {
            let diff = paths.repo.join(diff);
            let d = diff.to_string_lossy();
            git.run(&["apply", "--cached", "--whitespace=error-all", &d])
                .map_err(|e| Error(format!("patch {} ({}): {e}", i + 1, p.subject)))?;
        }
        for (src, dst) in &p.files {
            let abs = paths.repo.join(src);
            let meta = fs::metadata(&abs)
                .map_err(|e| Error(format!("patch {}: {}: {e}", i + 1, src.display())))?;
            let blob = git.run(&["hash-object", "-w", "--no-filters", &abs.to_string_lossy()])?;
            let mode = if is_executable(&meta) {
                "100755"
            } else {
                "100644"
            };
            let info = format!("{mode},{blob},{}", dst.display());
            git.run(&["update-index", "--add", "--cacheinfo", &info])?;
        }
        let tree = git.run(&["write-tree"])?;
        let msg = commit_message(&p.subject, &p.body, &m.assisted_by);
        parent = git.run_with(&["commit-tree", &tree, "-p", &parent], Some(msg.as_bytes()))?;
        commits.push(parent.clone());
    }
    git.run(&["update-ref", SERIES_REF, &parent])?;
    Ok(commits)
}

/// Trailer keys a commit body may end with (submitting-patches.rst).
const TRAILERS: &[&str] = &[
    "Fixes:",
    "Cc:",
    "Link:",
    "Closes:",
    "Reported-by:",
    "Suggested-by:",
    "Co-developed-by:",
    "Reviewed-by:",
    "Tested-by:",
    "Acked-by:",
];

/// A patch's commit message: subject, body and the `Assisted-by:` trailer,
/// in one trailer block with the body's own trailers if it ends with some.
fn commit_message(subject: &str, body: &str, assisted_by: &str) -> String {
    let body = body.trim();
    let last = body.rsplit("\n\n").next().unwrap_or("");
    let trailers = last
        .lines()
        .all(|l| TRAILERS.iter().any(|t| l.starts_with(t)));
    let sep = if trailers { "\n" } else { "\n\n" };
    format!("{subject}\n\n{body}{sep}Assisted-by: {assisted_by}\n")
}

#[cfg(unix)]
fn is_executable(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// Every file under the manifest's source directories must be in the series
/// (one source of truth), and every listed file must exist.
fn check_sources(paths: &Paths, m: &Manifest) -> Result<()> {
    let ours = Git::new(&paths.repo);
    let mut tracked = Vec::new();
    for dir in &m.sources {
        // Tracked and untracked-but-not-ignored files: what would be committed.
        let out = ours.run(&[
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
            &dir.to_string_lossy(),
        ])?;
        tracked.extend(out.lines().map(PathBuf::from));
    }
    let listed: Vec<&PathBuf> = m.listed_files().collect();
    let missing: Vec<String> = tracked
        .iter()
        .filter(|f| paths.repo.join(f).exists() && !listed.contains(f))
        .map(|f| f.display().to_string())
        .collect();
    if !missing.is_empty() {
        bail!(
            "not in any patch of series/series.toml: {}",
            missing.join(", ")
        );
    }
    for f in listed {
        if !paths.repo.join(f).is_file() {
            bail!(
                "series/series.toml lists {}, which does not exist",
                f.display()
            );
        }
    }
    Ok(())
}

/// Writes the series as format-patch files plus a cover letter into `out`.
fn format_series(paths: &Paths, m: &Manifest, head: &str, out: &Path) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(out)?;
    let git = Git::new(&paths.base);
    let range = format!("{BASE_REF}..{head}");
    let list = git.run(&[
        "format-patch",
        "--quiet",
        "--zero-commit",
        "--no-signature",
        "--no-attach",
        "--cover-letter",
        "--numbered",
        "--no-thread",
        "--no-renames",
        "-o",
        &out.to_string_lossy(),
        &range,
    ])?;
    let _ = list;
    let mut files: Vec<PathBuf> = fs::read_dir(out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "patch"))
        .collect();
    files.sort();

    let blurb = fs::read_to_string(paths.repo.join(&m.cover))
        .map_err(|e| Error(format!("{}: {e}", m.cover.display())))?;
    let cover = files
        .iter()
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("0000-"))
        })
        .ok_or_else(|| Error("format-patch wrote no cover letter".into()))?;
    let text = fs::read_to_string(cover)?;
    let text = fill_cover(&text, &m.subject, &blurb, &m.date)?;
    fs::write(cover, text)?;
    Ok(files)
}

/// Fills format-patch's cover letter template. Its Date header is the time of
/// the run; it is replaced by the series date so that output is reproducible.
fn fill_cover(text: &str, subject: &str, blurb: &str, date: &str) -> Result<String> {
    if !text.contains("*** SUBJECT HERE ***") || !text.contains("*** BLURB HERE ***") {
        bail!("unexpected cover letter template from git format-patch");
    }
    let mut out = String::with_capacity(text.len() + blurb.len());
    let mut in_header = true;
    for line in text.split_inclusive('\n') {
        if in_header && line.starts_with("Date: ") {
            out.push_str(&format!("Date: {}\n", rfc2822(date)));
            continue;
        }
        if line == "\n" {
            in_header = false;
        }
        out.push_str(line);
    }
    Ok(out.replacen("*** SUBJECT HERE ***", subject, 1).replacen(
        "*** BLURB HERE ***",
        blurb.trim_end(),
        1,
    ))
}

/// The manifest date is written as git's "YYYY-MM-DD HH:MM:SS +ZZZZ"; mail
/// headers want RFC 2822. The weekday is computed so the header is valid.
fn rfc2822(date: &str) -> String {
    let parse = || -> Option<String> {
        let mut it = date.split_whitespace();
        let ymd = it.next()?;
        let hms = it.next()?;
        let tz = it.next().unwrap_or("+0000");
        let mut d = ymd.split('-').map(|s| s.parse::<i64>().ok());
        let (y, mo, dd) = (d.next()??, d.next()??, d.next()??);
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
        // Sakamoto's day-of-week algorithm.
        let t = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4];
        let yy = if mo < 3 { y - 1 } else { y };
        let idx = usize::try_from(mo - 1).ok()?;
        let wd = (yy + yy / 4 - yy / 100 + yy / 400 + t.get(idx)? + dd).rem_euclid(7);
        Some(format!(
            "{}, {dd} {} {y} {hms} {tz}",
            DAYS[wd as usize],
            MONTHS.get(idx)?
        ))
    };
    parse().unwrap_or_else(|| date.to_string())
}

/// Regenerates `patches/`.
pub fn export(paths: &Paths) -> Result<usize> {
    let m = paths.manifest()?;
    let commits = build_commits(paths)?;
    let head = commits.last().expect("validated: at least one patch");
    let dir = paths.patches_dir();
    if dir.exists() {
        for e in fs::read_dir(&dir)? {
            let p = e?.path();
            if p.extension().is_some_and(|e| e == "patch") {
                fs::remove_file(p)?;
            }
        }
    }
    Ok(format_series(paths, &m, head, &dir)?.len())
}

/// Checks that `patches/` is what `export` would write; returns the names of
/// stale, missing or extra files.
pub fn check(paths: &Paths) -> Result<Vec<String>> {
    let m = paths.manifest()?;
    let commits = build_commits(paths)?;
    let head = commits.last().expect("validated: at least one patch");
    let tmp = std::env::temp_dir().join(format!("rvram-series-check-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let fresh = format_series(paths, &m, head, &tmp);
    let result = fresh.and_then(|files| compare(&files, &paths.patches_dir()));
    let _ = fs::remove_dir_all(&tmp);
    result
}

fn compare(fresh: &[PathBuf], dir: &Path) -> Result<Vec<String>> {
    let mut stale = Vec::new();
    let mut names = Vec::new();
    for f in fresh {
        let name = f.file_name().expect("a file").to_os_string();
        let ours = dir.join(&name);
        if fs::read(&ours).ok() != Some(fs::read(f)?) {
            stale.push(name.to_string_lossy().into_owned());
        }
        names.push(name);
    }
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd {
            let name = e?.file_name();
            if name.to_string_lossy().ends_with(".patch") && !names.contains(&name) {
                stale.push(format!("{} (extra)", name.to_string_lossy()));
            }
        }
    }
    stale.sort();
    Ok(stale)
}

/// Applies `patches/` to the base with `git apply` (a private index, no work
/// tree), making one commit per patch; returns the commit ids in order.
pub fn apply(paths: &Paths) -> Result<Vec<String>> {
    let mut files: Vec<PathBuf> = fs::read_dir(paths.patches_dir())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "patch")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("0000-"))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no patches in {}", paths.patches_dir().display());
    }
    let mut git = Git::new(&paths.base);
    let git_dir = PathBuf::from(git.run(&["rev-parse", "--absolute-git-dir"])?);
    git.index = Some(git_dir.join("rvram-apply.index"));
    let date = "1970-01-01 00:00:00 +0000".to_string();
    git.env = vec![
        ("GIT_AUTHOR_NAME", "rvram".into()),
        ("GIT_AUTHOR_EMAIL", "rvram@localhost".into()),
        ("GIT_AUTHOR_DATE", date.clone()),
        ("GIT_COMMITTER_NAME", "rvram".into()),
        ("GIT_COMMITTER_EMAIL", "rvram@localhost".into()),
        ("GIT_COMMITTER_DATE", date),
    ];
    let mut parent = git.run(&["rev-parse", &format!("{BASE_REF}^{{commit}}")])?;
    git.run(&["read-tree", &parent])?;
    let mut commits = Vec::new();
    for f in &files {
        let name = f
            .file_name()
            .expect("a file")
            .to_string_lossy()
            .into_owned();
        git.run(&["apply", "--cached", &f.to_string_lossy()])
            .map_err(|e| Error(format!("{name} does not apply: {e}")))?;
        let tree = git.run(&["write-tree"])?;
        let text = fs::read_to_string(f)?;
        let subject = text
            .lines()
            .find_map(|l| l.strip_prefix("Subject: "))
            .map(strip_patch_prefix)
            .unwrap_or(&name);
        parent = git.run_with(
            &["commit-tree", &tree, "-p", &parent],
            Some(format!("{subject}\n").as_bytes()),
        )?;
        commits.push(parent.clone());
    }
    git.run(&["update-ref", "refs/rvram/applied", &parent])?;
    Ok(commits)
}

/// `[PATCH 2/5] mm/hmm: foo` -> `mm/hmm: foo`.
fn strip_patch_prefix(subject: &str) -> &str {
    match subject.strip_prefix('[').and_then(|s| s.split_once("] ")) {
        Some((tag, rest)) if tag.starts_with("PATCH") => rest,
        _ => subject,
    }
}

#[cfg(test)]
mod tests;
