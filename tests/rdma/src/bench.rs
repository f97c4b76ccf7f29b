// SPDX-License-Identifier: GPL-2.0
//! What the P2P alias saves: RDMA with on-demand paging into GPU memory,
//! measured so that the savings are counted, not guessed from wall time.
//!
//! Every measurement runs with the target in one of three [`Placement`]s:
//! system RAM, an rvram GPU's VRAM with P2P aliases on (the NIC reaches
//! the pages through their P2P alias), and the same VRAM with them off
//! (Linux 7.3 as released: ODP faults migrate the pages to RAM), by the
//! `p2p_alias` switch in rvram's debugfs of every device-private GPU. The
//! bench sets the switches itself and restores them ([`AliasSwitch`]).
//! For each target size and page kind ([`Pages`]):
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
//!
//! The code, one module per part and the shared parts apart:
//!
//! - this module: [`Placement`], [`Cell`], the size and unit helpers,
//!   [`Metric`], [`Measurement`], [`Emit`] and [`run_bench`];
//! - `fault_path`: part 1, [`FaultPath`], and [`Rig::measure_cell`], which
//!   runs parts 1 and 2 on one target;
//! - `pipeline`: part 2, [`Pipeline`];
//! - `peer_read`: part 3, [`PeerRead`] ([`Rig::measure_peer`]);
//! - `bandwidth`: part 4, [`Bandwidth`] ([`Rig::measure_bandwidth`]);
//! - `report`: [`BenchReport`], its `# bench` lines and markdown tables;
//! - `rig`: [`Rig`] and [`with_rig`], the device, QPs and GPU the
//!   measurements share, and the targets they measure.
//!
//! [`AliasSwitch`]: crate::vram::AliasSwitch
//! [`Device::prefetch_write`]: crate::verbs::Device::prefetch_write

mod bandwidth;
mod fault_path;
#[cfg(test)]
mod fixtures;
mod peer_read;
mod pipeline;
mod report;
mod rig;

use std::time::Duration;

use crate::config::{Config, Pages, PathMtu, PAGE_SIZE};
use crate::report::{CaseKind, TestResult};
use crate::vram::{self, StatsDelta};

pub use bandwidth::Bandwidth;
pub use fault_path::FaultPath;
pub use peer_read::PeerRead;
pub use pipeline::Pipeline;
pub use report::{BenchReport, TCG_NOTE};
pub use rig::{with_rig, Rig};

use rig::gpu_name;

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
    /// The GPU's VRAM, `p2p_alias` on: the NIC maps P2P aliases.
    Alias,
    /// The GPU's VRAM, `p2p_alias` off: ODP faults migrate the pages to
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

    /// Whether the placement runs with the `p2p_alias` switches on.
    pub fn p2p_alias(self) -> bool {
        self != Placement::Migrate
    }
}

/// The placements in the order round `round` measures them:
/// [`Placement::ALL`] rotated by one more each round, so that over three
/// rounds each placement runs first, second and last once.
pub fn round_order(round: usize) -> [Placement; 3] {
    let mut order = Placement::ALL;
    let n = order.len();
    order.rotate_left(round % n);
    order
}

/// The median of `values` (the mean of the middle two for an even count),
/// or `None` if there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    })
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
            "kernel {}, device {} at MTU {BENCH_MTU}, GPU {}{}; P2P alias switches were: {}",
            kernel_release(),
            cfg.device,
            vram_mode.device.display(),
            bench
                .peer
                .as_ref()
                .map(|p| format!(", peer GPU {}", p.display()))
                .unwrap_or_default(),
            vram::p2p_alias_state(),
        ),
        format!(
            "fault path: ibv_cmd_advise_mr(PREFETCH_WRITE, FLUSH), {} KiB per SGE, {} SGEs per \
             call; RDMA transfers {} KiB per work request, one at a time",
            (crate::advise::SGE_PAGES * PAGE_SIZE) >> 10,
            crate::advise::SGES_PER_CALL,
            RDMA_CHUNK >> 10
        ),
        format!(
            "fault path: {} round(s) per target, each over every placement, rotated each \
             round; medians",
            bench.rounds.max(1)
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
                // Round 0 also runs the pipeline on each target; later
                // rounds the fault path alone, the placements rotated
                // each round, so that no placement always runs in the
                // same position.
                for round in 0..bench.rounds.max(1) {
                    for placement in round_order(round) {
                        let cell = Cell {
                            size,
                            pages,
                            placement,
                        };
                        let failed = || format!("bench {}: NIC fault path", cell.label());
                        if round > 0 {
                            let fault = rig.measure_fault(cell, round, next_seed());
                            record(as_dyn(&fault), &failed, emit);
                            report.fault.extend(fault.ok().map(|(f, _)| f));
                            continue;
                        }
                        let (fault, pipeline) = rig.measure_cell(cell, next_seed());
                        record(as_dyn(&fault), &failed, emit);
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
                for m in report.fault_medians(size, pages) {
                    emit(Emit::Comment(&m.line()));
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
    use super::fixtures::{cell, MIB4};
    use super::*;

    #[test]
    fn medians_and_round_order() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 2.0]), Some(2.0));
        assert_eq!(round_order(0), Placement::ALL);
        assert_eq!(
            round_order(1),
            [Placement::Alias, Placement::Migrate, Placement::Ram]
        );
        assert_eq!(round_order(3), Placement::ALL);
        // Over three rounds, every placement in every position once.
        for p in Placement::ALL {
            let mut at: Vec<usize> = (0..3)
                .map(|r| round_order(r).iter().position(|&x| x == p).unwrap())
                .collect();
            at.sort();
            assert_eq!(at, [0, 1, 2], "{p:?}");
        }
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
        assert!(Placement::Alias.p2p_alias() && !Placement::Migrate.p2p_alias());
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
