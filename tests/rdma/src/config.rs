// SPDX-License-Identifier: GPL-2.0
//! Run configuration and its command line.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sideway::ibverbs::device_context::Mtu;

/// The CPU page size the test cases are laid out around.
pub const PAGE_SIZE: usize = 4096;

/// An RDMA path MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathMtu {
    /// 256 bytes.
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl PathMtu {
    /// Every path MTU, smallest first.
    pub const ALL: [PathMtu; 5] = [
        PathMtu::Mtu256,
        PathMtu::Mtu512,
        PathMtu::Mtu1024,
        PathMtu::Mtu2048,
        PathMtu::Mtu4096,
    ];

    /// The MTU in bytes.
    pub fn bytes(self) -> usize {
        match self {
            PathMtu::Mtu256 => 256,
            PathMtu::Mtu512 => 512,
            PathMtu::Mtu1024 => 1024,
            PathMtu::Mtu2048 => 2048,
            PathMtu::Mtu4096 => 4096,
        }
    }

    /// The MTU as sideway's QP attribute value.
    pub fn to_sideway(self) -> Mtu {
        match self {
            PathMtu::Mtu256 => Mtu::Mtu256,
            PathMtu::Mtu512 => Mtu::Mtu512,
            PathMtu::Mtu1024 => Mtu::Mtu1024,
            PathMtu::Mtu2048 => Mtu::Mtu2048,
            PathMtu::Mtu4096 => Mtu::Mtu4096,
        }
    }
}

impl fmt::Display for PathMtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bytes())
    }
}

impl FromStr for PathMtu {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PathMtu::ALL
            .into_iter()
            .find(|mtu| mtu.bytes().to_string() == s)
            .ok_or_else(|| format!("invalid MTU {s:?}: expected 256, 512, 1024, 2048 or 4096"))
    }
}

/// What VRAM mode expects rxe to do with target pages that are in VRAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expect {
    /// Access them through their P2P alias: rvram's `alias_grants` rises,
    /// `migrated_to_ram` stays flat and the pages stay in VRAM
    /// (the GPU's `p2p_alias` switch on).
    Alias,
    /// Migrate them back to system RAM first: `migrated_to_ram` rises and
    /// `alias_grants` stays flat (the GPU's `p2p_alias` switch off).
    Migrate,
    /// The GPU's VRAM is device-coherent (the GPU is bound to the driver
    /// `rvram-coherent`): rxe maps the pages like system memory, so
    /// neither counter moves and the pages stay in VRAM.
    Coherent,
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expect::Alias => "alias",
            Expect::Migrate => "migrate",
            Expect::Coherent => "coherent",
        })
    }
}

impl FromStr for Expect {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "alias" => Ok(Expect::Alias),
            "migrate" => Ok(Expect::Migrate),
            "coherent" => Ok(Expect::Coherent),
            _ => Err(format!(
                "invalid --expect {s:?}: expected alias, migrate or coherent"
            )),
        }
    }
}

/// VRAM mode: the target is moved into an rvram GPU's VRAM before the RDMA
/// operations of every case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VramMode {
    /// The GPU's character device, `/dev/rvramN`.
    pub device: PathBuf,
    /// What rxe must do with pages in VRAM.
    pub expect: Expect,
}

/// How a benchmark target is backed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pages {
    /// 4 KiB pages (`MADV_NOHUGEPAGE`).
    Small,
    /// Transparent huge pages: PMD-aligned, `MADV_HUGEPAGE`, so that the
    /// CPU's writes make 2 MiB folios and MIGRATE_TO_DEV 2 MiB device
    /// folios.
    Huge,
}

impl Pages {
    /// Every kind, in report order.
    pub const ALL: [Pages; 2] = [Pages::Small, Pages::Huge];

    /// The name used on the command line and in metric names.
    pub fn key(self) -> &'static str {
        match self {
            Pages::Small => "4k",
            Pages::Huge => "thp",
        }
    }
}

impl fmt::Display for Pages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

impl FromStr for Pages {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Pages::ALL
            .into_iter()
            .find(|p| p.key() == s)
            .ok_or_else(|| format!("invalid page kind {s:?}: expected 4k or thp"))
    }
}

/// Largest benchmark target.
pub const BENCH_MAX_SIZE: usize = 1 << 30;

/// The benchmark of what P2P aliases save ([`crate::bench`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bench {
    /// Skip the test suite, run only the benchmark.
    pub only: bool,
    /// Also write the results as markdown tables here.
    pub out: Option<PathBuf>,
    /// Target sizes, smallest first.
    pub sizes: Vec<usize>,
    /// Page kinds of the targets.
    pub pages: Vec<Pages>,
    /// Timed repetitions of each bandwidth transfer (0: no bandwidth part).
    pub reps: usize,
    /// Rounds of the fault path per target size and page kind, each over
    /// every placement, in alternating order; tables give the medians.
    pub rounds: usize,
    /// A second GPU (`/dev/rvramN`) that reads the target in the first
    /// GPU's VRAM, with and without aliases.
    pub peer: Option<PathBuf>,
}

impl Default for Bench {
    fn default() -> Self {
        Self {
            only: false,
            out: None,
            sizes: vec![4 << 20, 64 << 20],
            pages: Pages::ALL.to_vec(),
            reps: 8,
            rounds: 9,
            peer: None,
        }
    }
}

/// Everything a run needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// RDMA device name, e.g. `rxe0`.
    pub device: String,
    /// Port number on the device.
    pub port: u8,
    /// Source (and, as both QPs are on one port, destination) GID index.
    pub gid_index: u8,
    /// The path MTUs to run the suite at, each with fresh QPs.
    pub mtus: Vec<PathMtu>,
    /// Size of the target buffer the binary allocates; callers of
    /// [`run_suite`](crate::run_suite) bring their own buffer instead.
    pub size: usize,
    /// Register the target with `IBV_ACCESS_ON_DEMAND`.
    pub odp: bool,
    /// Check the target through the CPU after RDMA WRITE and SEND, and the
    /// bytes around each written range. Off, the target is only read back by
    /// RDMA READ (and the CPU does not fault pages back between WRITE and
    /// READ).
    pub cpu_check: bool,
    /// Bytes on each side of a written range that must keep the background
    /// pattern.
    pub guard: usize,
    /// How long to wait for one work completion before failing the case.
    pub timeout: Duration,
    /// VRAM mode, if asked for.
    pub vram: Option<VramMode>,
    /// The benchmark, if asked for.
    pub bench: Option<Bench>,
    /// `--demo`: run the demo ([`crate::demo`]) instead of the suite.
    pub demo: bool,
    /// `--unbind PCI_ADDR`: instead of the suite, unbind the GPU at this
    /// address during RDMA traffic ([`crate::unbind`]).
    pub unbind: Option<String>,
    /// `--rmmod`: with `--unbind`, remove the module instead of unbinding
    /// the GPU, with every `/dev/rvramN` file of the process closed.
    pub rmmod: bool,
    /// `--dmabuf`: instead of the suite, RDMA to and from a VRAM buffer
    /// object of the `--vram` GPU registered as a dma-buf MR
    /// ([`crate::dmabuf`]); with `--unbind`, unbind the GPU under it last.
    pub dmabuf: bool,
    /// `--advise`: instead of the suite, `ibv_advise_mr()` prefetch on ODP,
    /// pinned and foreign MRs and with bad arguments, every errno exact
    /// ([`crate::prefetch`]).
    pub advise: bool,
    /// `--fuzz OPS`: instead of the suite, OPS random operations while the
    /// memory moves ([`crate::fuzz`]).
    pub fuzz: Option<usize>,
    /// `--seed N`: the fuzz's seed (default: from the clock, printed).
    pub seed: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            device: "rxe0".to_owned(),
            port: 1,
            gid_index: 1,
            mtus: vec![PathMtu::Mtu1024, PathMtu::Mtu4096],
            size: 4 << 20,
            odp: true,
            cpu_check: true,
            guard: PAGE_SIZE,
            timeout: Duration::from_secs(10),
            vram: None,
            bench: None,
            demo: false,
            unbind: None,
            rmmod: false,
            dmabuf: false,
            advise: false,
            fuzz: None,
            seed: None,
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the suite (boxed: a [`Config`] is large next to [`Command::Help`]).
    Run(Box<Config>),
    /// Print [`USAGE`] and exit.
    Help,
}

/// The `--help` text.
pub const USAGE: &str = "\
usage: rvram-rdma-test [OPTIONS]

RDMA WRITE/READ, SEND/RECV and atomics between two RC QPs of one device,
against a target buffer registered as an on-demand-paging MR. TAP 13 on
stdout; exit 0 if all pass, 1 if a case fails, 2 on a setup error.

options:
  --device NAME      RDMA device (default rxe0)
  --port N           device port (default 1)
  --gid-index N      GID index, RoCE v2 for rxe (default 1)
  --mtu MTU          path MTU: 256, 512, 1024, 2048 or 4096; repeat for
                     several (default: 1024 and 4096)
  --size BYTES       target buffer size, K/M/G suffixes allowed (default 4M)
  --no-odp           register the target without IBV_ACCESS_ON_DEMAND
  --no-cpu-check     verify the target by RDMA READ only, not by the CPU
  --guard BYTES      bytes checked untouched on each side (default 4096)
  --timeout SECS     wait for a completion at most this long (default 10)
  --vram /dev/rvramN VRAM mode: before the RDMA operations of each case,
                     migrate the whole target into this rvram GPU's VRAM
                     (HMM_DMIRROR_MIGRATE_TO_DEV), and check what rxe did with
                     it through /sys/kernel/debug/rvram/rvramN/stats and a
                     SNAPSHOT of the target taken before the CPU checks; one
                     extra TAP point per case. Needs ODP and a --size that is
                     a multiple of 4096
  --expect MODE      with --vram: what rxe must do with pages in VRAM:
                     alias   (default) access them through their P2P alias:
                             migrated_to_ram flat, alias_grants up, the pages
                             the case touched still in VRAM
                     migrate move them to RAM first: migrated_to_ram up,
                             alias_grants flat
                     coherent the GPU's VRAM is device-coherent: rxe maps
                             the pages as they are, both counters flat,
                             the touched pages still in VRAM
  --bench            with --vram, after the suite: what P2P aliases save, at
                     MTU 4096, for each size x page kind, with the target in
                     system RAM, in VRAM with aliases (p2p_alias on) and in
                     VRAM with migration (p2p_alias off: the bench sets the
                     switch of every device-private GPU in rvram's debugfs
                     and restores it): the NIC's fault path
                     alone (a synchronous ODP prefetch of the whole MR), the
                     NIC-writes-then-GPU-uses pipeline, with --peer a second
                     GPU reading the target, and RDMA bandwidth. TAP points
                     assert counters and data, never times; values as
                     `# bench NAME VALUE UNIT` lines
  --bench-only       --bench without the suite
  --bench-out FILE   also write the bench results to FILE as markdown tables
                     (implies --bench)
  --bench-sizes LIST target sizes, comma separated, K/M/G suffixes
                     (default 4M,64M; implies --bench)
  --bench-pages LIST page kinds: 4k, thp or 4k,thp (default; implies --bench)
  --bench-reps N     timed repetitions per bandwidth transfer, 0 for none
                     (default 8; implies --bench)
  --bench-rounds N   rounds of the NIC fault path per target, each over every
                     placement, in alternating order; the tables give the
                     medians (default 9, at least 1; implies --bench)
  --peer /dev/rvramN with --bench: a second GPU reads the target in --vram's
                     VRAM (HMM_DMIRROR_READ) with and without P2P aliases
                     (smallest size)
  --demo             with --vram: instead of the suite, tell the story: a
                     buffer moved into VRAM, written by the NIC through an
                     ODP MR, where its pages are afterwards, then what the
                     alias saves against migration (p2p_alias off), in
                     pages, bytes and the bench's fault-path and pipeline
                     measurements
  --unbind PCI_ADDR  with --vram: instead of the suite, unbind the GPU at
                     PCI_ADDR (the one behind --vram) through sysfs while
                     RDMA WRITEs and READs run against its VRAM, check every
                     byte, then bind it again (at the first --mtu)
  --rmmod            with --unbind: close the --vram file and remove the
                     rvram module (rmmod) instead, with the NIC's
                     asynchronous prefetches in flight; the GPU stays
                     unbound, for the caller to load the module again
  --dmabuf           with --vram: instead of the suite, register a VRAM
                     buffer object of that GPU as a dma-buf MR
                     (ibv_reg_dmabuf_mr) and RDMA WRITE and READ it at each
                     --mtu, every byte checked through a CPU mapping too;
                     with --unbind, then unbind the GPU under the live MR
  --advise           instead of the suite, ibv_advise_mr() prefetch
                     (every advice, async and FLUSH) of an ODP MR, which
                     must succeed, and of a pinned MR, bad lkeys, ranges
                     past the MR, no SGE, unknown advice and flags, each
                     with its exact errno; then deregister an ODP MR under
                     queued prefetches and use the device again (at the
                     first --mtu). --dmabuf runs the dma-buf MR's cases
                     WRITEs and READs (stable pages, pages a second thread
                     unmaps and protects, outside the MR, bad rkeys) while
                     the target moves between VRAM and RAM (at the first
                     --mtu); every completion status and byte is checked
  --seed N           the --fuzz seed (default: from the clock; printed)
  -h, --help         this text
";

/// Parses the command line, without the program name.
pub fn parse_args<I>(args: I) -> Result<Command, String>
where
    I: IntoIterator,
    I::Item: Into<String>,
{
    let mut cfg = Config::default();
    let mut mtus = Vec::new();
    let mut vram: Option<PathBuf> = None;
    let mut expect: Option<Expect> = None;
    let mut bench: Option<Bench> = None;
    let mut peer: Option<PathBuf> = None;
    let mut args = args.into_iter().map(Into::into);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--device" => cfg.device = value()?,
            "--port" => cfg.port = parse_int(&flag, &value()?)?,
            "--gid-index" => cfg.gid_index = parse_int(&flag, &value()?)?,
            "--mtu" => {
                let mtu: PathMtu = value()?.parse()?;
                if !mtus.contains(&mtu) {
                    mtus.push(mtu);
                }
            }
            "--size" => cfg.size = parse_size(&flag, &value()?)?,
            "--no-odp" => cfg.odp = false,
            "--no-cpu-check" => cfg.cpu_check = false,
            "--guard" => cfg.guard = parse_size(&flag, &value()?)?,
            "--timeout" => {
                let secs: u64 = parse_int(&flag, &value()?)?;
                if secs == 0 {
                    return Err(format!("{flag} must be at least 1"));
                }
                cfg.timeout = Duration::from_secs(secs);
            }
            "--vram" => {
                let path = value()?;
                if path.is_empty() {
                    return Err("--vram must not be empty".to_owned());
                }
                vram = Some(PathBuf::from(path));
            }
            "--expect" => expect = Some(value()?.parse()?),
            "--demo" => cfg.demo = true,
            "--dmabuf" => cfg.dmabuf = true,
            "--advise" => cfg.advise = true,
            "--rmmod" => cfg.rmmod = true,
            "--unbind" => {
                let addr = value()?;
                if addr.is_empty() || addr.contains('/') {
                    return Err(format!("--unbind: invalid PCI address {addr:?}"));
                }
                cfg.unbind = Some(addr);
            }
            "--fuzz" => {
                let ops: usize = parse_int(&flag, &value()?)?;
                if ops == 0 {
                    return Err(format!("{flag} must be at least 1"));
                }
                cfg.fuzz = Some(ops);
            }
            "--seed" => cfg.seed = Some(parse_int(&flag, &value()?)?),
            "--bench" => {
                bench.get_or_insert_with(Bench::default);
            }
            "--bench-only" => bench.get_or_insert_with(Bench::default).only = true,
            "--bench-out" => {
                let path = value()?;
                if path.is_empty() {
                    return Err("--bench-out must not be empty".to_owned());
                }
                bench.get_or_insert_with(Bench::default).out = Some(PathBuf::from(path));
            }
            "--bench-sizes" => {
                bench.get_or_insert_with(Bench::default).sizes = parse_sizes(&flag, &value()?)?;
            }
            "--bench-pages" => {
                let mut pages = Vec::new();
                for word in value()?.split(',') {
                    let kind: Pages = word.trim().parse()?;
                    if !pages.contains(&kind) {
                        pages.push(kind);
                    }
                }
                bench.get_or_insert_with(Bench::default).pages = pages;
            }
            "--bench-reps" => {
                bench.get_or_insert_with(Bench::default).reps = parse_int(&flag, &value()?)?;
            }
            "--bench-rounds" => {
                let rounds = parse_int(&flag, &value()?)?;
                if rounds == 0 {
                    return Err("--bench-rounds must be at least 1".to_owned());
                }
                bench.get_or_insert_with(Bench::default).rounds = rounds;
            }
            "--peer" => {
                let path = value()?;
                if path.is_empty() {
                    return Err("--peer must not be empty".to_owned());
                }
                peer = Some(PathBuf::from(path));
            }
            _ => return Err(format!("unknown argument {flag:?}")),
        }
        if inline.is_some()
            && matches!(
                flag.as_str(),
                "--no-odp"
                    | "--no-cpu-check"
                    | "--bench"
                    | "--bench-only"
                    | "--demo"
                    | "--dmabuf"
                    | "--advise"
            )
        {
            return Err(format!("{flag} takes no value"));
        }
    }
    match (&mut bench, peer) {
        (Some(bench), peer) => bench.peer = peer,
        (None, Some(_)) => return Err("--peer needs --bench".to_owned()),
        (None, None) => {}
    }
    cfg.bench = bench;
    cfg.vram = match (vram, expect) {
        (Some(device), expect) => Some(VramMode {
            device,
            expect: expect.unwrap_or(Expect::Alias),
        }),
        (None, Some(_)) => return Err("--expect needs --vram".to_owned()),
        (None, None) if cfg.demo => return Err("--demo needs --vram".to_owned()),
        (None, None) if cfg.unbind.is_some() => return Err("--unbind needs --vram".to_owned()),
        (None, None) if cfg.dmabuf => return Err("--dmabuf needs --vram".to_owned()),
        (None, None) if cfg.fuzz.is_some() => return Err("--fuzz needs --vram".to_owned()),
        (None, None) => None,
    };
    if cfg.rmmod && (cfg.unbind.is_none() || cfg.dmabuf) {
        return Err("--rmmod needs --unbind, without --dmabuf".to_owned());
    }
    if cfg.vram.is_some() {
        if !cfg.odp {
            return Err(
                "--vram needs an ODP target: pinned pages cannot migrate into VRAM".to_owned(),
            );
        }
        if !cfg.size.is_multiple_of(PAGE_SIZE) {
            return Err(format!(
                "--size must be a multiple of {PAGE_SIZE} with --vram (whole pages migrate)"
            ));
        }
    }
    if let Some(bench) = &cfg.bench {
        let Some(vram) = &cfg.vram else {
            return Err(
                "--bench needs --vram /dev/rvramN: the target is measured in its VRAM".to_owned(),
            );
        };
        if bench.peer.as_ref() == Some(&vram.device) {
            return Err("--peer must be another GPU than --vram".to_owned());
        }
        if bench.pages.is_empty() || bench.sizes.is_empty() {
            return Err("--bench-sizes and --bench-pages must not be empty".to_owned());
        }
    }
    if !mtus.is_empty() {
        cfg.mtus = mtus;
    }
    if cfg.size < PAGE_SIZE {
        return Err(format!("--size must be at least {PAGE_SIZE}"));
    }
    if cfg.device.is_empty() {
        return Err("--device must not be empty".to_owned());
    }
    Ok(Command::Run(Box::new(cfg)))
}

/// Parses a decimal integer option value.
fn parse_int<T: FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{flag}: invalid number {value:?}"))
}

/// Parses a comma-separated list of benchmark target sizes: whole pages,
/// at most [`BENCH_MAX_SIZE`]; returned smallest first, without repeats.
fn parse_sizes(flag: &str, value: &str) -> Result<Vec<usize>, String> {
    let mut sizes = Vec::new();
    for word in value.split(',') {
        let size = parse_size(flag, word.trim())?;
        if size == 0 || !size.is_multiple_of(PAGE_SIZE) || size > BENCH_MAX_SIZE {
            return Err(format!(
                "{flag}: {word:?} is not a whole number of {PAGE_SIZE}-byte pages \
                 between 4K and 1G"
            ));
        }
        sizes.push(size);
    }
    sizes.sort_unstable();
    sizes.dedup();
    Ok(sizes)
}

/// Parses a byte count with an optional binary `K`, `M` or `G` suffix.
fn parse_size(flag: &str, value: &str) -> Result<usize, String> {
    let (digits, shift) = match value.as_bytes().last() {
        Some(b'k' | b'K') => (&value[..value.len() - 1], 10),
        Some(b'm' | b'M') => (&value[..value.len() - 1], 20),
        Some(b'g' | b'G') => (&value[..value.len() - 1], 30),
        _ => (value, 0),
    };
    let n: usize = parse_int(flag, digits)?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{flag}: {value:?} is too large"))
}

#[cfg(test)]
mod tests;
