// SPDX-License-Identifier: GPL-2.0
//! The test cases, run once per path MTU with fresh QPs.
//!
//! Invariant between cases: every target byte holds the background pattern
//! ([`BACKGROUND_SEED`]). A case writes its own seed's pattern into a range,
//! checks the range and the guard bytes around it, and restores the
//! background over both, so one case's damage cannot hide or fake another's.
//!
//! In VRAM mode each case runs in three phases: CPU-side preparation, then,
//! with the whole target migrated into the GPU's VRAM, the RDMA operations
//! between two reads of rvram's counters and a SNAPSHOT of the target, and
//! only then the CPU-side checks (which fault pages back to RAM, outside the
//! measured window). A second TAP point per case reports what rxe did with
//! the pages in VRAM.

use std::ops::{Range, RangeInclusive};

use sideway::ibverbs::completion::WorkCompletionOperationType;

use crate::cases::{self, LocalLayout, Span};
use crate::config::{Config, Expect, PathMtu, PAGE_SIZE};
use crate::error::Error;
use crate::mmap::Mmap;
use crate::pattern::{self, Check, WordStats, BACKGROUND_SEED};
use crate::report::{CaseKind, TestResult, WriteReadWords};
use crate::verbs::{
    self, Completion, Device, Endpoints, Expected, OpError, Queue, Region, SendOp, Side,
};
use crate::vram::{self, Stats, StatsDelta, Vram};

mod ops;
mod window;

/// Layout of the local buffer.
const LAYOUT: LocalLayout = LocalLayout::new();

/// Immediate data of the RDMA WRITE with immediate case.
const IMM_DATA: u32 = 0x5eed_1234;

/// Value added by the fetch-and-add cases: carries across every byte.
const FETCH_ADD: u64 = 0x0123_4567_89ab_cdef;

/// Work request id tags, in the low byte of the id; the case number is above.
mod tag {
    pub const WRITE: u8 = 1;
    pub const READ: u8 = 2;
    pub const SEND: u8 = 3;
    pub const RECV: u8 = 4;
    pub const ATOMIC: u8 = 5;
    pub const VERIFY: u8 = 6;
}

/// Runs every MTU of `cfg` against `target`, in order.
///
/// `target` is the memory under test: the caller's own buffer (e.g. a
/// mapping of device memory) or the binary's anonymous mapping. It is
/// overwritten with test patterns and registered as an ODP MR unless
/// `cfg.odp` is false. It should be page aligned: case offsets are chosen
/// relative to page boundaries, and atomics need 8-byte aligned addresses.
pub fn run_suite(cfg: &Config, target: &mut [u8]) -> Vec<TestResult> {
    run_suite_with(cfg, target, &mut |_| {})
}

/// [`run_suite`], also handing each result to `on_result` as soon as it is
/// known.
pub fn run_suite_with(
    cfg: &Config,
    target: &mut [u8],
    on_result: &mut dyn FnMut(&TestResult),
) -> Vec<TestResult> {
    let mut results = Vec::new();
    for &mtu in &cfg.mtus {
        results.extend(run_mtu(cfg, mtu, target, on_result));
    }
    results
}

/// Runs the suite once at `mtu`: opens the device, registers `target` and a
/// local buffer, connects two fresh QPs, and runs every case that fits
/// `target`. The first result is the setup step's.
pub fn run_mtu(
    cfg: &Config,
    mtu: PathMtu,
    target: &mut [u8],
    on_result: &mut dyn FnMut(&TestResult),
) -> Vec<TestResult> {
    let mut sink = Sink {
        results: Vec::new(),
        on_result,
    };
    let setup = format!(
        "mtu {mtu}: setup ({}, {} target MR)",
        cfg.device,
        if cfg.odp { "ODP" } else { "pinned" }
    );
    let mut local = match Mmap::anonymous(LAYOUT.size()) {
        Ok(local) => local,
        Err(err) => {
            sink.emit(TestResult::setup_failure(
                setup,
                Some(mtu),
                format!("map {}-byte local buffer: {err}", LAYOUT.size()),
            ));
            return sink.results;
        }
    };
    let mut run = match Run::new(cfg, mtu, target, local.as_mut_slice()) {
        Ok(run) => run,
        Err(err) => {
            sink.emit(TestResult::setup_failure(setup, Some(mtu), err.to_string()));
            return sink.results;
        }
    };
    sink.emit(TestResult {
        name: setup,
        kind: CaseKind::Setup,
        mtu: Some(mtu),
        passed: true,
        diagnostics: run.describe(),
        words: None,
        vram: None,
    });
    if let Err(err) = run.all_cases(&mut sink) {
        sink.emit(TestResult::setup_failure(
            format!("mtu {mtu}: reconnect QPs after a failed case"),
            Some(mtu),
            format!("{err}; remaining cases at this MTU not run"),
        ));
    }
    drop(run);
    sink.results
}

/// Collects results and passes each on as it is made.
struct Sink<'a> {
    results: Vec<TestResult>,
    on_result: &'a mut dyn FnMut(&TestResult),
}

impl Sink<'_> {
    fn emit(&mut self, result: TestResult) {
        (self.on_result)(&result);
        self.results.push(result);
    }
}

/// What a case found so far.
#[derive(Debug, Default)]
struct Outcome {
    failed: bool,
    diagnostics: Vec<String>,
    words: Option<WriteReadWords>,
}

impl Outcome {
    fn fail(&mut self, line: String) {
        self.failed = true;
        self.diagnostics.push(line);
    }

    /// Fails with `check`'s description if it found wrong bytes.
    fn check(&mut self, what: &str, check: &Check) {
        if let Some(line) = check.describe(what) {
            self.fail(line);
        }
    }

    /// Fails unless `got == want`.
    fn expect_u64(&mut self, what: &str, got: u64, want: u64) {
        if got != want {
            self.fail(format!("{what}: got {got:#018x}, want {want:#018x}"));
        }
    }
}

/// Which registered buffer a local SGE is in.
#[derive(Debug, Clone, Copy)]
enum Buf {
    Local,
    Target,
}

/// One MTU's run: the device, both registered buffers and the QPs.
struct Run<'c, 't, 'l> {
    cfg: &'c Config,
    mtu: PathMtu,
    // Field order is drop order: QPs, then MRs, then PD and device.
    ep: Endpoints,
    target: Region<'t>,
    local: Region<'l>,
    dev: Device,
    case_no: u32,
    vram: Option<VramRun>,
}

/// VRAM mode: the GPU and the measuring window of the current case.
struct VramRun {
    gpu: Vram,
    expect: Expect,
    window: Window,
    /// The whole target holding the background, to check the device's
    /// read-back of a migration against at memory speed.
    background: Vec<u8>,
}

/// The measuring window of a case in VRAM mode.
#[derive(Debug)]
enum Window {
    /// Not opened (yet): the case stopped before its RDMA operations.
    Idle,
    /// The target did not get into VRAM, or the counters or the snapshot
    /// could not be read.
    Failed(String),
    /// The target is in VRAM; the counters before the RDMA operations.
    Open(Stats),
    /// Closed after the RDMA operations, before any CPU access to the
    /// target.
    Closed {
        /// Counter changes over the window.
        delta: StatsDelta,
        /// SNAPSHOT of the whole target at the end of the window.
        snapshot: Vec<u8>,
    },
}

impl<'c, 't, 'l> Run<'c, 't, 'l> {
    fn new(
        cfg: &'c Config,
        mtu: PathMtu,
        target: &'t mut [u8],
        local: &'l mut [u8],
    ) -> Result<Self, Error> {
        if target.is_empty() {
            return Err(Error::new("the target buffer is empty"));
        }
        let mut vram = match &cfg.vram {
            Some(mode) => {
                let addr = target.as_ptr() as usize;
                if !addr.is_multiple_of(PAGE_SIZE) || !target.len().is_multiple_of(PAGE_SIZE) {
                    return Err(Error::new(format!(
                        "VRAM mode needs a target of whole pages: {} bytes at {addr:#x}",
                        target.len()
                    )));
                }
                let gpu = Vram::open(&mode.device)
                    .map_err(|err| Error::new(format!("VRAM mode: {err}")))?;
                Some(VramRun {
                    gpu,
                    expect: mode.expect,
                    window: Window::Idle,
                    background: Vec::new(),
                })
            }
            None => None,
        };
        pattern::fill(target, 0, BACKGROUND_SEED);
        if let Some(v) = &mut vram {
            v.background = target.to_vec();
        }
        let dev = Device::open(cfg)?;
        let target = dev
            .register(target, verbs::target_access(cfg.odp))
            .map_err(|err| Error::new(format!("target MR: {err}")))?;
        let local = dev
            .register(local, verbs::local_access())
            .map_err(|err| Error::new(format!("local MR: {err}")))?;
        let ep = dev.connect(mtu)?;
        Ok(Self {
            cfg,
            mtu,
            ep,
            target,
            local,
            dev,
            case_no: 0,
            vram,
        })
    }

    /// Diagnostics for the setup result.
    fn describe(&self) -> Vec<String> {
        let (a, b) = self.ep.qp_numbers();
        let mut lines = self.dev.info().to_vec();
        lines.push(format!(
            "QP A {a:#x} <-> QP B {b:#x}; target {} bytes at {:p}",
            self.target.len(),
            self.target.bytes().as_ptr()
        ));
        if let Some(v) = &self.vram {
            lines.push(format!(
                "VRAM mode: {} (counters {}), expect {}; P2P alias switches: {}",
                v.gpu.device().display(),
                v.gpu.stats_file().display(),
                v.expect,
                vram::p2p_alias_state()
            ));
        }
        lines
    }

    fn all_cases(&mut self, sink: &mut Sink<'_>) -> Result<(), Error> {
        let size = self.target.len();
        for span in cases::write_read_cases(size) {
            let name = format!("write+read offset {} length {}", span.offset, span.len);
            self.case(sink, CaseKind::WriteRead, name, span, |run, seed, out| {
                run.write_read(span, seed, out)
            })?;
        }
        let span = cases::SEND_RECV;
        if span.fits(size) {
            let name = format!(
                "send into target offset {} length {}",
                span.offset, span.len
            );
            self.case(sink, CaseKind::SendRecv, name, span, |run, seed, out| {
                run.send_into_target(span, seed, out)
            })?;
            let name = format!(
                "send from target offset {} length {}",
                span.offset, span.len
            );
            self.case(sink, CaseKind::SendRecv, name, span, |run, seed, out| {
                run.send_from_target(span, seed, out)
            })?;
        }
        let span = cases::WRITE_IMM;
        if span.fits(size) {
            let name = format!(
                "write with immediate offset {} length {}",
                span.offset, span.len
            );
            self.case(sink, CaseKind::WriteImm, name, span, |run, seed, out| {
                run.write_imm(span, seed, out)
            })?;
        }
        for offset in cases::atomic_offsets(size) {
            let span = Span { offset, len: 8 };
            let name = format!("atomic fetch-add offset {offset}");
            self.case(sink, CaseKind::Atomic, name, span, |run, _, out| {
                run.fetch_add(offset, out)
            })?;
            let name = format!("atomic compare-swap offset {offset}");
            self.case(sink, CaseKind::Atomic, name, span, |run, seed, out| {
                run.compare_swap(offset, seed, out)
            })?;
        }
        Ok(())
    }

    /// Runs one case that may write target `span`, emits its result, and
    /// restores the background around `span`. After a failed work request
    /// the QPs are replaced first, so nothing is still writing; failing to
    /// replace them is the `Err`.
    fn case<F>(
        &mut self,
        sink: &mut Sink<'_>,
        kind: CaseKind,
        name: String,
        span: Span,
        body: F,
    ) -> Result<(), Error>
    where
        F: FnOnce(&mut Self, u32, &mut Outcome) -> Result<(), OpError>,
    {
        self.case_no += 1;
        // Nonzero, so never the background; distinct per case and MTU.
        let seed = (self.mtu.bytes() as u32) << 16 | self.case_no;
        let mut out = Outcome::default();
        if let Some(v) = &mut self.vram {
            v.window = Window::Idle;
        }
        let op_failed = match body(self, seed, &mut out) {
            Ok(()) => false,
            Err(err) => {
                out.fail(err.to_string());
                true
            }
        };
        // A failed work request ends the case before its CPU checks: the
        // target is as the RDMA operations left it.
        self.end_window();
        let name = format!("mtu {}: {name}", self.mtu);
        let vram_result = self.vram_result(&name, span);
        sink.emit(TestResult {
            name,
            kind,
            mtu: Some(self.mtu),
            passed: !out.failed,
            diagnostics: out.diagnostics,
            words: out.words,
            vram: None,
        });
        if let Some(result) = vram_result {
            sink.emit(result);
        }
        if op_failed {
            self.ep = self.dev.connect(self.mtu)?;
        }
        let window = self.guard_window(span);
        pattern::fill_range(self.target.bytes_mut(), window, BACKGROUND_SEED);
        Ok(())
    }

    fn guard_window(&self, span: Span) -> Range<usize> {
        span.guarded(self.cfg.guard, self.target.len())
    }

    fn wr_id(&self, tag: u8) -> u64 {
        u64::from(self.case_no) << 8 | u64::from(tag)
    }

    /// Posts `op` on `side` with `len` bytes of `buf` at `offset` as the
    /// local buffer, and waits for its send completion.
    fn post_and_wait(
        &mut self,
        side: Side,
        tag: u8,
        op: SendOp,
        (buf, offset, len): (Buf, usize, usize),
    ) -> Result<Completion, OpError> {
        let wr_id = self.wr_id(tag);
        let region = match buf {
            Buf::Local => &self.local,
            Buf::Target => &self.target,
        };
        self.ep
            .post_send(side, wr_id, op, region.sge(offset, len)?)?;
        let expected = Expected {
            op: op.name(),
            wr_id,
            opcode: op.completion_opcode(),
            byte_len: None,
        };
        self.ep.wait(side, Queue::Send, &expected, self.cfg.timeout)
    }

    /// Waits for `side`'s receive completion of `len` bytes.
    fn wait_recv(
        &self,
        side: Side,
        opcode: WorkCompletionOperationType,
        len: usize,
    ) -> Result<Completion, OpError> {
        let expected = Expected {
            op: if opcode == WorkCompletionOperationType::ReceiveWithImmediate {
                "RECV of RDMA WRITE with immediate"
            } else {
                "RECV"
            },
            wr_id: self.wr_id(tag::RECV),
            opcode,
            byte_len: Some(u32::try_from(len).unwrap_or(u32::MAX)),
        };
        self.ep.wait(side, Queue::Recv, &expected, self.cfg.timeout)
    }

    /// Fills the local source for `span` with `seed`'s pattern.
    fn fill_source(&mut self, span: Span, seed: u32) -> usize {
        let src = LAYOUT.source(span);
        pattern::fill(
            &mut self.local.bytes_mut()[src..src + span.len],
            span.offset,
            seed,
        );
        src
    }

    /// Zeroes the whole local sink region.
    fn clear_sink(&mut self) {
        self.local.bytes_mut()[LAYOUT.sink_base()..LAYOUT.atomic_result()].fill(0);
    }

    /// Checks the sink bytes around `span`'s sink range are still zero.
    fn check_sink_slack(&self, span: Span, out: &mut Outcome) {
        let local = self.local.bytes();
        let (base, start, end) = (
            LAYOUT.sink_base(),
            LAYOUT.sink(span),
            LAYOUT.sink(span) + span.len,
        );
        let mut slack = pattern::check_zero(&local[base..start], base);
        slack.merge(pattern::check_zero(
            &local[end..LAYOUT.atomic_result()],
            end,
        ));
        out.check(
            "local sink bytes outside the received range (local offsets)",
            &slack,
        );
    }

    /// Checks the guard bytes around `span` through the CPU.
    fn check_guard(&self, span: Span, out: &mut Outcome) {
        let bytes = self.target.bytes();
        let window = self.guard_window(span);
        let mut check = pattern::check(
            &bytes[window.start..span.offset],
            window.start,
            BACKGROUND_SEED,
        );
        check.merge(pattern::check(
            &bytes[span.end()..window.end],
            span.end(),
            BACKGROUND_SEED,
        ));
        out.check(
            "target bytes around the range (must keep the background)",
            &check,
        );
    }

    /// Checks target `span` holds `expect(offset)`: through the CPU, with
    /// the guard bytes, or, without CPU checks, by an RDMA READ of the span.
    fn verify_target(
        &mut self,
        span: Span,
        expect: &dyn Fn(usize) -> u8,
        out: &mut Outcome,
    ) -> Result<(), OpError> {
        if self.cfg.cpu_check {
            let bytes = &self.target.bytes()[span.offset..span.end()];
            out.check(
                "target (CPU view)",
                &pattern::check_with(bytes, span.offset, expect),
            );
            self.check_guard(span, out);
        } else {
            self.clear_sink();
            let sink = LAYOUT.sink(span);
            let op = SendOp::Read(self.target.remote(span.offset, span.len)?);
            self.post_and_wait(Side::A, tag::VERIFY, op, (Buf::Local, sink, span.len))?;
            let bytes = &self.local.bytes()[sink..sink + span.len];
            out.check(
                "target (RDMA READ back)",
                &pattern::check_with(bytes, span.offset, expect),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
