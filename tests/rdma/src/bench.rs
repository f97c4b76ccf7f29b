// SPDX-License-Identifier: GPL-2.0
//! What the P2P alias saves: RDMA with on-demand paging into GPU memory,
//! measured so that the savings are counted, not guessed from wall time.
//!
//! Every measurement runs with the target in one of three [`Placement`]s:
//! system RAM, an rvram GPU's VRAM with `ib_core.odp_p2p_alias=1` (the NIC
//! reaches the pages through their P2P alias), and the same VRAM with
//! `odp_p2p_alias=0` (Linux 7.3 as released: ODP faults migrate the pages
//! to RAM). The bench sets the parameter itself and restores it
//! ([`OdpAliasParam`]). For each target size and page kind ([`Pages`]):
//!
//! 1. **Fault path** ([`FaultPath`]): an ODP MR is registered over a fresh,
//!    still unpopulated mapping (so registration maps nothing), the CPU
//!    fills it with a pattern, the GPU moves it into VRAM (MIGRATE_TO_DEV,
//!    read-back and SNAPSHOT checked), and a synchronous prefetch of the
//!    whole MR ([`Device::prefetch_write`]) runs the NIC's fault path over
//!    every page without the packet path around it. rvram's counters
//!    around it say what moved; the time is the fault path's. An RDMA READ
//!    of the whole target then checks the data.
//! 2. **Pipeline** ([`Pipeline`]): what a GPU user runs. The target is put
//!    back in VRAM (in RAM for the RAM placement), the NIC RDMA WRITEs all
//!    of it with a new pattern, and the GPU consumes it with
//!    MIGRATE_TO_DEV, whose read-back must be the new pattern. With the
//!    alias no page moves; with migration each page leaves VRAM for the
//!    NIC and comes back for the GPU; from RAM the GPU pulls each page in.
//! 3. **GPU peer** ([`PeerRead`], with `--peer`): a second GPU reads the
//!    target in the first GPU's VRAM, through aliases and, from a file
//!    without the alias flag, by migration (smallest size only).
//! 4. **Bandwidth** ([`Bandwidth`]): steady RDMA WRITE and READ of the
//!    smallest target, after a warm-up; for completeness, not asserted.
//!
//! TAP points assert counters and data, never a time. The values are
//! `# bench NAME VALUE UNIT` lines (`NAME` is `PART_SIZE_PAGES_PLACEMENT_
//! METRIC`, e.g. `fault_4M_4k_alias_us_per_page`) and, with `--bench-out`,
//! markdown tables ([`BenchReport::markdown`]). Under QEMU TCG the times
//! measure the emulator as much as the kernel; the counted pages and bytes
//! are what carries over to hardware.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::config::{Config, Pages, PathMtu, PAGE_SIZE};
use crate::mmap::Mmap;
use crate::pattern::{self, Check};
use crate::report::{CaseKind, TestResult};
use crate::verbs::{self, Device, Endpoints, Expected, Queue, Region, SendOp, Side};
use crate::vram::{self, OdpAliasParam, StatsDelta, Vram};

/// The path MTU of every benchmark transfer.
pub const BENCH_MTU: PathMtu = PathMtu::Mtu4096;
/// Largest RDMA WRITE or READ the bench posts: transfers are split into
/// work requests of at most this many bytes, posted one at a time.
pub const RDMA_CHUNK: usize = 1 << 20;
/// PMD size: targets are aligned to it, so THP can back them.
pub const PMD_SIZE: usize = 2 << 20;

/// Where the target is while the NIC accesses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// System RAM.
    Ram,
    /// The GPU's VRAM, `odp_p2p_alias=1`: the NIC maps P2P aliases.
    Alias,
    /// The GPU's VRAM, `odp_p2p_alias=0`: ODP faults migrate the pages to
    /// RAM (Linux 7.3 as released).
    Migrate,
}

impl Placement {
    /// Every placement, in report order.
    pub const ALL: [Placement; 3] = [Placement::Ram, Placement::Alias, Placement::Migrate];

    /// The name in metric names: `ram`, `alias`, `migrate`.
    pub fn key(self) -> &'static str {
        match self {
            Placement::Ram => "ram",
            Placement::Alias => "alias",
            Placement::Migrate => "migrate",
        }
    }

    /// The name in tables.
    pub fn heading(self) -> &'static str {
        match self {
            Placement::Ram => "system RAM",
            Placement::Alias => "VRAM, P2P alias",
            Placement::Migrate => "VRAM, migration (7.3)",
        }
    }

    /// Whether the target is moved into VRAM first.
    pub fn in_vram(self) -> bool {
        self != Placement::Ram
    }

    /// The `odp_p2p_alias` value the placement runs with.
    pub fn odp_p2p_alias(self) -> bool {
        self != Placement::Migrate
    }
}

/// One benchmark configuration: target size, page kind, placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cell {
    /// Target bytes (whole pages).
    pub size: usize,
    /// Page kind of the target.
    pub pages: Pages,
    /// Where the target is.
    pub placement: Placement,
}

impl Cell {
    /// Pages of the target.
    pub fn npages(&self) -> usize {
        vram::pages(self.size)
    }

    /// Metric name prefix for `part`, e.g. `fault_4M_4k_alias`.
    pub fn key(&self, part: &str) -> String {
        format!(
            "{part}_{}_{}_{}",
            size_key(self.size),
            self.pages.key(),
            self.placement.key()
        )
    }

    /// Human-readable, e.g. `4 MiB 4k alias`.
    pub fn label(&self) -> String {
        format!(
            "{} {} {}",
            size_text(self.size),
            self.pages.key(),
            self.placement.key()
        )
    }
}

/// A size as written in metric names and on the command line: `4M`,
/// `512K`, or plain bytes.
pub fn size_key(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}M", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{}K", bytes >> 10)
    } else {
        bytes.to_string()
    }
}

/// A size for people: `4 MiB`, `512 KiB`, or bytes.
pub fn size_text(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// Milliseconds.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Microseconds per page of `d` over `pages`.
pub fn us_per_page(d: Duration, pages: usize) -> f64 {
    if pages == 0 {
        0.0
    } else {
        d.as_secs_f64() * 1e6 / pages as f64
    }
}

/// Megabytes (10^6 bytes) per second for `bytes` in `elapsed`.
pub fn mb_per_s(bytes: usize, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 / secs / 1e6
    } else {
        f64::INFINITY
    }
}

/// Bytes in MiB.
fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Copies between VRAM and system RAM per page of a target:
/// `(pages_to_ram + pages_to_vram) / pages`.
pub fn migrations_per_page(delta: &StatsDelta, pages: usize) -> f64 {
    if pages == 0 {
        0.0
    } else {
        delta.pages_copied() as f64 / pages as f64
    }
}

/// One `# bench NAME VALUE UNIT` value.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// Full name, e.g. `fault_4M_4k_alias_ms`.
    pub name: String,
    /// The value.
    pub value: f64,
    /// Decimal places printed.
    pub precision: usize,
    /// Unit, one word.
    pub unit: &'static str,
}

impl Metric {
    fn new(prefix: &str, metric: &str, value: f64, precision: usize, unit: &'static str) -> Self {
        Self {
            name: format!("{prefix}_{metric}"),
            value,
            precision,
            unit,
        }
    }

    /// The `bench NAME VALUE UNIT` line (without the `# `).
    pub fn line(&self) -> String {
        format!(
            "bench {} {:.*} {}",
            self.name, self.precision, self.value, self.unit
        )
    }
}

/// What every measurement reports: its TAP point's description and
/// verdict, and its `# bench` values.
pub trait Measurement {
    /// The TAP description.
    fn name(&self) -> String;
    /// The `# bench` values.
    fn metrics(&self) -> Vec<Metric>;
    /// What the counters must show, as failure lines (none: as expected).
    fn check(&self) -> Vec<String>;
    /// What the counters did, one line for the TAP point.
    fn note(&self) -> String;
}

/// Pushes a failure line unless `got == want`.
fn expect_eq(why: &mut Vec<String>, what: &str, got: i64, want: i64) {
    if got != want {
        why.push(format!("{what} {got:+}, want {want:+}"));
    }
}

/// Part 1: the NIC's fault path over a whole target in one placement.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPath {
    /// What was measured.
    pub cell: Cell,
    /// Time of the synchronous prefetch of the whole MR.
    pub elapsed: Duration,
    /// rvram's counters over the prefetch.
    pub delta: StatsDelta,
    /// rvram's counters over the RDMA READ that checked the data after it.
    pub read_delta: StatsDelta,
    /// Target pages in VRAM right after the prefetch.
    pub resident_after: usize,
    /// Target pages mapped by a PMD (2 MiB folios) before the prefetch.
    pub huge_before: usize,
}

impl FaultPath {
    /// Microseconds per page.
    pub fn us_per_page(&self) -> f64 {
        us_per_page(self.elapsed, self.cell.npages())
    }
}

impl Measurement for FaultPath {
    /// What the counters must show for the placement, as failure lines
    /// (none: as expected). Alias: no page to RAM, every page still in VRAM,
    /// aliases granted. Migration: every page to RAM, none left in VRAM, no
    /// alias. RAM: nothing moves. Every placement: the RDMA READ after the
    /// prefetch moves nothing (the prefetch mapped it all).
    fn check(&self) -> Vec<String> {
        let n = self.cell.npages() as i64;
        let d = &self.delta;
        let mut why = Vec::new();
        let resident = self.resident_after as i64;
        match self.cell.placement {
            Placement::Ram => {
                expect_eq(&mut why, "prefetch: pages_to_ram", d.pages_to_ram, 0);
                expect_eq(&mut why, "prefetch: pages_to_vram", d.pages_to_vram, 0);
                expect_eq(&mut why, "prefetch: alias_grants", d.alias_grants, 0);
                expect_eq(&mut why, "pages in VRAM after the prefetch:", resident, 0);
            }
            Placement::Alias => {
                expect_eq(&mut why, "prefetch: pages_to_ram", d.pages_to_ram, 0);
                if d.alias_grants <= 0 {
                    why.push(format!(
                        "prefetch: alias_grants {:+}, want an increase (the NIC mapped no alias)",
                        d.alias_grants
                    ));
                }
                expect_eq(&mut why, "pages in VRAM after the prefetch:", resident, n);
            }
            Placement::Migrate => {
                expect_eq(&mut why, "prefetch: pages_to_ram", d.pages_to_ram, n);
                expect_eq(&mut why, "prefetch: alias_grants", d.alias_grants, 0);
                expect_eq(&mut why, "pages in VRAM after the prefetch:", resident, 0);
            }
        }
        expect_eq(
            &mut why,
            "RDMA READ after the prefetch: pages copied",
            self.read_delta.pages_copied(),
            0,
        );
        why
    }

    /// The `# bench` values.
    fn metrics(&self) -> Vec<Metric> {
        let p = self.cell.key("fault");
        let d = &self.delta;
        let mut m = vec![
            Metric::new(&p, "ms", ms(self.elapsed), 3, "ms"),
            Metric::new(&p, "us_per_page", self.us_per_page(), 2, "us"),
            Metric::new(&p, "pages", self.cell.npages() as f64, 0, "pages"),
            Metric::new(&p, "pages_to_ram", d.pages_to_ram as f64, 0, "pages"),
            Metric::new(&p, "pages_to_vram", d.pages_to_vram as f64, 0, "pages"),
            Metric::new(&p, "mib_copied", mib(d.bytes_copied()), 2, "MiB"),
            Metric::new(&p, "migrated_to_ram", d.migrated_to_ram as f64, 0, "folios"),
            Metric::new(&p, "cpu_faults", d.cpu_faults as f64, 0, "faults"),
        ];
        if let Some(us) = d.us_per_fault() {
            m.push(Metric::new(&p, "kernel_us_per_fault", us, 2, "us"));
        }
        m.extend([
            Metric::new(&p, "alias_grants", d.alias_grants as f64, 0, "grants"),
            Metric::new(&p, "resident_after", self.resident_after as f64, 0, "pages"),
            Metric::new(&p, "huge_before", self.huge_before as f64, 0, "pages"),
        ]);
        m
    }

    /// The TAP description.
    fn name(&self) -> String {
        let what = match self.cell.placement {
            Placement::Ram => "nothing moves",
            Placement::Alias => "0 pages to RAM, every page still in VRAM",
            Placement::Migrate => "every page migrates to RAM",
        };
        format!(
            "bench {}: NIC fault path (ODP prefetch of the whole MR): {what}; data intact",
            self.cell.label()
        )
    }

    fn note(&self) -> String {
        let n = self.cell.npages();
        let mut note = format!(
            "prefetch {:.1} ms: {}; {} of {n} pages in VRAM after",
            ms(self.elapsed),
            self.delta.detail(),
            self.resident_after,
        );
        if self.cell.pages == Pages::Huge && self.huge_before < n {
            let _ = write!(
                note,
                "; only {} of {n} pages were in 2 MiB folios (THP not available?)",
                self.huge_before
            );
        }
        note
    }
}

/// Part 2: the NIC writes the target, then the GPU uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// What was measured.
    pub cell: Cell,
    /// The NIC's RDMA WRITE of the whole target.
    pub nic: Duration,
    /// The GPU's MIGRATE_TO_DEV of the whole target (checking its
    /// read-back is not included).
    pub gpu: Duration,
    /// Counters over the NIC's write.
    pub nic_delta: StatsDelta,
    /// Counters over the GPU's MIGRATE_TO_DEV.
    pub gpu_delta: StatsDelta,
    /// Target pages in VRAM at the end.
    pub resident_after: usize,
}

impl Pipeline {
    /// Counters over the whole pipeline.
    pub fn delta(&self) -> StatsDelta {
        let mut d = self.nic_delta;
        d += self.gpu_delta;
        d
    }

    /// NIC plus GPU time.
    pub fn total(&self) -> Duration {
        self.nic + self.gpu
    }

    /// Copies between VRAM and RAM per target page.
    pub fn migrations_per_page(&self) -> f64 {
        migrations_per_page(&self.delta(), self.cell.npages())
    }

    /// Pages each placement must copy `(to RAM, to VRAM)`, per target page:
    /// alias none; migration one out (the NIC's write faults it to RAM) and
    /// one back (the GPU pulls it in); RAM one in (the GPU pulls it in).
    pub fn expected_copies(placement: Placement) -> (i64, i64) {
        match placement {
            Placement::Ram => (0, 1),
            Placement::Alias => (0, 0),
            Placement::Migrate => (1, 1),
        }
    }
}

impl Measurement for Pipeline {
    /// What the counters must show, as failure lines.
    fn check(&self) -> Vec<String> {
        let n = self.cell.npages() as i64;
        let (to_ram, to_vram) = Self::expected_copies(self.cell.placement);
        let d = self.delta();
        let mut why = Vec::new();
        expect_eq(
            &mut why,
            "pipeline: pages_to_ram",
            d.pages_to_ram,
            to_ram * n,
        );
        expect_eq(
            &mut why,
            "pipeline: pages_to_vram",
            d.pages_to_vram,
            to_vram * n,
        );
        if self.cell.placement == Placement::Migrate {
            // The pages leave VRAM for the NIC, not for the GPU.
            expect_eq(
                &mut why,
                "NIC write: pages_to_ram",
                self.nic_delta.pages_to_ram,
                n,
            );
        }
        expect_eq(
            &mut why,
            "pages in VRAM after the GPU's MIGRATE_TO_DEV:",
            self.resident_after as i64,
            n,
        );
        why
    }

    /// The `# bench` values.
    fn metrics(&self) -> Vec<Metric> {
        let p = self.cell.key("pipeline");
        let d = self.delta();
        vec![
            Metric::new(&p, "nic_ms", ms(self.nic), 3, "ms"),
            Metric::new(&p, "gpu_ms", ms(self.gpu), 3, "ms"),
            Metric::new(&p, "total_ms", ms(self.total()), 3, "ms"),
            Metric::new(
                &p,
                "us_per_page",
                us_per_page(self.total(), self.cell.npages()),
                2,
                "us",
            ),
            Metric::new(&p, "pages", self.cell.npages() as f64, 0, "pages"),
            Metric::new(
                &p,
                "migrations_per_page",
                self.migrations_per_page(),
                2,
                "per_page",
            ),
            Metric::new(&p, "pages_to_ram", d.pages_to_ram as f64, 0, "pages"),
            Metric::new(&p, "pages_to_vram", d.pages_to_vram as f64, 0, "pages"),
            Metric::new(&p, "mib_copied", mib(d.bytes_copied()), 2, "MiB"),
            Metric::new(&p, "resident_after", self.resident_after as f64, 0, "pages"),
        ]
    }

    /// The TAP description.
    fn name(&self) -> String {
        let (to_ram, to_vram) = Self::expected_copies(self.cell.placement);
        let n = to_ram + to_vram;
        format!(
            "bench {}: NIC RDMA WRITE, then GPU MIGRATE_TO_DEV: {n} migration{} per page; data intact",
            self.cell.label(),
            if n == 1 { "" } else { "s" }
        )
    }

    fn note(&self) -> String {
        format!(
            "NIC write {:.1} ms ({}), GPU MIGRATE_TO_DEV {:.1} ms ({})",
            ms(self.nic),
            self.nic_delta.detail(),
            ms(self.gpu),
            self.gpu_delta.detail()
        )
    }
}

/// Part 3: a second GPU reads the target in the first one's VRAM.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerRead {
    /// Target size, page kind; the placement is [`Placement::Alias`] for
    /// the read through aliases, [`Placement::Migrate`] for the one
    /// without.
    pub cell: Cell,
    /// Owner and reader, e.g. `rvram0`, `rvram1`.
    pub gpus: (String, String),
    /// Time of the reader's HMM_DMIRROR_READ of the whole target.
    pub elapsed: Duration,
    /// The owner's counters over the read.
    pub owner: StatsDelta,
    /// The reader's counters over the read.
    pub reader: StatsDelta,
    /// Target pages in the owner's VRAM after the read.
    pub resident_after: usize,
}

impl PeerRead {
    /// Whether the reader asked for aliases.
    pub fn alias(&self) -> bool {
        self.cell.placement == Placement::Alias
    }
}

impl Measurement for PeerRead {
    /// What the counters must show, as failure lines. Through aliases: no
    /// page leaves the owner's VRAM, the owner grants aliases and the
    /// reader reads every page through one. Without: every page migrates
    /// to RAM, no alias.
    fn check(&self) -> Vec<String> {
        let n = self.cell.npages() as i64;
        let (owner, reader) = &self.gpus;
        let mut why = Vec::new();
        let resident = self.resident_after as i64;
        if self.alias() {
            expect_eq(
                &mut why,
                &format!("{owner} pages_to_ram"),
                self.owner.pages_to_ram,
                0,
            );
            if self.owner.alias_grants <= 0 {
                why.push(format!(
                    "{owner} alias_grants {:+}, want an increase",
                    self.owner.alias_grants
                ));
            }
            expect_eq(
                &mut why,
                &format!("{reader} alias_accesses"),
                self.reader.alias_accesses,
                n,
            );
            expect_eq(
                &mut why,
                &format!("pages in {owner}'s VRAM after the read:"),
                resident,
                n,
            );
        } else {
            expect_eq(
                &mut why,
                &format!("{owner} pages_to_ram"),
                self.owner.pages_to_ram,
                n,
            );
            expect_eq(
                &mut why,
                &format!("{owner} alias_grants"),
                self.owner.alias_grants,
                0,
            );
            expect_eq(
                &mut why,
                &format!("{reader} alias_accesses"),
                self.reader.alias_accesses,
                0,
            );
            expect_eq(
                &mut why,
                &format!("pages in {owner}'s VRAM after the read:"),
                resident,
                0,
            );
        }
        why
    }

    /// The `# bench` values.
    fn metrics(&self) -> Vec<Metric> {
        let p = self.cell.key("peer");
        let o = &self.owner;
        vec![
            Metric::new(&p, "ms", ms(self.elapsed), 3, "ms"),
            Metric::new(
                &p,
                "us_per_page",
                us_per_page(self.elapsed, self.cell.npages()),
                2,
                "us",
            ),
            Metric::new(&p, "pages", self.cell.npages() as f64, 0, "pages"),
            Metric::new(&p, "pages_to_ram", o.pages_to_ram as f64, 0, "pages"),
            Metric::new(&p, "mib_copied", mib(o.bytes_copied()), 2, "MiB"),
            Metric::new(&p, "alias_grants", o.alias_grants as f64, 0, "grants"),
            Metric::new(
                &p,
                "alias_accesses",
                self.reader.alias_accesses as f64,
                0,
                "pages",
            ),
            Metric::new(&p, "resident_after", self.resident_after as f64, 0, "pages"),
        ]
    }

    /// The TAP description.
    fn name(&self) -> String {
        let (owner, reader) = &self.gpus;
        format!(
            "bench peer {} {}: {reader} reads {owner}'s VRAM {}; data intact",
            size_text(self.cell.size),
            self.cell.pages,
            if self.alias() {
                "through P2P aliases: 0 pages to RAM"
            } else {
                "without aliases: every page migrates to RAM"
            }
        )
    }

    fn note(&self) -> String {
        format!(
            "{:.1} ms; {}: {}; {}: {}",
            ms(self.elapsed),
            self.gpus.0,
            self.owner.detail(),
            self.gpus.1,
            self.reader.detail()
        )
    }
}

/// Part 4: steady RDMA bandwidth.
#[derive(Debug, Clone, PartialEq)]
pub struct Bandwidth {
    /// What was measured.
    pub cell: Cell,
    /// Timed repetitions of each direction.
    pub reps: usize,
    /// Total time of the timed RDMA WRITEs.
    pub write: Duration,
    /// Total time of the timed RDMA READs.
    pub read: Duration,
    /// Counters over the warm-up and the timed transfers.
    pub delta: StatsDelta,
    /// Target pages in VRAM at the end.
    pub resident_after: usize,
}

impl Bandwidth {
    /// RDMA WRITE MB/s.
    pub fn write_mb_s(&self) -> f64 {
        mb_per_s(self.cell.size * self.reps, self.write)
    }

    /// RDMA READ MB/s.
    pub fn read_mb_s(&self) -> f64 {
        mb_per_s(self.cell.size * self.reps, self.read)
    }
}

impl Measurement for Bandwidth {
    /// The `# bench` values.
    fn metrics(&self) -> Vec<Metric> {
        let p = self.cell.key("bw");
        vec![
            Metric::new(&p, "write_mb_s", self.write_mb_s(), 1, "MB/s"),
            Metric::new(&p, "read_mb_s", self.read_mb_s(), 1, "MB/s"),
            Metric::new(&p, "pages", self.cell.npages() as f64, 0, "pages"),
            Metric::new(
                &p,
                "pages_to_ram",
                self.delta.pages_to_ram as f64,
                0,
                "pages",
            ),
            Metric::new(&p, "resident_after", self.resident_after as f64, 0, "pages"),
        ]
    }

    /// The TAP description.
    fn name(&self) -> String {
        format!(
            "bench bandwidth {} {}: {} RDMA WRITEs and READs after a warm-up (not asserted); data intact",
            size_text(self.cell.size),
            self.cell.placement.key(),
            self.reps
        )
    }

    /// Not asserted: bandwidth is a time.
    fn check(&self) -> Vec<String> {
        Vec::new()
    }

    fn note(&self) -> String {
        format!(
            "WRITE {:.1} MB/s, READ {:.1} MB/s; {}",
            self.write_mb_s(),
            self.read_mb_s(),
            self.delta.detail()
        )
    }
}

/// Everything a benchmark run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BenchReport {
    /// What the numbers were measured with, one line each.
    pub context: Vec<String>,
    /// Part 1.
    pub fault: Vec<FaultPath>,
    /// Part 2.
    pub pipeline: Vec<Pipeline>,
    /// Part 3.
    pub peer: Vec<PeerRead>,
    /// Part 4.
    pub bandwidth: Vec<Bandwidth>,
}

/// The note every table of results carries.
pub const TCG_NOTE: &str = "Times are wall time in a QEMU TCG guest: the emulated CPU, \
    Soft-RoCE's packet processing and the emulated BAR dominate them, so they compare code \
    paths on an emulator, not hardware. The counted pages and bytes are what transfers to \
    hardware: each page copied between VRAM and system RAM is a page's worth of copying and \
    of system RAM bandwidth that the P2P alias does not spend.";

/// `a / b` as `N.NNx`, or `-`.
fn ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".to_owned()
    }
}

/// `got/total`.
fn of(got: usize, total: usize) -> String {
    format!("{got}/{total}")
}

impl BenchReport {
    /// The TAP comment lines of the context (without the `# `).
    pub fn context_lines(&self) -> Vec<String> {
        self.context.iter().map(|c| format!("bench: {c}")).collect()
    }

    /// Every `bench NAME VALUE UNIT` line, in measurement order.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = self.context_lines();
        let metrics = self
            .fault
            .iter()
            .flat_map(FaultPath::metrics)
            .chain(self.pipeline.iter().flat_map(Pipeline::metrics))
            .chain(self.peer.iter().flat_map(PeerRead::metrics))
            .chain(self.bandwidth.iter().flat_map(Bandwidth::metrics));
        lines.extend(metrics.map(|m| m.line()));
        lines
    }

    /// The fault path of the alias placement of `cell`'s size and pages.
    fn fault_alias(&self, cell: &Cell) -> Option<&FaultPath> {
        self.fault.iter().find(|f| {
            f.cell.size == cell.size
                && f.cell.pages == cell.pages
                && f.cell.placement == Placement::Alias
        })
    }

    fn pipeline_alias(&self, cell: &Cell) -> Option<&Pipeline> {
        self.pipeline.iter().find(|p| {
            p.cell.size == cell.size
                && p.cell.pages == cell.pages
                && p.cell.placement == Placement::Alias
        })
    }

    fn peer_alias(&self, cell: &Cell) -> Option<&PeerRead> {
        self.peer
            .iter()
            .find(|p| p.cell.size == cell.size && p.cell.pages == cell.pages && p.alias())
    }

    /// The fault-path table.
    pub fn fault_table(&self) -> String {
        let mut out = String::from(
            "| target | pages | placement | ms | us/page | migration faults | kernel us/fault \
             | pages to RAM | folios to RAM | MiB copied VRAM<->RAM | alias grants \
             | in VRAM after | time / alias |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for f in &self.fault {
            let d = &f.delta;
            let vs = self
                .fault_alias(&f.cell)
                .map_or_else(|| "-".to_owned(), |a| ratio(ms(f.elapsed), ms(a.elapsed)));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} | {:.2} | {} | {} | {} | {} | {:.1} | {} | {} | {vs} |",
                size_text(f.cell.size),
                f.cell.pages,
                f.cell.placement.heading(),
                ms(f.elapsed),
                f.us_per_page(),
                d.cpu_faults,
                d.us_per_fault()
                    .map_or_else(|| "-".to_owned(), |us| format!("{us:.1}")),
                d.pages_to_ram,
                d.migrated_to_ram,
                mib(d.bytes_copied()),
                d.alias_grants,
                of(f.resident_after, f.cell.npages()),
            );
        }
        out
    }

    /// The pipeline table.
    pub fn pipeline_table(&self) -> String {
        let mut out = String::from(
            "| target | pages | placement | NIC RDMA WRITE ms | GPU MIGRATE_TO_DEV ms | total ms \
             | migrations/page | pages to RAM | pages to VRAM | MiB copied VRAM<->RAM \
             | in VRAM after | total / alias |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for p in &self.pipeline {
            let d = p.delta();
            let vs = self
                .pipeline_alias(&p.cell)
                .map_or_else(|| "-".to_owned(), |a| ratio(ms(p.total()), ms(a.total())));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {} | {} | {:.1} | {} | {vs} |",
                size_text(p.cell.size),
                p.cell.pages,
                p.cell.placement.heading(),
                ms(p.nic),
                ms(p.gpu),
                ms(p.total()),
                p.migrations_per_page(),
                d.pages_to_ram,
                d.pages_to_vram,
                mib(d.bytes_copied()),
                of(p.resident_after, p.cell.npages()),
            );
        }
        out
    }

    /// The GPU peer table.
    pub fn peer_table(&self) -> String {
        let mut out = String::from(
            "| target | pages | reader | ms | us/page | owner's pages to RAM \
             | MiB copied VRAM<->RAM | owner's alias grants | reader's alias accesses \
             | in owner's VRAM after | time / alias |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for p in &self.peer {
            let (owner, reader) = &p.gpus;
            let how = if p.alias() {
                format!("{reader}, through P2P aliases")
            } else {
                format!("{reader}, by migration (no alias flag)")
            };
            let vs = self
                .peer_alias(&p.cell)
                .map_or_else(|| "-".to_owned(), |a| ratio(ms(p.elapsed), ms(a.elapsed)));
            let _ = writeln!(
                out,
                "| {} in {owner} | {} | {how} | {:.1} | {:.2} | {} | {:.1} | {} | {} | {} | {vs} |",
                size_text(p.cell.size),
                p.cell.pages,
                ms(p.elapsed),
                us_per_page(p.elapsed, p.cell.npages()),
                p.owner.pages_to_ram,
                mib(p.owner.bytes_copied()),
                p.owner.alias_grants,
                p.reader.alias_accesses,
                of(p.resident_after, p.cell.npages()),
            );
        }
        out
    }

    /// The bandwidth table.
    pub fn bandwidth_table(&self) -> String {
        let mut out = String::from(
            "| target | placement | RDMA WRITE MB/s | RDMA READ MB/s | pages to RAM | in VRAM after |\n\
             |---|---|---:|---:|---:|---:|\n",
        );
        for b in &self.bandwidth {
            let _ = writeln!(
                out,
                "| {} {} | {} | {:.1} | {:.1} | {} | {} |",
                size_text(b.cell.size),
                b.cell.pages,
                b.cell.placement.heading(),
                b.write_mb_s(),
                b.read_mb_s(),
                b.delta.pages_to_ram,
                of(b.resident_after, b.cell.npages()),
            );
        }
        out
    }

    /// The whole report as markdown: context, the TCG note, and a table
    /// per part that was measured.
    pub fn markdown(&self) -> String {
        let mut out = String::from("# What the P2P alias saves: RDMA ODP into GPU memory\n\n");
        for c in &self.context {
            let _ = writeln!(out, "- {c}");
        }
        let _ = writeln!(out, "\n{TCG_NOTE}\n");
        let _ = writeln!(
            out,
            "Placements: *system RAM*: the target never leaves RAM; *VRAM, P2P alias*: in \
             the GPU's VRAM, `ib_core.odp_p2p_alias=1` (this series); *VRAM, migration \
             (7.3)*: in VRAM, `odp_p2p_alias=0`, ODP faults migrate pages to RAM as Linux \
             7.3 does. *MiB copied VRAM<->RAM* is (pages_to_ram + pages_to_vram) x 4 KiB: \
             data that crossed system RAM. *time / alias*: this row's time over the alias \
             row's of the same target.\n"
        );
        if !self.fault.is_empty() {
            let _ = writeln!(
                out,
                "## 1. The NIC's fault path\n\n\
                 An ODP MR over the target, registered before the target was populated (so \
                 registration maps nothing); the GPU moves the target into VRAM; then one \
                 synchronous prefetch of the whole MR (`ibv_advise_mr` PREFETCH_WRITE + FLUSH, \
                 256 KiB per SGE) runs the NIC's page faults without the packet path. \
                 *kernel us/fault* is rvram's own accounting (`fault_ns / cpu_faults`) of \
                 serving one fault by migration. An RDMA READ of the whole target then \
                 checks every byte.\n\n{}",
                self.fault_table()
            );
        }
        if !self.pipeline.is_empty() {
            let _ = writeln!(
                out,
                "## 2. The NIC writes, then the GPU uses the data\n\n\
                 The target is in VRAM (RAM placement: in RAM); the NIC RDMA WRITEs all of \
                 it (1 MiB per work request); then the GPU consumes it with \
                 HMM_DMIRROR_MIGRATE_TO_DEV, whose read-back is checked. With the alias no \
                 page moves (MIGRATE_TO_DEV finds every page in VRAM and only reads it \
                 back); with migration each page leaves VRAM for the NIC and comes back for \
                 the GPU; from RAM the GPU pulls each page in.\n\n{}",
                self.pipeline_table()
            );
        }
        if !self.peer.is_empty() {
            let _ = writeln!(
                out,
                "## 3. A GPU peer reads the target\n\n\
                 The target in the first GPU's VRAM; the second GPU reads all of it \
                 (HMM_DMIRROR_READ), first from a file with rvram's FLAG_ALIAS_DMA (through \
                 P2P aliases), then, with the target put back, from a file without it (the \
                 pages migrate to RAM). Data checked.\n\n{}",
                self.peer_table()
            );
        }
        if !self.bandwidth.is_empty() {
            let reps = self.bandwidth[0].reps;
            let _ = writeln!(
                out,
                "## 4. Steady RDMA bandwidth\n\n\
                 After one warm-up WRITE and READ of the whole target (which faults it in: \
                 with migration, it is in RAM from then on), {reps} timed RDMA WRITEs and \
                 READs of the whole target, 1 MiB per work request, at MTU 4096. Not \
                 asserted; data checked.\n\n{}",
                self.bandwidth_table()
            );
        }
        out
    }
}

/// A measurement with the data errors found along the way (wrong bytes:
/// failures of its TAP point), or why it could not be made.
pub type Measured<T> = Result<(T, Vec<String>), String>;

/// What the bench hands out as it goes: TAP results and comment lines.
#[derive(Debug, Clone, Copy)]
pub enum Emit<'a> {
    /// A TAP point.
    Result(&'a TestResult),
    /// A comment line (without the `# `).
    Comment(&'a str),
}

/// The device, QPs, local buffer and GPU the measurements share.
///
/// Open one with [`with_rig`].
pub struct Rig<'a> {
    cfg: &'a Config,
    dev: &'a Device,
    // Field order is drop order: QPs before the local MR.
    ep: Endpoints,
    local: Region<'a>,
    gpu: Vram,
    param: OdpAliasParam,
    next_wr_id: u64,
}

/// Which way an RDMA transfer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// RDMA WRITE from the local buffer into the target.
    Write,
    /// RDMA READ from the target into the local buffer.
    Read,
}

/// The name of a GPU's device file, e.g. `rvram0`.
fn gpu_name(device: &Path) -> String {
    device.file_name().map_or_else(
        || device.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Opens what the measurements need: `cfg.vram`'s GPU, `odp_p2p_alias`,
/// the RDMA device, a local buffer of `local_len` bytes and two QPs at
/// [`BENCH_MTU`]; runs `f` with it. The parameter is restored after `f`.
pub fn with_rig<T>(
    cfg: &Config,
    local_len: usize,
    f: impl FnOnce(&mut Rig<'_>) -> T,
) -> Result<T, String> {
    let vram_mode = cfg
        .vram
        .as_ref()
        .ok_or("the bench needs --vram /dev/rvramN")?;
    let gpu = Vram::open(&vram_mode.device)?;
    let param = OdpAliasParam::open()?;
    let dev = Device::open(cfg).map_err(|e| format!("open {}: {e}", cfg.device))?;
    let mut local_map = Mmap::anonymous(local_len)
        .map_err(|e| format!("map {local_len}-byte local buffer: {e}"))?;
    let local = dev
        .register(local_map.as_mut_slice(), verbs::local_access())
        .map_err(|e| format!("local MR: {e}"))?;
    let ep = dev
        .connect(BENCH_MTU)
        .map_err(|e| format!("connect QPs at MTU {BENCH_MTU}: {e}"))?;
    let mut rig = Rig {
        cfg,
        dev: &dev,
        ep,
        local,
        gpu,
        param,
        next_wr_id: 0,
    };
    Ok(f(&mut rig))
}

/// A fresh target: PMD aligned, advised for THP or against it.
fn new_target(size: usize, pages: Pages) -> Result<Mmap, String> {
    let target = Mmap::anonymous_aligned(size, PMD_SIZE)
        .map_err(|e| format!("map {size}-byte target: {e}"))?;
    let advice = match pages {
        Pages::Small => libc::MADV_NOHUGEPAGE,
        Pages::Huge => libc::MADV_HUGEPAGE,
    };
    target
        .advise(advice)
        .map_err(|e| format!("madvise({pages}) of the target: {e}"))?;
    Ok(target)
}

/// Counts the SNAPSHOT bytes of pages mapped by a PMD (in RAM or VRAM).
fn huge_mapped(snapshot: &[u8]) -> usize {
    snapshot
        .iter()
        .filter(|&&b| b != 0xff && b & vram::SNAP_PMD != 0)
        .count()
}

/// `check`'s description as a failure line, if it found wrong bytes.
fn data_error(errors: &mut Vec<String>, check: &Check, what: &str) {
    if let Some(line) = check.describe(what) {
        errors.push(line);
    }
}

impl Rig<'_> {
    /// The GPU the target goes into.
    pub fn gpu(&self) -> &Vram {
        &self.gpu
    }

    /// Sets `odp_p2p_alias` for `placement`.
    fn set_placement(&mut self, placement: Placement) -> Result<(), String> {
        self.param.set(placement.odp_p2p_alias())
    }

    /// Replaces the QPs with fresh ones (after a failed work request they
    /// may be in error); the old ones are destroyed, flushing anything
    /// posted.
    fn reconnect(&mut self) -> Result<(), String> {
        self.ep = self
            .dev
            .connect(BENCH_MTU)
            .map_err(|e| format!("reconnect QPs: {e}"))?;
        Ok(())
    }

    /// RDMA WRITEs or READs the first `len` bytes of `region` from or into
    /// the local buffer, [`RDMA_CHUNK`] bytes per work request, one at a
    /// time; returns the time from the first post to the last completion.
    fn transfer(&mut self, dir: Dir, region: &Region<'_>, len: usize) -> Result<Duration, String> {
        let start = Instant::now();
        let mut offset = 0;
        while offset < len {
            let n = (len - offset).min(RDMA_CHUNK);
            if let Err(err) = self.post_one(dir, region, offset, n) {
                // Destroy the QPs before the caller may drop the region.
                let reconnected = self.reconnect();
                return Err(match reconnected {
                    Ok(()) => err,
                    Err(again) => format!("{err}; {again}"),
                });
            }
            offset += n;
        }
        Ok(start.elapsed())
    }

    fn post_one(
        &mut self,
        dir: Dir,
        region: &Region<'_>,
        offset: usize,
        len: usize,
    ) -> Result<(), String> {
        self.next_wr_id += 1;
        let wr_id = self.next_wr_id;
        let remote = region.remote(offset, len).map_err(|e| e.to_string())?;
        let op = match dir {
            Dir::Write => SendOp::Write(remote),
            Dir::Read => SendOp::Read(remote),
        };
        let expected = Expected {
            op: op.name(),
            wr_id,
            opcode: op.completion_opcode(),
            byte_len: None,
        };
        let sge = self.local.sge(offset, len).map_err(|e| e.to_string())?;
        self.ep
            .post_send(Side::A, wr_id, op, sge)
            .map_err(|e| e.to_string())?;
        self.ep
            .wait_spin(Side::A, Queue::Send, &expected, self.cfg.timeout)
            .map_err(|e| format!("{e} ({len} bytes at target offset {offset:#x})"))?;
        Ok(())
    }

    /// MIGRATE_TO_DEV of all of `target` into the GPU, checking the
    /// device's read-back against `seed`; returns the time of the
    /// migration without the checking.
    fn timed_migrate(
        &mut self,
        target: &[u8],
        seed: u32,
        errors: &mut Vec<String>,
        what: &str,
    ) -> Result<Duration, String> {
        let mut readback = Check::default();
        let mut checking = Duration::ZERO;
        let start = Instant::now();
        self.gpu.migrate_to_dev(target, &mut |offset, bytes| {
            let t = Instant::now();
            readback.merge(pattern::check(bytes, offset, seed));
            checking += t.elapsed();
        })?;
        let elapsed = start.elapsed().saturating_sub(checking);
        data_error(errors, &readback, what);
        Ok(elapsed)
    }

    /// Puts all of `target` (holding `seed`'s pattern) into VRAM and checks
    /// it is all there. Returns the SNAPSHOT.
    fn place_in_vram(
        &mut self,
        target: &[u8],
        seed: u32,
        errors: &mut Vec<String>,
    ) -> Result<Vec<u8>, String> {
        self.timed_migrate(
            target,
            seed,
            errors,
            "device read-back after MIGRATE_TO_DEV (placing the target)",
        )?;
        let snapshot = self.gpu.snapshot(target)?;
        let n = vram::resident(&snapshot);
        if n != snapshot.len() {
            return Err(format!(
                "only {n} of {} target pages in VRAM after MIGRATE_TO_DEV",
                snapshot.len()
            ));
        }
        Ok(snapshot)
    }

    /// Parts 1 and 2 for `cell`: the fault path, then, on the same target
    /// and MR, the pipeline. Each outcome carries the data errors found.
    pub fn measure_cell(
        &mut self,
        cell: Cell,
        seed: u32,
    ) -> (Measured<FaultPath>, Measured<Pipeline>) {
        let mut target = match new_target(cell.size, cell.pages) {
            Ok(t) => t,
            Err(e) => return (Err(e.clone()), Err(format!("not run: {e}"))),
        };
        let dev = self.dev;
        // Registered before the CPU touches the target: ODP registration
        // maps what is present (and, with aliases, what is in VRAM), so an
        // empty mapping leaves everything to the prefetch.
        let mut region = match dev.register(target.as_mut_slice(), verbs::target_access(true)) {
            Ok(r) => r,
            Err(e) => {
                let e = format!("register the target as an ODP MR: {e}");
                return (Err(e.clone()), Err(format!("not run: {e}")));
            }
        };
        let fault = self.fault_path(cell, &mut region, seed);
        let pipeline = match &fault {
            Ok(_) => self.pipeline(cell, &mut region, seed, seed ^ 0x00ff_ff00),
            Err(e) => Err(format!("not run: the fault-path part failed: {e}")),
        };
        drop(region);
        (fault, pipeline)
    }

    fn fault_path(
        &mut self,
        cell: Cell,
        region: &mut Region<'_>,
        seed: u32,
    ) -> Measured<FaultPath> {
        let mut errors = Vec::new();
        self.set_placement(cell.placement)?;
        pattern::fill(region.bytes_mut(), 0, seed);
        let snapshot = if cell.placement.in_vram() {
            self.place_in_vram(region.bytes(), seed, &mut errors)?
        } else {
            self.gpu.snapshot(region.bytes())?
        };
        let huge_before = huge_mapped(&snapshot);

        let before = self.gpu.stats()?;
        let elapsed = self.dev.prefetch_write(region)?;
        let after = self.gpu.stats()?;
        let resident_after = vram::resident(&self.gpu.snapshot(region.bytes())?);

        let len = cell.size;
        self.local.bytes_mut()[..len].fill(0);
        self.transfer(Dir::Read, region, len)?;
        let after_read = self.gpu.stats()?;
        data_error(
            &mut errors,
            &pattern::check(&self.local.bytes()[..len], 0, seed),
            "RDMA READ of the whole target after the prefetch",
        );
        Ok((
            FaultPath {
                cell,
                elapsed,
                delta: after.since(&before),
                read_delta: after_read.since(&after),
                resident_after,
                huge_before,
            },
            errors,
        ))
    }

    fn pipeline(
        &mut self,
        cell: Cell,
        region: &mut Region<'_>,
        old_seed: u32,
        seed: u32,
    ) -> Measured<Pipeline> {
        let mut errors = Vec::new();
        self.set_placement(cell.placement)?;
        if cell.placement.in_vram() {
            // Back into VRAM (with migration the fault path moved it out);
            // the migration also invalidates the NIC's mapping, so the
            // NIC's write faults again.
            self.place_in_vram(region.bytes(), old_seed, &mut errors)?;
        }
        let len = cell.size;
        pattern::fill(&mut self.local.bytes_mut()[..len], 0, seed);

        let s0 = self.gpu.stats()?;
        let nic = self.transfer(Dir::Write, region, len)?;
        let s1 = self.gpu.stats()?;
        let gpu = self.timed_migrate(
            region.bytes(),
            seed,
            &mut errors,
            "GPU read-back (MIGRATE_TO_DEV) of what the NIC wrote",
        )?;
        let s2 = self.gpu.stats()?;
        let resident_after = vram::resident(&self.gpu.snapshot(region.bytes())?);
        Ok((
            Pipeline {
                cell,
                nic,
                gpu,
                nic_delta: s1.since(&s0),
                gpu_delta: s2.since(&s1),
                resident_after,
            },
            errors,
        ))
    }

    /// Part 3: `peer` reads a target of `size` in this GPU's VRAM, through
    /// aliases and then without. Two outcomes, alias first.
    pub fn measure_peer(
        &mut self,
        size: usize,
        pages: Pages,
        peer: &Path,
        seed: u32,
    ) -> Vec<Measured<PeerRead>> {
        let cells = [Placement::Alias, Placement::Migrate].map(|placement| Cell {
            size,
            pages,
            placement,
        });
        match self.peer_reads(cells, peer, seed) {
            Ok(results) => results,
            Err(e) => vec![Err(e.clone()), Err(e)],
        }
    }

    fn peer_reads(
        &mut self,
        cells: [Cell; 2],
        peer: &Path,
        seed: u32,
    ) -> Result<Vec<Measured<PeerRead>>, String> {
        let size = cells[0].size;
        let alias_reader = Vram::open(peer)?;
        alias_reader.set_flags(vram::FLAG_ALIAS_DMA)?;
        // A file's flags cannot go back to 0: a second file reads without.
        let plain_reader = Vram::open(peer)?;
        let gpus = (gpu_name(self.gpu.device()), gpu_name(peer));
        let mut target = new_target(size, cells[0].pages)?;
        pattern::fill(target.as_mut_slice(), 0, seed);
        let mut out = vec![0u8; size];
        let mut results = Vec::new();
        for (i, cell) in cells.into_iter().enumerate() {
            let reader = if i == 0 { &alias_reader } else { &plain_reader };
            let one = (|| -> Measured<PeerRead> {
                let mut errors = Vec::new();
                // Into (or back into) VRAM; this also invalidates what the
                // reader mapped before.
                self.place_in_vram(target.as_slice(), seed, &mut errors)?;
                out.fill(0);
                let o0 = self.gpu.stats()?;
                let r0 = reader.stats()?;
                let start = Instant::now();
                reader.read_into(target.as_slice(), &mut out)?;
                let elapsed = start.elapsed();
                let o1 = self.gpu.stats()?;
                let r1 = reader.stats()?;
                let resident_after = vram::resident(&self.gpu.snapshot(target.as_slice())?);
                data_error(
                    &mut errors,
                    &pattern::check(&out, 0, seed),
                    &format!("{} HMM_DMIRROR_READ", gpus.1),
                );
                Ok((
                    PeerRead {
                        cell,
                        gpus: gpus.clone(),
                        elapsed,
                        owner: o1.since(&o0),
                        reader: r1.since(&r0),
                        resident_after,
                    },
                    errors,
                ))
            })();
            results.push(one);
        }
        Ok(results)
    }

    /// Part 4: `reps` timed RDMA WRITEs and READs of a fresh target of
    /// `size` in `placement`, after one warm-up of each.
    pub fn measure_bandwidth(
        &mut self,
        size: usize,
        placement: Placement,
        reps: usize,
        seed: u32,
    ) -> Measured<Bandwidth> {
        let cell = Cell {
            size,
            pages: Pages::Small,
            placement,
        };
        let mut errors = Vec::new();
        self.set_placement(placement)?;
        let mut target = new_target(size, Pages::Small)?;
        let dev = self.dev;
        let region = dev
            .register(target.as_mut_slice(), verbs::target_access(true))
            .map_err(|e| format!("register the target as an ODP MR: {e}"))?;
        // Populated by the CPU, as in the other parts; the first WRITE
        // overwrites it with the local buffer's pattern.
        let mut region = region;
        pattern::fill(region.bytes_mut(), 0, seed ^ 1);
        if placement.in_vram() {
            self.place_in_vram(region.bytes(), seed ^ 1, &mut errors)?;
        }
        pattern::fill(&mut self.local.bytes_mut()[..size], 0, seed);
        let before = self.gpu.stats()?;
        self.transfer(Dir::Write, &region, size)?;
        self.transfer(Dir::Read, &region, size)?;
        let mut write = Duration::ZERO;
        for _ in 0..reps {
            write += self.transfer(Dir::Write, &region, size)?;
        }
        let mut read = Duration::ZERO;
        for _ in 0..reps {
            read += self.transfer(Dir::Read, &region, size)?;
        }
        let after = self.gpu.stats()?;
        let resident_after = vram::resident(&self.gpu.snapshot(region.bytes())?);
        self.local.bytes_mut()[..size].fill(0);
        self.transfer(Dir::Read, &region, size)?;
        data_error(
            &mut errors,
            &pattern::check(&self.local.bytes()[..size], 0, seed),
            "RDMA READ of the whole target after the bandwidth runs",
        );
        drop(region);
        Ok((
            Bandwidth {
                cell,
                reps,
                write,
                read,
                delta: after.since(&before),
                resident_after,
            },
            errors,
        ))
    }
}

/// A measured outcome as a trait object, its data errors cloned.
fn as_dyn<T: Measurement>(
    outcome: &Measured<T>,
) -> Result<(&dyn Measurement, Vec<String>), String> {
    match outcome {
        Ok((m, errors)) => Ok((m as &dyn Measurement, errors.clone())),
        Err(e) => Err(e.clone()),
    }
}

/// A benchmark TAP point: passed if neither the counters (`failures`)
/// nor the data (`errors`) are wrong; it carries all of them, then `note`
/// (what the counters did).
fn bench_result(
    name: String,
    failures: Vec<String>,
    errors: Vec<String>,
    note: String,
) -> TestResult {
    let passed = failures.is_empty() && errors.is_empty();
    let mut diagnostics = failures;
    diagnostics.extend(errors);
    diagnostics.push(note);
    TestResult {
        name,
        kind: CaseKind::Bench,
        mtu: Some(BENCH_MTU),
        passed,
        diagnostics,
        words: None,
        vram: None,
    }
}

/// A benchmark TAP point that could not be measured.
fn bench_failure(name: String, why: String) -> TestResult {
    TestResult {
        name,
        kind: CaseKind::Bench,
        mtu: Some(BENCH_MTU),
        passed: false,
        diagnostics: vec![why],
        words: None,
        vram: None,
    }
}

/// The kernel release, for the context line.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "?".to_owned(), |s| s.trim().to_owned())
}

/// Runs the whole benchmark as `cfg.bench` says; hands out each result and
/// each `# bench` line as soon as it is known. Returns the report and the
/// results.
pub fn run_bench(cfg: &Config, emit: &mut dyn FnMut(Emit<'_>)) -> (BenchReport, Vec<TestResult>) {
    let mut report = BenchReport::default();
    let mut results = Vec::new();
    let mut push = |r: TestResult, emit: &mut dyn FnMut(Emit<'_>)| {
        emit(Emit::Result(&r));
        results.push(r);
    };
    let (Some(bench), Some(vram_mode)) = (&cfg.bench, &cfg.vram) else {
        push(
            TestResult::setup_failure("bench: setup", Some(BENCH_MTU), "the bench needs --vram"),
            emit,
        );
        return (report, results);
    };
    let max = bench.sizes.iter().copied().max().unwrap_or(0);
    let smallest = bench.sizes.iter().copied().min().unwrap_or(0);
    report.context = vec![
        format!(
            "kernel {}, device {} at MTU {BENCH_MTU}, GPU {}{}; ib_core.odp_p2p_alias was {}",
            kernel_release(),
            cfg.device,
            vram_mode.device.display(),
            bench
                .peer
                .as_ref()
                .map(|p| format!(", peer GPU {}", p.display()))
                .unwrap_or_default(),
            vram::odp_p2p_alias_param().unwrap_or_else(|| "not present".to_owned()),
        ),
        format!(
            "fault path: ibv_cmd_advise_mr(PREFETCH_WRITE, FLUSH), {} KiB per SGE, {} SGEs per \
             call; RDMA transfers {} KiB per work request, one at a time",
            (crate::advise::SGE_PAGES * PAGE_SIZE) >> 10,
            crate::advise::SGES_PER_CALL,
            RDMA_CHUNK >> 10
        ),
        format!(
            "bandwidth: {} target, 4k pages, one warm-up then {} timed transfers each way",
            size_text(smallest),
            bench.reps
        ),
    ];
    for line in report.context_lines() {
        emit(Emit::Comment(&line));
    }
    let mut record = |outcome: Result<(&dyn Measurement, Vec<String>), String>,
                      failed: &dyn Fn() -> String,
                      emit: &mut dyn FnMut(Emit<'_>)| {
        let result = match outcome {
            Ok((m, errors)) => {
                for metric in m.metrics() {
                    emit(Emit::Comment(&metric.line()));
                }
                bench_result(m.name(), m.check(), errors, m.note())
            }
            Err(e) => bench_failure(failed(), e),
        };
        push(result, emit);
    };
    let outcome = with_rig(cfg, max, |rig| {
        let mut seed = 0xbe9c_0000u32;
        let mut next_seed = || {
            seed += 0x101;
            seed
        };
        for &size in &bench.sizes {
            for &pages in &bench.pages {
                for placement in Placement::ALL {
                    let cell = Cell {
                        size,
                        pages,
                        placement,
                    };
                    let (fault, pipeline) = rig.measure_cell(cell, next_seed());
                    record(
                        as_dyn(&fault),
                        &|| format!("bench {}: NIC fault path", cell.label()),
                        emit,
                    );
                    record(
                        as_dyn(&pipeline),
                        &|| {
                            format!(
                                "bench {}: NIC RDMA WRITE, then GPU MIGRATE_TO_DEV",
                                cell.label()
                            )
                        },
                        emit,
                    );
                    report.fault.extend(fault.ok().map(|(f, _)| f));
                    report.pipeline.extend(pipeline.ok().map(|(p, _)| p));
                }
            }
        }
        if let Some(peer) = &bench.peer {
            let owner = gpu_name(rig.gpu().device());
            let reader = gpu_name(peer);
            for &pages in &bench.pages {
                let reads = rig.measure_peer(smallest, pages, peer, next_seed());
                for (read, how) in reads
                    .into_iter()
                    .zip(["through aliases", "without aliases"])
                {
                    record(
                        as_dyn(&read),
                        &|| {
                            format!(
                                "bench peer {} {pages}: {reader} reads {owner}'s VRAM {how}",
                                size_text(smallest)
                            )
                        },
                        emit,
                    );
                    report.peer.extend(read.ok().map(|(p, _)| p));
                }
            }
        }
        if bench.reps > 0 {
            for placement in Placement::ALL {
                let bw = rig.measure_bandwidth(smallest, placement, bench.reps, next_seed());
                record(
                    as_dyn(&bw),
                    &|| {
                        format!(
                            "bench bandwidth {} {}",
                            size_text(smallest),
                            placement.key()
                        )
                    },
                    emit,
                );
                report.bandwidth.extend(bw.ok().map(|(b, _)| b));
            }
        }
    });
    if let Err(e) = outcome {
        push(
            TestResult::setup_failure(
                format!("bench: setup ({}, MTU {BENCH_MTU})", cfg.device),
                Some(BENCH_MTU),
                e,
            ),
            emit,
        );
    }
    (report, results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(size: usize, pages: Pages, placement: Placement) -> Cell {
        Cell {
            size,
            pages,
            placement,
        }
    }

    const MIB4: usize = 4 << 20;
    const N: i64 = 1024;

    fn fault(placement: Placement, delta: StatsDelta, resident: usize, ms_: u64) -> FaultPath {
        FaultPath {
            cell: cell(MIB4, Pages::Small, placement),
            elapsed: Duration::from_millis(ms_),
            delta,
            read_delta: StatsDelta::default(),
            resident_after: resident,
            huge_before: 0,
        }
    }

    fn good_faults() -> [FaultPath; 3] {
        [
            fault(Placement::Ram, StatsDelta::default(), 0, 2),
            fault(
                Placement::Alias,
                StatsDelta {
                    alias_grants: N,
                    ..StatsDelta::default()
                },
                1024,
                10,
            ),
            fault(
                Placement::Migrate,
                StatsDelta {
                    pages_to_ram: N,
                    migrated_to_ram: N,
                    cpu_faults: N,
                    fault_ns: N * 250_000,
                    ..StatsDelta::default()
                },
                0,
                400,
            ),
        ]
    }

    fn pipeline(
        placement: Placement,
        nic: StatsDelta,
        gpu: StatsDelta,
        resident: usize,
    ) -> Pipeline {
        Pipeline {
            cell: cell(MIB4, Pages::Small, placement),
            nic: Duration::from_millis(100),
            gpu: Duration::from_millis(20),
            nic_delta: nic,
            gpu_delta: gpu,
            resident_after: resident,
        }
    }

    fn to_ram(n: i64) -> StatsDelta {
        StatsDelta {
            pages_to_ram: n,
            ..StatsDelta::default()
        }
    }

    fn to_vram(n: i64) -> StatsDelta {
        StatsDelta {
            pages_to_vram: n,
            ..StatsDelta::default()
        }
    }

    fn good_pipelines() -> [Pipeline; 3] {
        [
            pipeline(Placement::Ram, StatsDelta::default(), to_vram(N), 1024),
            pipeline(
                Placement::Alias,
                StatsDelta::default(),
                StatsDelta::default(),
                1024,
            ),
            pipeline(Placement::Migrate, to_ram(N), to_vram(N), 1024),
        ]
    }

    #[test]
    fn sizes_and_keys() {
        assert_eq!(size_key(4 << 20), "4M");
        assert_eq!(size_key(64 << 20), "64M");
        assert_eq!(size_key(512 << 10), "512K");
        assert_eq!(size_key(12288), "12K");
        assert_eq!(size_key(1000), "1000");
        assert_eq!(size_text(4 << 20), "4 MiB");
        assert_eq!(size_text(8192), "8 KiB");
        let c = cell(MIB4, Pages::Huge, Placement::Migrate);
        assert_eq!(c.key("fault"), "fault_4M_thp_migrate");
        assert_eq!(c.label(), "4 MiB thp migrate");
        assert_eq!(c.npages(), 1024);
        assert!(!Placement::Ram.in_vram() && Placement::Alias.in_vram());
        assert!(Placement::Alias.odp_p2p_alias() && !Placement::Migrate.odp_p2p_alias());
    }

    #[test]
    fn per_page_arithmetic() {
        assert_eq!(us_per_page(Duration::from_millis(4), 1000), 4.0);
        assert_eq!(us_per_page(Duration::from_millis(4), 0), 0.0);
        assert_eq!(mb_per_s(4_000_000, Duration::from_secs(2)), 2.0);
        assert!(mb_per_s(1, Duration::ZERO).is_infinite());
        let d = StatsDelta {
            pages_to_ram: 1024,
            pages_to_vram: 1024,
            ..StatsDelta::default()
        };
        assert_eq!(migrations_per_page(&d, 1024), 2.0);
        assert_eq!(migrations_per_page(&d, 0), 0.0);
        assert_eq!(mib(d.bytes_copied()), 8.0);
    }

    #[test]
    fn fault_path_expectations() {
        for f in good_faults() {
            assert_eq!(f.check(), Vec::<String>::new(), "{:?}", f.cell);
        }
        let [ram, alias, migrate] = good_faults();
        // An alias run that migrated a page, left it out of VRAM, granted
        // nothing.
        let bad = FaultPath {
            delta: to_ram(1),
            resident_after: 1023,
            ..alias.clone()
        };
        let why = bad.check();
        assert_eq!(why.len(), 3, "{why:?}");
        assert!(why[0].contains("pages_to_ram +1, want +0"), "{why:?}");
        assert!(why[1].contains("alias_grants +0"), "{why:?}");
        assert!(why[2].contains("+1023, want +1024"), "{why:?}");
        // Migration that left pages in VRAM.
        let bad = FaultPath {
            resident_after: 5,
            delta: to_ram(N - 5),
            ..migrate
        };
        assert_eq!(bad.check().len(), 2);
        // RAM: anything moving fails; so does an RDMA READ that moved pages.
        let bad = FaultPath {
            delta: to_vram(3),
            read_delta: to_ram(2),
            ..ram
        };
        let why = bad.check();
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(
            why[1].starts_with("RDMA READ after the prefetch"),
            "{why:?}"
        );
        assert!(alias
            .name()
            .contains("0 pages to RAM, every page still in VRAM"));
    }

    #[test]
    fn fault_path_metrics() {
        let [_, alias, migrate] = good_faults();
        let lines: Vec<String> = migrate.metrics().iter().map(Metric::line).collect();
        assert!(lines.contains(&"bench fault_4M_4k_migrate_ms 400.000 ms".to_owned()));
        assert!(lines.contains(&"bench fault_4M_4k_migrate_us_per_page 390.62 us".to_owned()));
        assert!(lines.contains(&"bench fault_4M_4k_migrate_pages_to_ram 1024 pages".to_owned()));
        assert!(lines.contains(&"bench fault_4M_4k_migrate_mib_copied 4.00 MiB".to_owned()));
        assert!(
            lines.contains(&"bench fault_4M_4k_migrate_kernel_us_per_fault 250.00 us".to_owned())
        );
        // No migration faults: no per-fault cost.
        assert!(!alias
            .metrics()
            .iter()
            .any(|m| m.name.ends_with("kernel_us_per_fault")));
        // Every line is `bench NAME VALUE UNIT`.
        for l in &lines {
            assert_eq!(l.split_whitespace().count(), 4, "{l}");
        }
    }

    #[test]
    fn pipeline_expectations() {
        let [ram, alias, migrate] = good_pipelines();
        assert_eq!(ram.migrations_per_page(), 1.0);
        assert_eq!(alias.migrations_per_page(), 0.0);
        assert_eq!(migrate.migrations_per_page(), 2.0);
        for p in good_pipelines() {
            assert_eq!(p.check(), Vec::<String>::new(), "{:?}", p.cell);
        }
        assert_eq!(Pipeline::expected_copies(Placement::Migrate), (1, 1));
        assert!(migrate.name().contains(": 2 migrations per page"));
        assert!(alias.name().contains(": 0 migrations per page"));
        assert!(ram.name().contains(": 1 migration per page"));
        // Alias with copies fails; migration whose pages left VRAM for the
        // GPU instead of the NIC fails.
        let bad = Pipeline {
            gpu_delta: to_vram(N),
            ..alias
        };
        assert_eq!(bad.check(), ["pipeline: pages_to_vram +1024, want +0"]);
        let bad = Pipeline {
            nic_delta: StatsDelta::default(),
            gpu_delta: StatsDelta {
                pages_to_ram: N,
                pages_to_vram: N,
                ..StatsDelta::default()
            },
            ..migrate
        };
        assert_eq!(bad.check(), ["NIC write: pages_to_ram +0, want +1024"]);
        let bad = Pipeline {
            resident_after: 0,
            ..ram
        };
        assert_eq!(bad.check().len(), 1);
        let m = good_pipelines()[2].metrics();
        assert!(m
            .iter()
            .any(|m| m.line() == "bench pipeline_4M_4k_migrate_migrations_per_page 2.00 per_page"));
        assert!(m
            .iter()
            .any(|m| m.line() == "bench pipeline_4M_4k_migrate_mib_copied 8.00 MiB"));
        assert!(m
            .iter()
            .any(|m| m.line() == "bench pipeline_4M_4k_migrate_total_ms 120.000 ms"));
    }

    fn peer(alias: bool, owner: StatsDelta, reader: StatsDelta, resident: usize) -> PeerRead {
        PeerRead {
            cell: cell(
                MIB4,
                Pages::Small,
                if alias {
                    Placement::Alias
                } else {
                    Placement::Migrate
                },
            ),
            gpus: ("rvram0".into(), "rvram1".into()),
            elapsed: Duration::from_millis(if alias { 50 } else { 500 }),
            owner,
            reader,
            resident_after: resident,
        }
    }

    #[test]
    fn peer_expectations() {
        let grants = StatsDelta {
            alias_grants: 64,
            ..StatsDelta::default()
        };
        let accesses = StatsDelta {
            alias_accesses: N,
            ..StatsDelta::default()
        };
        let good_alias = peer(true, grants, accesses, 1024);
        let good_plain = peer(false, to_ram(N), StatsDelta::default(), 0);
        assert!(good_alias.check().is_empty(), "{:?}", good_alias.check());
        assert!(good_plain.check().is_empty(), "{:?}", good_plain.check());
        // Aliases asked for, but the pages migrated (no P2P path).
        let fell_back = peer(true, to_ram(N), StatsDelta::default(), 0);
        let why = fell_back.check();
        assert_eq!(why.len(), 4, "{why:?}");
        assert!(why[0].starts_with("rvram0 pages_to_ram +1024"), "{why:?}");
        assert!(good_alias
            .name()
            .contains("rvram1 reads rvram0's VRAM through P2P aliases"));
        assert!(good_plain.name().contains("without aliases"));
        assert!(good_alias
            .metrics()
            .iter()
            .any(|m| m.line() == "bench peer_4M_4k_alias_alias_accesses 1024 pages"));
    }

    fn report() -> BenchReport {
        let [ram_p, alias_p, migrate_p] = good_pipelines();
        BenchReport {
            context: vec!["kernel 7.3, device rxe0".into()],
            fault: good_faults().to_vec(),
            pipeline: vec![ram_p, alias_p, migrate_p],
            peer: vec![
                peer(
                    true,
                    StatsDelta {
                        alias_grants: 64,
                        ..StatsDelta::default()
                    },
                    StatsDelta {
                        alias_accesses: N,
                        ..StatsDelta::default()
                    },
                    1024,
                ),
                peer(false, to_ram(N), StatsDelta::default(), 0),
            ],
            bandwidth: vec![Bandwidth {
                cell: cell(MIB4, Pages::Small, Placement::Alias),
                reps: 2,
                write: Duration::from_secs(1),
                read: Duration::from_secs(2),
                delta: StatsDelta::default(),
                resident_after: 1024,
            }],
        }
    }

    #[test]
    fn fault_table_rows() {
        let t = report().fault_table();
        let rows: Vec<&str> = t.lines().collect();
        assert_eq!(rows.len(), 5);
        assert_eq!(
            rows[2],
            "| 4 MiB | 4k | system RAM | 2.0 | 1.95 | 0 | - | 0 | 0 | 0.0 | 0 | 0/1024 | 0.20x |"
        );
        assert_eq!(
            rows[3],
            "| 4 MiB | 4k | VRAM, P2P alias | 10.0 | 9.77 | 0 | - | 0 | 0 | 0.0 | 1024 | 1024/1024 | 1.00x |"
        );
        assert_eq!(
            rows[4],
            "| 4 MiB | 4k | VRAM, migration (7.3) | 400.0 | 390.62 | 1024 | 250.0 | 1024 | 1024 | 4.0 | 0 | 0/1024 | 40.00x |"
        );
        // Every row has as many cells as the heading.
        let cells = |r: &str| r.matches('|').count();
        assert!(rows.iter().all(|r| cells(r) == cells(rows[0])), "{t}");
    }

    #[test]
    fn pipeline_and_other_tables() {
        let r = report();
        let t = r.pipeline_table();
        assert!(t.contains(
            "| 4 MiB | 4k | VRAM, migration (7.3) | 100.0 | 20.0 | 120.0 | 2.00 | 1024 | 1024 | 8.0 | 1024/1024 | 1.00x |"
        ), "{t}");
        assert!(t.contains(
            "| 4 MiB | 4k | VRAM, P2P alias | 100.0 | 20.0 | 120.0 | 0.00 | 0 | 0 | 0.0 |"
        ));
        let t = r.peer_table();
        assert!(t.contains(
            "| 4 MiB in rvram0 | 4k | rvram1, by migration (no alias flag) | 500.0 | 488.28 | 1024 | 4.0 | 0 | 0 | 0/1024 | 10.00x |"
        ), "{t}");
        let t = r.bandwidth_table();
        assert!(
            t.contains("| 4 MiB 4k | VRAM, P2P alias | 8.4 | 4.2 | 0 | 1024/1024 |"),
            "{t}"
        );
        for t in [
            r.fault_table(),
            r.pipeline_table(),
            r.peer_table(),
            r.bandwidth_table(),
        ] {
            let rows: Vec<&str> = t.lines().collect();
            let cells = |s: &str| s.matches('|').count();
            assert!(rows.iter().all(|row| cells(row) == cells(rows[0])), "{t}");
        }
    }

    #[test]
    fn markdown_has_every_part_and_the_note() {
        let md = report().markdown();
        for part in [
            "## 1. The NIC's fault path",
            "## 2. The NIC writes, then the GPU uses the data",
            "## 3. A GPU peer reads the target",
            "## 4. Steady RDMA bandwidth",
            TCG_NOTE,
            "- kernel 7.3, device rxe0",
            "2 timed RDMA WRITEs",
        ] {
            assert!(md.contains(part), "{part:?} missing:\n{md}");
        }
        let empty = BenchReport::default().markdown();
        assert!(!empty.contains("## "), "{empty}");
    }

    #[test]
    fn lines_are_tap_comments() {
        let lines = report().lines();
        assert_eq!(lines[0], "bench: kernel 7.3, device rxe0");
        assert!(lines
            .iter()
            .skip(1)
            .all(|l| l.starts_with("bench ") && l.split_whitespace().count() == 4));
        assert!(lines.contains(&"bench bw_4M_4k_alias_write_mb_s 8.4 MB/s".to_owned()));
    }

    #[test]
    fn snapshot_counts() {
        assert_eq!(huge_mapped(&[0x06, 0x26, 0x22, 0xff, 0x02]), 2);
    }

    /// Without --vram the bench is one setup failure.
    #[test]
    fn needs_vram() {
        let cfg = Config {
            bench: Some(crate::config::Bench::default()),
            ..Config::default()
        };
        let mut emitted = 0;
        let (report, results) = run_bench(&cfg, &mut |_| emitted += 1);
        assert!(report.fault.is_empty());
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].kind, CaseKind::Setup);
        assert!(!results[0].passed);
        assert_eq!(emitted, 1);
    }

    /// With a GPU that does not exist, setup fails after the context.
    #[test]
    fn missing_gpu_is_a_setup_failure() {
        let cfg = Config {
            bench: Some(crate::config::Bench::default()),
            vram: Some(crate::config::VramMode {
                device: "/dev/rvram-no-such".into(),
                expect: crate::config::Expect::Alias,
            }),
            ..Config::default()
        };
        let (_, results) = run_bench(&cfg, &mut |_| {});
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].kind, CaseKind::Setup);
    }
}
