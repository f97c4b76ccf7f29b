// SPDX-License-Identifier: GPL-2.0

//! The kernel series: commits built from this repository's files, exported as
//! the mailing-list series they are posted in.
//!
//! `series/series.toml` lists the series in the order they apply, and what
//! they share (base, date, sources). Each series is a directory
//! `series/<name>/` with its own `series.toml` (subject, subject prefix,
//! version, change-id, the series it requires, its patches) and cover
//! letter. Each patch names the repository files it adds to the kernel tree
//! (each file in exactly one patch of one series) and, optionally, a diff.
//! Every line of a file is written once, in the repository: the patch that
//! lists a file adds the repository's version less what the diffs of the
//! later patches of its series add to it (their hooks: a `mod` line, a
//! field, a match arm), taken back last first. A driver posted in several
//! patches is thus whole files plus small hooks, and its last patch leaves
//! every file at the repository's version (checked when the series are
//! built).
//!
//! A series is generated on top of the base and of the series it requires
//! (transitively), and nothing else: its cover letter names its base commit
//! and its prerequisites (`prerequisite-patch-id:` from git, and
//! `prerequisite-change-id:` as b4 writes them). The test kernel applies every
//! series in order, on one line of history. Commits are made with a private
//! index in the base repository (no work tree is touched), with fixed dates
//! and the repository's git identity, so the exported series are
//! byte-identical when nothing changed.

use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
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

/// The list of series (`series/series.toml`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Author and committer date of every commit, in a format git accepts.
    pub date: String,
    /// Directories whose every file must be part of exactly one patch.
    pub sources: Vec<PathBuf>,
    /// The coding assistant every commit credits with an `Assisted-by:`
    /// trailer (Documentation/process/coding-assistants.rst). The commits
    /// carry no `Signed-off-by:`: only the human who reviews and sends the
    /// series can certify the DCO, and adds theirs (`make series SIGNOFF=`).
    pub assisted_by: String,
    /// How the series were made, for every cover letter
    /// (Documentation/process/generated-content.rst: the tools, and the
    /// nature of the prompts and of the assistance).
    pub disclosure: String,
    /// The public commit the series apply to.
    pub base: Base,
    /// The series, in the order they apply; each may require earlier ones.
    pub series: Vec<String>,
}

/// The public base of every series.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Base {
    /// What the base is, in words, for cover letters without a
    /// `base-commit:` (the source package and version it came from, and
    /// where the series stand upstream).
    pub name: String,
    /// Its commit in the public tree, for `base-commit:` (40 hex digits),
    /// once the series are rebased on a tree whose commit can be verified.
    /// Without it, cover letters give `name` instead, and a signed-off
    /// export says what the submitter must do before sending.
    pub commit: Option<String>,
}

/// One series (`series/<name>/series.toml`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Series {
    /// The directory name, set when loaded.
    #[serde(skip)]
    pub name: String,
    /// Subject of the cover letter.
    pub subject: String,
    /// Cover letter text, relative to the repository root.
    pub cover: PathBuf,
    /// Subject prefix: `PATCH` or `RFC PATCH`.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// Version of the series (`v3`), if it had earlier postings.
    pub version: Option<u32>,
    /// The b4 change-id: stays the same across versions.
    pub change_id: String,
    /// Earlier series this one is generated on top of.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Recipients beyond what scripts/get_maintainer.pl finds (people who
    /// reviewed earlier versions, authors of related work).
    #[serde(default)]
    pub cc: Vec<String>,
    /// The patches, in order.
    #[serde(rename = "patch")]
    pub patches: Vec<Patch>,
}

fn default_prefix() -> String {
    "PATCH".into()
}

/// One patch of a series.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    /// Commit subject, in kernel form (`subsystem: summary`).
    pub subject: String,
    /// Commit message body, ending with its trailers (`Fixes:`, `Cc:`),
    /// without `Assisted-by:` (added by the tool) or `Signed-off-by:`.
    pub body: String,
    /// Files this patch adds: repository path -> path in the kernel tree,
    /// at the repository's version less the hooks that the diffs of the
    /// later patches of the series add to them.
    #[serde(default)]
    pub files: BTreeMap<PathBuf, PathBuf>,
    /// A diff against the kernel tree as the patches before leave it,
    /// relative to the repository root; applied before `files`.
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
    /// Parses the list of series.
    pub fn parse(text: &str) -> Result<Self> {
        let m: Manifest = toml::from_str(text).map_err(|e| Error(format!("series.toml: {e}")))?;
        if m.series.is_empty() {
            bail!("series/series.toml: no series");
        }
        if let Some(c) = &m.base.commit {
            if c.len() != 40 || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
                bail!("series/series.toml: base.commit '{c}' is not a full commit id");
            }
        }
        Ok(m)
    }
}

impl Series {
    /// Parses and validates one series.
    pub fn parse(name: &str, text: &str) -> Result<Self> {
        let mut s: Series =
            toml::from_str(text).map_err(|e| Error(format!("series/{name}/series.toml: {e}")))?;
        s.name = name.to_string();
        s.validate()
            .map_err(|e| Error(format!("series {name}: {}", e.0)))?;
        Ok(s)
    }

    /// Checks the rules a reviewer would otherwise catch by hand.
    fn validate(&self) -> Result<()> {
        if self.patches.is_empty() {
            bail!("no patches");
        }
        if !["PATCH", "RFC PATCH"].contains(&self.prefix.as_str()) {
            bail!("prefix '{}' is neither PATCH nor RFC PATCH", self.prefix);
        }
        check_change_id(&self.change_id)?;
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
                if let Some(f) = line.strip_prefix("Fixes: ") {
                    check_fixes(f).map_err(|e| Error(format!("patch {n}: {e}")))?;
                }
            }
            if p.body.trim().is_empty() {
                bail!("patch {n} ({}): empty commit message body", p.subject);
            }
            if p.files.is_empty() && p.diff.is_none() {
                bail!("patch {n} ({}): neither files nor diff", p.subject);
            }
        }
        Ok(())
    }

    /// The subject prefix with the version: `RFC PATCH v3`.
    fn full_prefix(&self) -> String {
        match self.version {
            Some(v) if v > 1 => format!("{} v{v}", self.prefix),
            _ => self.prefix.clone(),
        }
    }
}

/// A b4 change-id: `YYYYMMDD-words-0123456789ab`.
fn check_change_id(id: &str) -> Result<()> {
    let parts: Vec<&str> = id.split('-').collect();
    let ok = parts.len() >= 3
        && parts[0].len() == 8
        && parts[0].bytes().all(|b| b.is_ascii_digit())
        && parts[parts.len() - 1].len() == 12
        && parts[parts.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && parts[1..parts.len() - 1]
            .iter()
            .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric()));
    if !ok {
        bail!("change_id '{id}' is not of the form YYYYMMDD-words-0123456789ab");
    }
    Ok(())
}

/// A `Fixes:` trailer's value: `<12+ hex> ("subject")`.
fn check_fixes(f: &str) -> std::result::Result<(), String> {
    let (sha, rest) = f.split_once(' ').unwrap_or((f, ""));
    if sha.len() < 12 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "Fixes: '{f}': the commit id needs 12 hex digits or more"
        ));
    }
    if !(rest.starts_with("(\"") && rest.ends_with("\")")) {
        return Err(format!(
            "Fixes: '{f}': the subject must follow as (\"...\")"
        ));
    }
    Ok(())
}

/// Every series, loaded and checked together.
pub struct Set {
    /// The list and what the series share.
    pub manifest: Manifest,
    /// The series, in the order they apply.
    pub series: Vec<Series>,
}

impl Set {
    /// Checks what spans series: names, requirements, files added once.
    fn validate(&self) -> Result<()> {
        let mut seen_src = BTreeMap::new();
        let mut seen_dst = BTreeMap::new();
        for (i, s) in self.series.iter().enumerate() {
            for r in &s.requires {
                match self.index(r) {
                    Some(j) if j < i => {}
                    Some(_) => bail!("series {}: requires {r}, which comes after it", s.name),
                    None => bail!("series {}: requires {r}, which is not a series", s.name),
                }
            }
            for (n, p) in s.patches.iter().enumerate() {
                let at = format!("{} patch {}", s.name, n + 1);
                for (src, dst) in &p.files {
                    if let Some(prev) = seen_src.insert(src.clone(), at.clone()) {
                        bail!(
                            "{} is added by {prev} and {at}: a file is introduced whole, once",
                            src.display()
                        );
                    }
                    if let Some(prev) = seen_dst.insert(dst.clone(), at.clone()) {
                        bail!("{} is written by {prev} and {at}", dst.display());
                    }
                }
            }
        }
        Ok(())
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.series.iter().position(|s| s.name == name)
    }

    /// The series `i` is generated on: what it requires, transitively, in
    /// the order they apply.
    fn prerequisites(&self, i: usize) -> Vec<usize> {
        let mut need = vec![false; self.series.len()];
        let mut stack = vec![i];
        while let Some(j) = stack.pop() {
            for r in &self.series[j].requires {
                let k = self.index(r).expect("validated");
                if !need[k] {
                    need[k] = true;
                    stack.push(k);
                }
            }
        }
        (0..i).filter(|&k| need[k]).collect()
    }

    /// Every repository file the series add to the kernel tree.
    fn listed_files(&self) -> impl Iterator<Item = &PathBuf> {
        self.series
            .iter()
            .flat_map(|s| s.patches.iter())
            .flat_map(|p| p.files.keys())
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
    /// Loads and checks every series.
    pub fn load(&self) -> Result<Set> {
        let read = |rel: &str| {
            let path = self.repo.join(rel);
            fs::read_to_string(&path).map_err(|e| Error(format!("{}: {e}", path.display())))
        };
        let manifest = Manifest::parse(&read("series/series.toml")?)?;
        let mut series = Vec::new();
        for name in &manifest.series {
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                bail!("series/series.toml: '{name}' is not a series directory name");
            }
            series.push(Series::parse(
                name,
                &read(&format!("series/{name}/series.toml"))?,
            )?);
        }
        let set = Set { manifest, series };
        set.validate()?;
        Ok(set)
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

/// The commit the series apply to.
const BASE_REF: &str = "refs/tags/base";
/// Where the head of all series, applied in order, is recorded in the base
/// repository.
const SERIES_REF: &str = "refs/rvram/series";

/// Who the commits are from, and who signs them off.
#[derive(Clone, Debug, Default)]
pub struct Identity {
    /// The submitter (`Name <email>`) whose `Signed-off-by:` the commits
    /// get, and who is then their author; `None` for the repository's git
    /// identity and no sign-off.
    pub signoff: Option<String>,
}

/// Makes series commits in the base repository.
struct Builder<'a> {
    paths: &'a Paths,
    set: &'a Set,
    git: Git<'a>,
    signoff: Option<String>,
    /// With a sign-off: the repository's identity (`Name <email>`), which
    /// the diffs name where the submitter's belongs (the MAINTAINERS entry
    /// of a new driver), and the submitter's, which replaces it.
    identity: Option<(String, String)>,
    /// (parent, series, patch) -> commit: a patch on the same parent makes
    /// the same commit, so chains shared by several series are built once.
    memo: HashMap<(String, usize, usize), String>,
}

impl<'a> Builder<'a> {
    fn new(paths: &'a Paths, set: &'a Set, who: &Identity) -> Result<Self> {
        check_sources(paths, set)?;
        let ours = Git::new(&paths.repo);
        let repo_identity = || -> Result<String> {
            Ok(format!(
                "{} <{}>",
                ours.run(&["config", "user.name"])?,
                ours.run(&["config", "user.email"])?
            ))
        };
        let (name, email) = match &who.signoff {
            Some(s) => {
                let (n, e) = s
                    .trim()
                    .strip_suffix('>')
                    .and_then(|s| s.split_once(" <"))
                    .ok_or_else(|| Error(format!("SIGNOFF '{s}' is not 'Name <email>'")))?;
                if is_placeholder(e) {
                    bail!("SIGNOFF '{s}' is a placeholder address: sign off as yourself");
                }
                (n.trim().to_string(), e.to_string())
            }
            None => {
                let ours = Git::new(&paths.repo);
                (
                    ours.run(&["config", "user.name"])?,
                    ours.run(&["config", "user.email"])?,
                )
            }
        };
        let mut git = Git::new(&paths.base);
        let git_dir = PathBuf::from(git.run(&["rev-parse", "--absolute-git-dir"])?);
        git.index = Some(git_dir.join("rvram-series.index"));
        let date = set.manifest.date.clone();
        git.env = vec![
            ("GIT_AUTHOR_NAME", name.clone()),
            ("GIT_AUTHOR_EMAIL", email.clone()),
            ("GIT_AUTHOR_DATE", date.clone()),
            ("GIT_COMMITTER_NAME", name.clone()),
            ("GIT_COMMITTER_EMAIL", email.clone()),
            ("GIT_COMMITTER_DATE", date),
        ];
        let signoff = who.signoff.as_ref().map(|_| format!("{name} <{email}>"));
        let identity = match &signoff {
            Some(s) => Some((repo_identity()?, s.clone())),
            None => None,
        };
        Ok(Builder {
            paths,
            set,
            git,
            signoff,
            identity,
            memo: HashMap::new(),
        })
    }

    fn base(&self) -> Result<String> {
        self.git
            .run(&["rev-parse", &format!("{BASE_REF}^{{commit}}")])
    }

    /// Commits series `si` on `parent`; returns the commits in order.
    fn chain(&mut self, parent: &str, si: usize) -> Result<Vec<String>> {
        let series = &self.set.series[si];
        let mut parent = parent.to_string();
        let mut commits = Vec::new();
        for (pi, p) in series.patches.iter().enumerate() {
            let key = (parent.clone(), si, pi);
            let commit = match self.memo.get(&key) {
                Some(c) => c.clone(),
                None => {
                    let c = self
                        .commit(&parent, p, &series.patches[pi + 1..])
                        .map_err(|e| {
                            Error(format!(
                                "{} patch {} ({}): {e}",
                                series.name,
                                pi + 1,
                                p.subject
                            ))
                        })?;
                    self.memo.insert(key, c.clone());
                    c
                }
            };
            commits.push(commit.clone());
            parent = commit;
        }
        self.check_final(si, &parent)?;
        Ok(commits)
    }

    /// Checks that series `si`, ending at `last`, leaves every file it lists
    /// at the repository's version: the later diffs that change a file add
    /// back exactly what [`Builder::piece_blob`] took from it.
    fn check_final(&self, si: usize, last: &str) -> Result<()> {
        let series = &self.set.series[si];
        for (pi, p) in series.patches.iter().enumerate() {
            for (src, dst) in &p.files {
                let abs = self.paths.repo.join(src);
                let want =
                    self.git
                        .run(&["hash-object", "--no-filters", &abs.to_string_lossy()])?;
                let have = self
                    .git
                    .run(&["rev-parse", &format!("{last}:{}", dst.display())])?;
                if have != want {
                    bail!(
                        "{} patch {} adds {}, but the series does not leave it at the \
                         repository's version: a later diff changes it beyond its hooks",
                        series.name,
                        pi + 1,
                        dst.display()
                    );
                }
            }
        }
        Ok(())
    }

    /// The diff of `p` as it is applied: with a sign-off, the submitter
    /// replaces the repository's identity in it (a new driver's
    /// MAINTAINERS entry), and no line it adds may name a placeholder
    /// address. The temporary file, if any, lives as long as the result.
    fn diff_of(&self, p: &Patch) -> Result<Option<(PathBuf, Option<TempFile>)>> {
        let Some(diff) = &p.diff else {
            return Ok(None);
        };
        let diff = self.paths.repo.join(diff);
        let Some((ours, theirs)) = &self.identity else {
            return Ok(Some((diff, None)));
        };
        let text =
            fs::read_to_string(&diff).map_err(|e| Error(format!("{}: {e}", diff.display())))?;
        let text = text.replace(ours.as_str(), theirs);
        if let Some(line) = text
            .lines()
            .find(|l| l.starts_with('+') && placeholder_in(l))
        {
            bail!("{}: names a placeholder address: {line}", diff.display());
        }
        let signed = tempfile_with(&text)?;
        Ok(Some((signed.0.clone(), Some(signed))))
    }

    /// The blob a patch adds for repository file `src` at `dst`: the
    /// repository's version with the diffs of the later patches of its
    /// series (`later`) that change `dst` taken back, last first, so that
    /// those patches bring it to the repository's version. The driver is
    /// written once, in the repository; a later patch's diff is the hook
    /// that adds what it brings to a file added before (a `mod` line, a
    /// field, a match arm).
    fn piece_blob(&self, src: &Path, dst: &Path, later: &[Patch]) -> Result<String> {
        let abs = self.paths.repo.join(src);
        let blob = self
            .git
            .run(&["hash-object", "-w", "--no-filters", &abs.to_string_lossy()])?;
        let dst_s = dst.to_string_lossy();
        let mut hooks = Vec::new();
        for p in later {
            let Some((path, tmp)) = self.diff_of(p)? else {
                continue;
            };
            let text =
                fs::read_to_string(&path).map_err(|e| Error(format!("{}: {e}", path.display())))?;
            if diff_touches(&text, &dst_s) {
                hooks.push((path, tmp, &p.subject));
            }
        }
        if hooks.is_empty() {
            return Ok(blob);
        }
        // A private index holding the file alone, rewound hook by hook.
        let mut git = Git::new(&self.paths.base);
        let index = self
            .git
            .index
            .as_ref()
            .expect("builder index")
            .with_extension("piece");
        git.index = Some(index.clone());
        git.run(&["read-tree", "--empty"])?;
        git.run(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{blob},{dst_s}"),
        ])?;
        for (path, _tmp, subject) in hooks.iter().rev() {
            let include = format!("--include={dst_s}");
            git.run(&["apply", "--cached", "-R", &include, &path.to_string_lossy()])
                .map_err(|e| {
                    Error(format!(
                        "{}: the diff of the later patch \"{subject}\" does not take back \
                         from the repository's version: {e}",
                        src.display()
                    ))
                })?;
        }
        let rewound = git.run(&["rev-parse", &format!(":{dst_s}")])?;
        let _ = fs::remove_file(&index);
        Ok(rewound)
    }

    fn commit(&self, parent: &str, p: &Patch, later: &[Patch]) -> Result<String> {
        let git = &self.git;
        git.run(&["read-tree", parent])?;
        if let Some((diff, _tmp)) = self.diff_of(p)? {
            git.run(&[
                "apply",
                "--cached",
                "--whitespace=error-all",
                &diff.to_string_lossy(),
            ])?;
        }
        for (src, dst) in &p.files {
            let abs = self.paths.repo.join(src);
            let meta = fs::metadata(&abs).map_err(|e| Error(format!("{}: {e}", src.display())))?;
            let blob = self.piece_blob(src, dst, later)?;
            let mode = if is_executable(&meta) {
                "100755"
            } else {
                "100644"
            };
            let info = format!("{mode},{blob},{}", dst.display());
            git.run(&["update-index", "--add", "--cacheinfo", &info])?;
        }
        let tree = git.run(&["write-tree"])?;
        let msg = commit_message(
            &p.subject,
            &p.body,
            &self.set.manifest.assisted_by,
            self.signoff.as_deref(),
        );
        git.run_with(&["commit-tree", &tree, "-p", parent], Some(msg.as_bytes()))
    }

    /// Series `si` as posted: the commit it is generated on (the base with
    /// its prerequisites) and its own commits.
    fn posted(&mut self, si: usize) -> Result<(String, Vec<String>)> {
        let mut parent = self.base()?;
        for k in self.set.prerequisites(si) {
            let c = self.chain(&parent, k)?;
            parent = c.last().expect("validated: patches").clone();
        }
        let commits = self.chain(&parent, si)?;
        Ok((parent, commits))
    }

    /// Every series on one line of history, in order: what the test kernel
    /// is built from.
    fn linear(&mut self) -> Result<Vec<String>> {
        let mut parent = self.base()?;
        let mut all = Vec::new();
        for si in 0..self.set.series.len() {
            let c = self
                .chain(&parent, si)
                .map_err(|e| Error(format!("on top of every series before it: {e}")))?;
            parent = c.last().expect("validated: patches").clone();
            all.extend(c);
        }
        self.git.run(&["update-ref", SERIES_REF, &parent])?;
        Ok(all)
    }
}

/// Builds every series on one line of history, then each series as it is
/// posted (on its prerequisites alone); returns every commit once, in that
/// order: the bisect check builds each.
pub fn build_commits(paths: &Paths) -> Result<Vec<String>> {
    let set = paths.load()?;
    let mut b = Builder::new(paths, &set, &Identity::default())?;
    let mut all = b.linear()?;
    for si in 0..set.series.len() {
        for c in b.posted(si)?.1 {
            if !all.contains(&c) {
                all.push(c);
            }
        }
    }
    Ok(all)
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
fn commit_message(subject: &str, body: &str, assisted_by: &str, signoff: Option<&str>) -> String {
    let body = body.trim();
    let last = body.rsplit("\n\n").next().unwrap_or("");
    let trailers = last
        .lines()
        .all(|l| TRAILERS.iter().any(|t| l.starts_with(t)));
    let sep = if trailers { "\n" } else { "\n\n" };
    let sob = signoff
        .map(|s| format!("Signed-off-by: {s}\n"))
        .unwrap_or_default();
    format!("{subject}\n\n{body}{sep}Assisted-by: {assisted_by}\n{sob}")
}

#[cfg(unix)]
fn is_executable(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

/// Every file under the manifest's source directories must be in a series
/// (one source of truth), and every listed file must exist.
fn check_sources(paths: &Paths, set: &Set) -> Result<()> {
    let ours = Git::new(&paths.repo);
    let mut tracked = Vec::new();
    for dir in &set.manifest.sources {
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
    let listed: Vec<&PathBuf> = set.listed_files().collect();
    let missing: Vec<String> = tracked
        .iter()
        .filter(|f| paths.repo.join(f).exists() && !listed.contains(f))
        .map(|f| f.display().to_string())
        .collect();
    if !missing.is_empty() {
        bail!("not in any patch of series/: {}", missing.join(", "));
    }
    for f in listed {
        if !paths.repo.join(f).is_file() {
            bail!("series/ lists {}, which does not exist", f.display());
        }
    }
    Ok(())
}

/// The recipients of a series: `To:` the maintainers of what it touches,
/// `Cc:` their reviewers and lists, and the series' own `cc`, from the base
/// tree's scripts/get_maintainer.pl (without git history: the base is a
/// source package).
#[derive(Debug, Default, PartialEq)]
pub struct Recipients {
    /// Maintainers.
    pub to: Vec<String>,
    /// Reviewers, lists and the series' own additions.
    pub cc: Vec<String>,
}

fn recipients(paths: &Paths, series: &Series, from: &str, to: &str) -> Result<Recipients> {
    let git = Git::new(&paths.base);
    let diff = git.run(&["diff", from, to])?;
    let script = paths.base.join("scripts/get_maintainer.pl");
    if !script.is_file() {
        bail!(
            "{}: not found (run tools/fetch-kernel.sh)",
            script.display()
        );
    }
    let ask = |roles: &[&str]| -> Result<Vec<String>> {
        let mut c = Command::new("perl");
        // get_maintainer.pl walks perl hashes: fix their order, so that the
        // same series gets the same recipients in the same order.
        c.current_dir(&paths.base)
            .env("PERL_HASH_SEED", "0")
            .env("PERL_PERTURB_KEYS", "0")
            .arg(&script)
            .args([
                "--no-git",
                "--no-git-fallback",
                "--no-rolestats",
                "--no-multiline",
            ])
            .args(roles)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .map_err(|e| Error(format!("cannot run get_maintainer.pl: {e}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(diff.as_bytes())?;
            stdin.write_all(b"\n")?;
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "get_maintainer.pl failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .split(", ")
            .flat_map(|l| l.lines())
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect())
    };
    let to = ask(&["--m", "--nor", "--nol"])?;
    let mut cc: Vec<String> = ask(&["--nom", "--r", "--l"])?
        .into_iter()
        .filter(|a| !to.contains(a))
        .collect();
    for a in &series.cc {
        if !to.contains(a) && !cc.contains(a) {
            cc.push(a.clone());
        }
    }
    Ok(Recipients { to, cc })
}

/// Writes series `si` as format-patch files into `out`: with a cover
/// letter, or for a series of one patch, as `[PATCH]` with the cover's
/// text below its `---` line, where notes that are not for the commit go.
fn format_series(b: &mut Builder<'_>, si: usize, out: &Path) -> Result<Vec<PathBuf>> {
    let (from, commits) = b.posted(si)?;
    let head = commits.last().expect("validated: patches").clone();
    let set = b.set;
    let series = &set.series[si];
    let paths = b.paths;
    let who = recipients(paths, series, &from, &head)?;
    fs::create_dir_all(out)?;
    let git = Git::new(&paths.base);
    let base = b.base()?;
    let prefix = format!("--subject-prefix={}", series.full_prefix());
    let base_arg = format!("--base={base}");
    let range = format!("{from}..{head}");
    let out_s = out.to_string_lossy().into_owned();
    let single = series.patches.len() == 1;
    let mut args = vec![
        "format-patch",
        "--quiet",
        "--zero-commit",
        "--no-signature",
        "--no-attach",
    ];
    if single {
        args.push("--no-numbered");
    } else {
        args.extend(["--cover-letter", "--numbered"]);
    }
    args.extend([
        "--no-thread",
        "--no-renames",
        &prefix,
        &base_arg,
        "-o",
        &out_s,
    ]);
    let to: Vec<String> = who.to.iter().map(|a| format!("--to={a}")).collect();
    let cc: Vec<String> = who.cc.iter().map(|a| format!("--cc={a}")).collect();
    args.extend(to.iter().map(String::as_str));
    args.extend(cc.iter().map(String::as_str));
    args.push(&range);
    git.run(&args)?;
    let mut files: Vec<PathBuf> = fs::read_dir(out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "patch"))
        .collect();
    files.sort();

    let blurb = fs::read_to_string(paths.repo.join(&series.cover))
        .map_err(|e| Error(format!("{}: {e}", series.cover.display())))?;
    let blurb = format!("{}\n\n{}", blurb.trim_end(), set.manifest.disclosure.trim());
    let (cover, text) = if single {
        let patch = files
            .first()
            .ok_or_else(|| Error("format-patch wrote no patch".into()))?;
        (patch, fill_notes(&fs::read_to_string(patch)?, &blurb)?)
    } else {
        let cover = files
            .iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("0000-"))
            })
            .ok_or_else(|| Error("format-patch wrote no cover letter".into()))?;
        let text = fs::read_to_string(cover)?;
        (
            cover,
            fill_cover(&text, &series.subject, &blurb, &set.manifest.date)?,
        )
    };
    let prereqs: Vec<String> = set
        .prerequisites(si)
        .into_iter()
        .map(|k| {
            let p = &set.series[k];
            format!("{}:v{}", p.change_id, p.version.unwrap_or(1))
        })
        .collect();
    let public = match &set.manifest.base.commit {
        Some(c) => format!("base-commit: {c}"),
        None => format!("base: {}", set.manifest.base.name),
    };
    let text = fill_base(&text, &base, &public, &series.change_id, &prereqs)?;
    fs::write(cover, text)?;
    Ok(files)
}

/// Names the public base (`public`: the whole line) instead of the local
/// commit that stands for it, and adds b4's change-id lines after git's
/// base-commit and prerequisite-patch-id lines.
fn fill_base(
    text: &str,
    local: &str,
    public: &str,
    change_id: &str,
    prereqs: &[String],
) -> Result<String> {
    let old = format!("base-commit: {local}\n");
    if !text.contains(&old) {
        bail!("format-patch wrote no base-commit line");
    }
    let mut tail = format!("{public}\n");
    let start = text.find(&old).expect("checked");
    let rest = &text[start + old.len()..];
    let ids_end = rest
        .lines()
        .take_while(|l| l.starts_with("prerequisite-patch-id: "))
        .map(|l| l.len() + 1)
        .sum::<usize>();
    tail.push_str(&rest[..ids_end]);
    tail.push_str(&format!("change-id: {change_id}\n"));
    for p in prereqs {
        tail.push_str(&format!("prerequisite-change-id: {p}\n"));
    }
    Ok(format!("{}{tail}{}", &text[..start], &rest[ids_end..]))
}

/// Puts `notes` after the `---` line of a patch, before its diffstat: the
/// place for what a cover letter would say, which `git am` leaves out of
/// the commit.
fn fill_notes(text: &str, notes: &str) -> Result<String> {
    let Some(at) = text.find("\n---\n") else {
        bail!("format-patch wrote a patch without a --- line");
    };
    let at = at + "\n---\n".len();
    Ok(format!(
        "{}{}\n\n{}",
        &text[..at],
        notes.trim_end(),
        &text[at..]
    ))
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

/// Regenerates `patches/<series>/` for every series; returns the number of
/// files written.
/// Whether an email address is a placeholder (the reserved `.example`
/// domain, RFC 2606), which no patch that is sent may name.
fn is_placeholder(email: &str) -> bool {
    email.trim().trim_end_matches('>').ends_with(".example")
}

/// Whether a line names a placeholder address (`<...example>`).
fn placeholder_in(line: &str) -> bool {
    line.split('<')
        .skip(1)
        .filter_map(|s| s.split_once('>').map(|(e, _)| e))
        .any(is_placeholder)
}

/// A temporary file with `text`, removed when dropped.
/// Whether a unified diff changes `path` (a `diff --git a/PATH b/PATH`
/// header, or a `+++ b/PATH` / `--- a/PATH` line).
fn diff_touches(diff: &str, path: &str) -> bool {
    diff.lines().any(|l| {
        l.strip_prefix("+++ b/")
            .or_else(|| l.strip_prefix("--- a/"))
            == Some(path)
            || l.strip_prefix("diff --git a/")
                .and_then(|r| r.split_once(" b/"))
                .is_some_and(|(a, b)| a == path || b == path)
    })
}

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

fn tempfile_with(text: &str) -> Result<TempFile> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "rvram-series-{}-{}.diff",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    fs::write(&path, text)?;
    Ok(TempFile(path))
}

/// What a submitter must do before sending series exported without a
/// public base commit (`base-commit:`), one step a line.
pub fn before_sending(paths: &Paths) -> Result<Option<Vec<String>>> {
    let set = paths.load()?;
    if set.manifest.base.commit.is_some() {
        return Ok(None);
    }
    Ok(Some(vec![
        format!(
            "the series are made on {}, a tree with no public commit id",
            set.manifest.base.name
        ),
        "rebase each series on the tree its cover letter sends it to (mm, rdma, pci, \
         dma-buf, rust), in the order of series/series.toml"
            .into(),
        "build and test the result there (make check with KDIR at that tree)".into(),
        "set [base] commit in series/series.toml to that tree's commit, verified with \
         git cat-file -e, and export again: the cover letters then carry base-commit: \
         (or pass --base to git format-patch / b4 prep)"
            .into(),
    ]))
}

pub fn export(paths: &Paths, who: &Identity) -> Result<usize> {
    let set = paths.load()?;
    let mut b = Builder::new(paths, &set, who)?;
    b.linear()?;
    let dir = paths.patches_dir();
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    let mut n = 0;
    for si in 0..set.series.len() {
        n += format_series(&mut b, si, &dir.join(&set.series[si].name))?.len();
    }
    Ok(n)
}

/// Checks that `patches/` is what `export` would write (unsigned); returns
/// the names of stale, missing or extra files.
pub fn check(paths: &Paths) -> Result<Vec<String>> {
    let set = paths.load()?;
    let mut b = Builder::new(paths, &set, &Identity::default())?;
    b.linear()?;
    let tmp = std::env::temp_dir().join(format!("rvram-series-check-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let mut stale = Vec::new();
    let mut result = Ok(());
    for si in 0..set.series.len() {
        let name = &set.series[si].name;
        match format_series(&mut b, si, &tmp.join(name))
            .and_then(|files| compare(&files, &paths.patches_dir().join(name)))
        {
            Ok(s) => stale.extend(s.into_iter().map(|f| format!("{name}/{f}"))),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let _ = fs::remove_dir_all(&tmp);
    result?;
    if let Ok(rd) = fs::read_dir(paths.patches_dir()) {
        for e in rd {
            let name = e?.file_name().to_string_lossy().into_owned();
            if !set.series.iter().any(|s| s.name == name) {
                stale.push(format!("{name} (extra)"));
            }
        }
    }
    stale.sort();
    Ok(stale)
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
            if !names.contains(&name) {
                stale.push(format!("{} (extra)", name.to_string_lossy()));
            }
        }
    }
    Ok(stale)
}

/// The recipients of every series, computed as `export` writes them.
pub fn cc(paths: &Paths) -> Result<Vec<(String, Recipients)>> {
    let set = paths.load()?;
    let mut b = Builder::new(paths, &set, &Identity::default())?;
    let mut all = Vec::new();
    for si in 0..set.series.len() {
        let (from, commits) = b.posted(si)?;
        let head = commits.last().expect("validated: patches");
        let s = &set.series[si];
        all.push((s.name.clone(), recipients(paths, s, &from, head)?));
    }
    Ok(all)
}

/// Applies `patches/<series>/` of every series, in order, to the base with
/// `git apply` (a private index, no work tree), making one commit per patch;
/// returns the commit ids in order.
pub fn apply(paths: &Paths) -> Result<Vec<String>> {
    let set = paths.load()?;
    let mut files = Vec::new();
    for s in &set.series {
        let dir = paths.patches_dir().join(&s.name);
        let mut these: Vec<PathBuf> = fs::read_dir(&dir)
            .map_err(|e| Error(format!("{}: {e} (run `make series`)", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension().is_some_and(|e| e == "patch")
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("0000-"))
            })
            .collect();
        these.sort();
        if these.is_empty() {
            bail!("no patches in {}", dir.display());
        }
        files.extend(these);
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
            .strip_prefix(paths.patches_dir())
            .unwrap_or(f)
            .to_string_lossy()
            .into_owned();
        // Series for different trees are each made on their own
        // prerequisites, so where two of them add neighbouring lines (the
        // includes of rust/bindings/bindings_helper.h) one's context is not
        // the other's tree: merge it in as the maintainer who merges the
        // two trees would, with the preimage its index line names.
        if let Err(plain) = git.run(&["apply", "--cached", &f.to_string_lossy()]) {
            git.run(&["apply", "--cached", "--3way", &f.to_string_lossy()])
                .map_err(|e| Error(format!("{name} does not apply: {plain}; merged: {e}")))?;
            eprintln!("rvram-series: {name}: applied with a 3-way merge");
        }
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

/// `[PATCH 2/5] mm/hmm: foo` -> `mm/hmm: foo`, `[RFC PATCH v3 1/3] x: y` ->
/// `x: y`.
fn strip_patch_prefix(subject: &str) -> &str {
    match subject.strip_prefix('[').and_then(|s| s.split_once("] ")) {
        Some((tag, rest)) if tag.starts_with("PATCH") || tag.starts_with("RFC PATCH") => rest,
        _ => subject,
    }
}

#[cfg(test)]
mod tests;
