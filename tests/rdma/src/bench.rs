// SPDX-License-Identifier: GPL-2.0
//! First-touch latency and steady-state bandwidth of RDMA on an ODP target,
//! with the target in system RAM and, in VRAM mode, in an rvram GPU's VRAM.
//!
//! For each placement a fresh 4 MiB anonymous target is filled by the CPU,
//! moved into VRAM if that is the placement, and registered as an ODP MR
//! (which does not touch its pages). Then QP A reads each of its pages once
//! with a 4096-byte RDMA READ, timed from post to completion: the first
//! touch, which faults the page into the MR (and, from VRAM, either grants a
//! P2P alias or migrates the page to RAM). Then, after one warm-up of each,
//! [`BENCH_REPS`] RDMA WRITEs and READs of the whole 4 MiB give the
//! steady-state bandwidth.
//!
//! Nothing here is asserted: the numbers are reported as `# bench NAME VALUE
//! UNIT` lines and optionally as a markdown table. A placement's TAP point
//! fails only if it could not be measured, or if the data read back is
//! wrong.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::config::{Config, PAGE_SIZE};
use crate::mmap::Mmap;
use crate::pattern;
use crate::report::{CaseKind, TestResult};
use crate::verbs::{self, Device, Endpoints, Expected, Queue, Region, SendOp, Side};
use crate::vram::{self, Vram};

/// Size of the benchmark target.
pub const BENCH_SIZE: usize = 4 << 20;
/// Timed repetitions of each bandwidth transfer, after one warm-up.
pub const BENCH_REPS: usize = 8;

/// Where the benchmark target lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// System RAM.
    Ram,
    /// The VRAM of the `--vram` GPU.
    Vram,
}

impl Placement {
    /// Prefix of metric names, e.g. `vram`.
    pub fn key(self) -> &'static str {
        match self {
            Placement::Ram => "ram",
            Placement::Vram => "vram",
        }
    }

    /// Column heading, e.g. `VRAM`.
    pub fn heading(self) -> &'static str {
        match self {
            Placement::Ram => "RAM",
            Placement::Vram => "VRAM",
        }
    }
}

/// One measured value.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Where the target was.
    pub placement: Placement,
    /// Metric name without the placement, e.g. `first_read_median`.
    pub metric: &'static str,
    /// The value.
    pub value: f64,
    /// Decimal places to print.
    pub precision: usize,
    /// Unit, e.g. `us` or `MB/s`.
    pub unit: &'static str,
}

impl Row {
    /// The value as printed.
    pub fn value_text(&self) -> String {
        format!("{:.*}", self.precision, self.value)
    }

    /// The `bench NAME VALUE UNIT` line (without the `# `).
    pub fn line(&self) -> String {
        format!(
            "bench {}_{} {} {}",
            self.placement.key(),
            self.metric,
            self.value_text(),
            self.unit
        )
    }
}

/// All values of a benchmark run and what they were measured with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BenchReport {
    /// What the numbers were measured with, one line.
    pub context: String,
    /// The values, in the order measured.
    pub rows: Vec<Row>,
}

impl BenchReport {
    fn push(
        &mut self,
        placement: Placement,
        metric: &'static str,
        value: f64,
        precision: usize,
        unit: &'static str,
    ) {
        self.rows.push(Row {
            placement,
            metric,
            value,
            precision,
            unit,
        });
    }

    /// The TAP comment lines (without the `# `): the context, then one
    /// `bench NAME VALUE UNIT` line per value.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![format!("bench: {}", self.context)];
        lines.extend(self.rows.iter().map(Row::line));
        lines
    }

    /// The values as a markdown table: a row per metric, a column per
    /// placement that has any value.
    pub fn markdown(&self) -> String {
        let mut placements: Vec<Placement> = Vec::new();
        let mut metrics: Vec<(&str, &str)> = Vec::new();
        for row in &self.rows {
            if !placements.contains(&row.placement) {
                placements.push(row.placement);
            }
            if !metrics.iter().any(|(m, _)| *m == row.metric) {
                metrics.push((row.metric, row.unit));
            }
        }
        let mut out = String::new();
        let _ = writeln!(out, "rvram-rdma-test bench: {}\n", self.context);
        out.push_str("| metric | unit |");
        for p in &placements {
            let _ = write!(out, " {} |", p.heading());
        }
        out.push_str("\n|---|---|");
        for _ in &placements {
            out.push_str("---:|");
        }
        out.push('\n');
        for (metric, unit) in metrics {
            let _ = write!(out, "| {metric} | {unit} |");
            for &p in &placements {
                let value = self
                    .rows
                    .iter()
                    .find(|r| r.placement == p && r.metric == metric)
                    .map_or_else(|| "-".to_owned(), Row::value_text);
                let _ = write!(out, " {value} |");
            }
            out.push('\n');
        }
        out
    }
}

/// Median and mean of `samples` in microseconds; `None` if empty.
pub fn median_mean_us(samples: &[Duration]) -> Option<(f64, f64)> {
    if samples.is_empty() {
        return None;
    }
    let mut us: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    let mid = us.len() / 2;
    let median = if us.len().is_multiple_of(2) {
        (us[mid - 1] + us[mid]) / 2.0
    } else {
        us[mid]
    };
    let mean = us.iter().sum::<f64>() / us.len() as f64;
    Some((median, mean))
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

/// Runs the benchmark for RAM and, with `cfg.vram`, for VRAM, at the first
/// configured MTU. Returns the values and one TAP result per placement (or
/// a setup failure).
pub fn run_bench(cfg: &Config) -> (BenchReport, Vec<TestResult>) {
    let mtu = cfg.mtus[0];
    let mut report = BenchReport {
        context: format!(
            "device {}, MTU {mtu}, {} MiB ODP target, first READ {PAGE_SIZE} bytes per page, \
             bandwidth over {BENCH_REPS} transfers of {} MiB after one warm-up; \
             ib_core.odp_p2p_alias {}{}",
            cfg.device,
            BENCH_SIZE >> 20,
            BENCH_SIZE >> 20,
            vram::odp_p2p_alias_param().unwrap_or_else(|| "not present".to_owned()),
            cfg.vram
                .as_ref()
                .map(|v| format!(", VRAM {}", v.device.display()))
                .unwrap_or_default()
        ),
        rows: Vec::new(),
    };
    let setup_failure = |why: String| {
        vec![TestResult::setup_failure(
            format!("bench: setup ({}, MTU {mtu})", cfg.device),
            Some(mtu),
            why,
        )]
    };
    let mut gpu = match &cfg.vram {
        Some(mode) => match Vram::open(&mode.device) {
            Ok(gpu) => Some(gpu),
            Err(err) => return (report, setup_failure(format!("VRAM: {err}"))),
        },
        None => None,
    };
    let mut local = match Mmap::anonymous(BENCH_SIZE) {
        Ok(local) => local,
        Err(err) => return (report, setup_failure(format!("map local buffer: {err}"))),
    };
    let dev = match Device::open(cfg) {
        Ok(dev) => dev,
        Err(err) => return (report, setup_failure(err.to_string())),
    };
    let local = match dev.register(local.as_mut_slice(), verbs::local_access()) {
        Ok(local) => local,
        Err(err) => return (report, setup_failure(format!("local MR: {err}"))),
    };
    let mut ep = match dev.connect(mtu) {
        Ok(ep) => ep,
        Err(err) => return (report, setup_failure(err.to_string())),
    };
    let mut bench = Bench {
        cfg,
        dev: &dev,
        ep: &mut ep,
        local,
        next_wr_id: 0,
    };
    let mut results = Vec::new();
    let mut placements = vec![(Placement::Ram, None)];
    if let Some(gpu) = gpu.as_mut() {
        placements.push((Placement::Vram, Some(gpu)));
    }
    for (placement, gpu) in placements {
        let mut diagnostics = Vec::new();
        let passed = match bench.measure(placement, gpu, &mut report, &mut diagnostics) {
            Ok(()) => diagnostics.is_empty(),
            Err(err) => {
                diagnostics.push(err);
                false
            }
        };
        results.push(TestResult {
            name: format!(
                "bench {}: first RDMA READ per page and 4 MiB WRITE/READ bandwidth (MTU {mtu})",
                placement.key()
            ),
            kind: CaseKind::Bench,
            mtu: Some(mtu),
            passed,
            diagnostics,
            words: None,
            vram: None,
        });
        if !passed {
            // The QPs may be in error after a failed work request.
            match dev.connect(mtu) {
                Ok(new) => *bench.ep = new,
                Err(err) => {
                    results.push(TestResult::setup_failure(
                        format!("bench: reconnect QPs (MTU {mtu})"),
                        Some(mtu),
                        err.to_string(),
                    ));
                    break;
                }
            }
        }
    }
    drop(bench);
    drop(ep);
    (report, results)
}

/// The device, QPs and local buffer the placements share.
struct Bench<'a, 'l> {
    cfg: &'a Config,
    dev: &'a Device,
    ep: &'a mut Endpoints,
    local: Region<'l>,
    next_wr_id: u64,
}

impl Bench<'_, '_> {
    /// Measures one placement into `report`; data errors go to
    /// `diagnostics`, what stops the measurement is the `Err`.
    fn measure(
        &mut self,
        placement: Placement,
        mut gpu: Option<&mut Vram>,
        report: &mut BenchReport,
        diagnostics: &mut Vec<String>,
    ) -> Result<(), String> {
        let seed = 0xbe9c_0000 | (placement as u32 + 1);
        let mut target =
            Mmap::anonymous(BENCH_SIZE).map_err(|err| format!("map target buffer: {err}"))?;
        pattern::fill(target.as_mut_slice(), 0, seed);
        self.local.bytes_mut().fill(0);
        if let Some(gpu) = gpu.as_deref_mut() {
            let mut readback = pattern::Check::default();
            gpu.migrate_to_dev(target.as_slice(), &mut |offset, bytes| {
                readback.merge(pattern::check(bytes, offset, seed));
            })?;
            if let Some(line) = readback.describe("device read-back after MIGRATE_TO_DEV") {
                diagnostics.push(line);
            }
        }
        let before = gpu.as_deref().map(Vram::stats).transpose()?;

        // Registration of an ODP MR does not fault pages in.
        let region = self
            .dev
            .register(target.as_mut_slice(), verbs::target_access(true))
            .map_err(|err| format!("target MR: {err}"))?;

        let mut first = Vec::with_capacity(BENCH_SIZE / PAGE_SIZE);
        for offset in (0..BENCH_SIZE).step_by(PAGE_SIZE) {
            let op = SendOp::Read(
                region
                    .remote(offset, PAGE_SIZE)
                    .map_err(|e| e.to_string())?,
            );
            first.push(self.timed(op, offset, PAGE_SIZE)?);
        }
        let after_first = gpu.as_deref().map(Vram::stats).transpose()?;
        let snapshot_first = gpu
            .as_deref()
            .map(|g| g.snapshot(region.bytes()))
            .transpose()?;
        if let Some(line) = pattern::check(self.local.bytes(), 0, seed)
            .describe("first-touch RDMA READs (local copy of the target)")
        {
            diagnostics.push(line);
        }
        if let Some((median, mean)) = median_mean_us(&first) {
            report.push(placement, "first_read_median", median, 2, "us");
            report.push(placement, "first_read_mean", mean, 2, "us");
        }

        let whole = |region: &Region<'_>| region.remote(0, BENCH_SIZE).map_err(|e| e.to_string());
        let (write, read) = (
            SendOp::Write(whole(&region)?),
            SendOp::Read(whole(&region)?),
        );
        self.timed(write, 0, BENCH_SIZE)?;
        self.timed(read, 0, BENCH_SIZE)?;
        let mut elapsed = Duration::ZERO;
        for _ in 0..BENCH_REPS {
            elapsed += self.timed(write, 0, BENCH_SIZE)?;
        }
        report.push(
            placement,
            "write_bw",
            mb_per_s(BENCH_SIZE * BENCH_REPS, elapsed),
            1,
            "MB/s",
        );
        let mut elapsed = Duration::ZERO;
        for _ in 0..BENCH_REPS {
            elapsed += self.timed(read, 0, BENCH_SIZE)?;
        }
        report.push(
            placement,
            "read_bw",
            mb_per_s(BENCH_SIZE * BENCH_REPS, elapsed),
            1,
            "MB/s",
        );
        let after_bw = gpu.as_deref().map(Vram::stats).transpose()?;
        let snapshot_bw = gpu
            .as_deref()
            .map(|g| g.snapshot(region.bytes()))
            .transpose()?;

        if let (Some(before), Some(after_first), Some(after_bw)) = (before, after_first, after_bw) {
            let first = after_first.since(&before);
            let bw = after_bw.since(&after_first);
            report.push(
                placement,
                "first_read_migrated_to_ram",
                first.migrated_to_ram as f64,
                0,
                "pages",
            );
            report.push(
                placement,
                "first_read_alias_grants",
                first.alias_grants as f64,
                0,
                "grants",
            );
            if let Some(snapshot) = &snapshot_first {
                report.push(
                    placement,
                    "first_read_resident",
                    vram::resident(snapshot) as f64,
                    0,
                    "pages",
                );
            }
            report.push(
                placement,
                "bw_migrated_to_ram",
                bw.migrated_to_ram as f64,
                0,
                "pages",
            );
            report.push(
                placement,
                "bw_alias_grants",
                bw.alias_grants as f64,
                0,
                "grants",
            );
            if let Some(snapshot) = &snapshot_bw {
                report.push(
                    placement,
                    "bw_resident",
                    vram::resident(snapshot) as f64,
                    0,
                    "pages",
                );
            }
        }
        drop(region);
        Ok(())
    }

    /// Posts `op` on QP A with `len` bytes of the local buffer at `offset`
    /// and spins until it completes; returns the time from post to
    /// completion.
    fn timed(&mut self, op: SendOp, offset: usize, len: usize) -> Result<Duration, String> {
        self.next_wr_id += 1;
        let wr_id = self.next_wr_id;
        let expected = Expected {
            op: op.name(),
            wr_id,
            opcode: op.completion_opcode(),
            byte_len: None,
        };
        let sge = self.local.sge(offset, len).map_err(|e| e.to_string())?;
        let start = Instant::now();
        self.ep
            .post_send(Side::A, wr_id, op, sge)
            .map_err(|e| e.to_string())?;
        self.ep
            .wait_spin(Side::A, Queue::Send, &expected, self.cfg.timeout)
            .map_err(|e| e.to_string())?;
        Ok(start.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_means() {
        let us = |v: &[u64]| {
            v.iter()
                .map(|&u| Duration::from_micros(u))
                .collect::<Vec<_>>()
        };
        assert_eq!(median_mean_us(&[]), None);
        assert_eq!(median_mean_us(&us(&[5])), Some((5.0, 5.0)));
        assert_eq!(median_mean_us(&us(&[9, 1, 5])), Some((5.0, 5.0)));
        assert_eq!(median_mean_us(&us(&[1, 2, 3, 10])), Some((2.5, 4.0)));
    }

    #[test]
    fn bandwidth() {
        assert_eq!(mb_per_s(4_000_000, Duration::from_secs(2)), 2.0);
        assert!(mb_per_s(1, Duration::ZERO).is_infinite());
    }

    fn report() -> BenchReport {
        let mut r = BenchReport {
            context: "device rxe0, MTU 1024".into(),
            rows: Vec::new(),
        };
        r.push(Placement::Ram, "first_read_median", 12.345, 2, "us");
        r.push(Placement::Ram, "write_bw", 1234.56, 1, "MB/s");
        r.push(Placement::Vram, "first_read_median", 40.0, 2, "us");
        r.push(Placement::Vram, "write_bw", 999.0, 1, "MB/s");
        r.push(
            Placement::Vram,
            "first_read_alias_grants",
            1024.0,
            0,
            "grants",
        );
        r
    }

    #[test]
    fn lines() {
        assert_eq!(
            report().lines(),
            [
                "bench: device rxe0, MTU 1024",
                "bench ram_first_read_median 12.35 us",
                "bench ram_write_bw 1234.6 MB/s",
                "bench vram_first_read_median 40.00 us",
                "bench vram_write_bw 999.0 MB/s",
                "bench vram_first_read_alias_grants 1024 grants",
            ]
        );
    }

    #[test]
    fn markdown_table() {
        assert_eq!(
            report().markdown(),
            "rvram-rdma-test bench: device rxe0, MTU 1024\n\
             \n\
             | metric | unit | RAM | VRAM |\n\
             |---|---|---:|---:|\n\
             | first_read_median | us | 12.35 | 40.00 |\n\
             | write_bw | MB/s | 1234.6 | 999.0 |\n\
             | first_read_alias_grants | grants | - | 1024 |\n"
        );
        let ram_only = BenchReport {
            rows: report()
                .rows
                .into_iter()
                .filter(|r| r.placement == Placement::Ram)
                .collect(),
            ..report()
        };
        assert!(ram_only
            .markdown()
            .contains("| metric | unit | RAM |\n|---|---|---:|\n"));
    }

    /// Without an RDMA device the bench is one setup failure.
    #[test]
    fn missing_device_is_a_setup_failure() {
        let cfg = Config {
            device: "rvram-no-such-device".into(),
            ..Config::default()
        };
        let (report, results) = run_bench(&cfg);
        assert!(report.rows.is_empty());
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].kind, CaseKind::Setup);
        assert!(!results[0].passed);
    }
}
