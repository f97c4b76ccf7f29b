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
                "VRAM mode: {} (counters {}), expect {}; ib_core.odp_p2p_alias {}",
                v.gpu.device().display(),
                v.gpu.stats_file().display(),
                v.expect,
                vram::odp_p2p_alias_param().unwrap_or_else(|| "not present".to_owned())
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

    /// VRAM mode, once the CPU has prepared the target for a case: moves
    /// the whole target into VRAM, checks the device's read-back of it
    /// (background, and `prepared`'s pattern where the case wrote one), and
    /// reads the counters. Nothing touches the target with the CPU from here
    /// to [`end_window`](Self::end_window).
    fn begin_window(&mut self, prepared: Option<(Span, u32)>, out: &mut Outcome) {
        let Some(v) = &mut self.vram else {
            return;
        };
        let expect = |at: usize| match prepared {
            Some((span, seed)) if (span.offset..span.end()).contains(&at) => {
                pattern::pattern_byte(at, seed)
            }
            _ => pattern::pattern_byte(at, BACKGROUND_SEED),
        };
        let mut readback = Check::default();
        let background = &v.background;
        let migrated = v
            .gpu
            .migrate_to_dev(self.target.bytes(), &mut |offset, bytes| {
                let end = offset + bytes.len();
                let prepared_here =
                    prepared.is_some_and(|(span, _)| span.offset < end && offset < span.end());
                if prepared_here || background.get(offset..end) != Some(bytes) {
                    readback.merge(pattern::check_with(bytes, offset, expect));
                } else {
                    // Whole pages: no word straddles the chunk.
                    readback.merge(Check {
                        bytes: bytes.len(),
                        words: WordStats {
                            wrong: 0,
                            total: bytes.len() as u64 / 4,
                        },
                        ..Check::default()
                    });
                }
            });
        if let Err(err) = migrated {
            out.fail(format!("vram: {err}"));
            v.window = Window::Failed(format!("the target did not get into VRAM: {err}"));
            return;
        }
        out.check(
            "vram: the device's read-back of the target after MIGRATE_TO_DEV",
            &readback,
        );
        v.window = match v.gpu.stats() {
            Ok(before) => Window::Open(before),
            Err(err) => Window::Failed(err),
        };
    }

    /// VRAM mode, after the RDMA operations of a case and before any CPU
    /// access to the target: reads the counters again and snapshots where
    /// the target's pages are. Does nothing unless the window is open.
    fn end_window(&mut self) {
        let Some(v) = &mut self.vram else {
            return;
        };
        let Window::Open(before) = v.window else {
            return;
        };
        let after = v.gpu.stats();
        let snapshot = v.gpu.snapshot(self.target.bytes());
        v.window = match (after, snapshot) {
            (Ok(after), Ok(snapshot)) => Window::Closed {
                delta: after.since(&before),
                snapshot,
            },
            (Err(err), _) | (_, Err(err)) => Window::Failed(err),
        };
    }

    /// Whether the CPU must keep off the target until the RDMA operations
    /// of the case are done.
    fn in_vram_mode(&self) -> bool {
        self.vram.is_some()
    }

    /// VRAM mode: the result of the case's window, named after the case.
    fn vram_result(&mut self, case: &str, span: Span) -> Option<TestResult> {
        let v = self.vram.as_mut()?;
        let window = std::mem::replace(&mut v.window, Window::Idle);
        let name = format!(
            "{case}: {}",
            match v.expect {
                Expect::Alias => "stayed in VRAM",
                Expect::Migrate => "migrated to RAM",
                Expect::Coherent => "stayed in coherent VRAM",
            }
        );
        let mut result = TestResult {
            name,
            kind: CaseKind::Vram,
            mtu: Some(self.mtu),
            passed: false,
            diagnostics: Vec::new(),
            words: None,
            vram: None,
        };
        match window {
            Window::Idle => result
                .diagnostics
                .push("vram: not measured: the case stopped before its RDMA operations".into()),
            Window::Failed(err) => result
                .diagnostics
                .push(format!("vram: not measured: {err}")),
            Window::Open(_) => result
                .diagnostics
                .push("vram: not measured: the window was left open".into()),
            Window::Closed { delta, snapshot } => {
                let touched = vram::page_span(span.offset, span.len);
                let (passed, diagnostics) = vram_verdict(v.expect, &delta, &snapshot, touched);
                result.passed = passed;
                result.diagnostics = diagnostics;
                result.vram = Some(delta);
            }
        }
        Some(result)
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

    /// RDMA WRITE local -> target, check the target, RDMA READ it back into
    /// a zeroed sink, check the sink.
    fn write_read(&mut self, span: Span, seed: u32, out: &mut Outcome) -> Result<(), OpError> {
        let src = self.fill_source(span, seed);
        self.clear_sink();
        let remote = self.target.remote(span.offset, span.len)?;
        let mut words = WriteReadWords::default();
        // In VRAM mode the CPU looks at the target only after the READ too.
        let check_between = self.cfg.cpu_check && !self.in_vram_mode();
        self.begin_window(None, out);

        self.post_and_wait(
            Side::A,
            tag::WRITE,
            SendOp::Write(remote),
            (Buf::Local, src, span.len),
        )?;
        if check_between {
            words.write = self.check_written(span, seed, out);
        }
        out.words = Some(words);

        let sink = LAYOUT.sink(span);
        self.post_and_wait(
            Side::A,
            tag::READ,
            SendOp::Read(remote),
            (Buf::Local, sink, span.len),
        )?;
        self.end_window();
        if self.cfg.cpu_check && !check_between {
            words.write = self.check_written(span, seed, out);
        }
        let check = pattern::check(
            &self.local.bytes()[sink..sink + span.len],
            span.offset,
            seed,
        );
        words.read = check.words;
        out.words = Some(words);
        out.check("read back", &check);
        self.check_sink_slack(span, out);
        Ok(())
    }

    /// Checks through the CPU that target `span` holds `seed`'s pattern and
    /// the bytes around it the background; returns the span's word counts.
    fn check_written(&self, span: Span, seed: u32, out: &mut Outcome) -> WordStats {
        let bytes = &self.target.bytes()[span.offset..span.end()];
        let check = pattern::check(bytes, span.offset, seed);
        out.check("write (CPU view of target)", &check);
        self.check_guard(span, out);
        check.words
    }

    /// B receives into the target (ODP MR as receive buffer), A sends from
    /// local memory.
    fn send_into_target(
        &mut self,
        span: Span,
        seed: u32,
        out: &mut Outcome,
    ) -> Result<(), OpError> {
        let src = self.fill_source(span, seed);
        self.begin_window(None, out);
        let recv_id = self.wr_id(tag::RECV);
        self.ep.post_recv(
            Side::B,
            recv_id,
            Some(self.target.sge(span.offset, span.len)?),
        )?;
        self.post_and_wait(
            Side::A,
            tag::SEND,
            SendOp::Send,
            (Buf::Local, src, span.len),
        )?;
        self.wait_recv(Side::B, WorkCompletionOperationType::Receive, span.len)?;
        self.end_window();
        self.verify_target(span, &|at| pattern::pattern_byte(at, seed), out)
    }

    /// B sends from the target (ODP MR as send source), A receives into
    /// local memory.
    fn send_from_target(
        &mut self,
        span: Span,
        seed: u32,
        out: &mut Outcome,
    ) -> Result<(), OpError> {
        pattern::fill_range(self.target.bytes_mut(), span.offset..span.end(), seed);
        self.clear_sink();
        self.begin_window(Some((span, seed)), out);
        let sink = LAYOUT.sink(span);
        let recv_id = self.wr_id(tag::RECV);
        self.ep
            .post_recv(Side::A, recv_id, Some(self.local.sge(sink, span.len)?))?;
        self.post_and_wait(
            Side::B,
            tag::SEND,
            SendOp::Send,
            (Buf::Target, span.offset, span.len),
        )?;
        self.wait_recv(Side::A, WorkCompletionOperationType::Receive, span.len)?;
        self.end_window();
        let check = pattern::check(
            &self.local.bytes()[sink..sink + span.len],
            span.offset,
            seed,
        );
        out.check("received (local sink)", &check);
        self.check_sink_slack(span, out);
        Ok(())
    }

    /// RDMA WRITE with immediate local -> target; B's receive completion
    /// must carry the immediate data.
    fn write_imm(&mut self, span: Span, seed: u32, out: &mut Outcome) -> Result<(), OpError> {
        let src = self.fill_source(span, seed);
        self.begin_window(None, out);
        let recv_id = self.wr_id(tag::RECV);
        self.ep.post_recv(Side::B, recv_id, None)?;
        let op = SendOp::WriteImm(self.target.remote(span.offset, span.len)?, IMM_DATA);
        self.post_and_wait(Side::A, tag::WRITE, op, (Buf::Local, src, span.len))?;
        let recv = self.wait_recv(
            Side::B,
            WorkCompletionOperationType::ReceiveWithImmediate,
            span.len,
        )?;
        self.end_window();
        if recv.imm_data != Some(IMM_DATA) {
            out.fail(format!(
                "immediate data {:x?}, want {IMM_DATA:#x}",
                recv.imm_data
            ));
        }
        self.verify_target(span, &|at| pattern::pattern_byte(at, seed), out)
    }

    /// Presets the local atomic result slot to a value no atomic returns.
    fn preset_result(&mut self, not: u64) -> usize {
        let at = LAYOUT.atomic_result();
        self.local.bytes_mut()[at..at + 8].copy_from_slice(&(!not).to_ne_bytes());
        at
    }

    /// The value an atomic returned into the local result slot.
    fn atomic_result(&self) -> u64 {
        read_u64(self.local.bytes(), LAYOUT.atomic_result())
    }

    /// Fetch-and-add on the background word at `offset`: returns the old
    /// value and leaves the sum.
    fn fetch_add(&mut self, offset: usize, out: &mut Outcome) -> Result<(), OpError> {
        let old = background_u64(offset);
        let new = old.wrapping_add(FETCH_ADD);
        let slot = self.preset_result(old);
        self.begin_window(None, out);
        let op = SendOp::FetchAdd(self.target.remote(offset, 8)?, FETCH_ADD);
        self.post_and_wait(Side::A, tag::ATOMIC, op, (Buf::Local, slot, 8))?;
        self.end_window();
        out.expect_u64("fetch-add returned", self.atomic_result(), old);
        let span = Span { offset, len: 8 };
        self.verify_target(span, &|at| new.to_ne_bytes()[at - offset], out)
    }

    /// Compare-and-swap on the background word at `offset`: a matching
    /// compare swaps, a stale one does not; both return the old value.
    fn compare_swap(&mut self, offset: usize, seed: u32, out: &mut Outcome) -> Result<(), OpError> {
        let old = background_u64(offset);
        let swap = pattern::pattern_u64(offset, seed);
        let remote = self.target.remote(offset, 8)?;

        let slot = self.preset_result(old);
        self.begin_window(None, out);
        let op = SendOp::CompareSwap {
            remote,
            compare: old,
            swap,
        };
        self.post_and_wait(Side::A, tag::ATOMIC, op, (Buf::Local, slot, 8))?;
        out.expect_u64("matching compare-swap returned", self.atomic_result(), old);

        let slot = self.preset_result(swap);
        let op = SendOp::CompareSwap {
            remote,
            compare: old,
            swap: !swap,
        };
        self.post_and_wait(Side::A, tag::ATOMIC, op, (Buf::Local, slot, 8))?;
        self.end_window();
        out.expect_u64("stale compare-swap returned", self.atomic_result(), swap);

        let span = Span { offset, len: 8 };
        self.verify_target(span, &|at| swap.to_ne_bytes()[at - offset], out)
    }
}

/// The background pattern's native-endian word at `offset`, as atomics see
/// it in memory.
fn background_u64(offset: usize) -> u64 {
    let mut bytes = [0; 8];
    pattern::fill(&mut bytes, offset, BACKGROUND_SEED);
    u64::from_ne_bytes(bytes)
}

/// The native-endian `u64` at `buf[offset..offset + 8]`.
fn read_u64(buf: &[u8], offset: usize) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&buf[offset..offset + 8]);
    u64::from_ne_bytes(bytes)
}

/// Judges a case's VRAM window: the counter changes over its RDMA
/// operations and the SNAPSHOT of the target after them, of which the case
/// touched the pages `touched`. Returns the verdict and its diagnostics, the
/// first line always `vram: migrated_to_ram +M, alias_grants +G, resident
/// R/N, touched pages in VRAM T/P`.
fn vram_verdict(
    expect: Expect,
    delta: &StatsDelta,
    snapshot: &[u8],
    touched: RangeInclusive<usize>,
) -> (bool, Vec<String>) {
    let touched_bytes = snapshot.get(touched.clone()).unwrap_or(&[]);
    let touched_count = touched.clone().count();
    let touched_in_vram = vram::resident(touched_bytes);
    let mut lines = vec![format!(
        "vram: {delta}, resident {}/{}, touched pages in VRAM {touched_in_vram}/{touched_count}",
        vram::resident(snapshot),
        snapshot.len()
    )];
    let mut passed = true;
    let mut fail = |line: String| {
        passed = false;
        lines.push(line);
    };
    let want_flat = |name: &str, value: i64| {
        (value != 0).then(|| {
            format!("{name} changed by {value:+} during the RDMA operations, want no change")
        })
    };
    let want_up = |name: &str, value: i64| {
        (value <= 0).then(|| {
            format!("{name} changed by {value:+} during the RDMA operations, want an increase")
        })
    };
    let checks = match expect {
        Expect::Alias => [
            want_flat("migrated_to_ram", delta.migrated_to_ram),
            want_up("alias_grants", delta.alias_grants),
        ],
        Expect::Migrate => [
            want_up("migrated_to_ram", delta.migrated_to_ram),
            want_flat("alias_grants", delta.alias_grants),
        ],
        // Coherent pages are mapped as they are: no alias, no migration.
        Expect::Coherent => [
            want_flat("migrated_to_ram", delta.migrated_to_ram),
            want_flat("alias_grants", delta.alias_grants),
        ],
    };
    checks.into_iter().flatten().for_each(&mut fail);
    if expect != Expect::Migrate
        && (touched_bytes.len() != touched_count || touched_in_vram != touched_count)
    {
        let out: Vec<String> = touched
            .zip(
                touched_bytes
                    .iter()
                    .map(Some)
                    .chain(std::iter::repeat(None)),
            )
            .filter(|(_, b)| !b.is_some_and(|&b| vram::in_vram(b)))
            .take(8)
            .map(|(page, b)| match b {
                Some(b) => format!("page {page} ({b:#04x})"),
                None => format!("page {page} (not in the snapshot)"),
            })
            .collect();
        fail(format!(
            "{} of {touched_count} touched target pages left VRAM: {}",
            touched_count - touched_in_vram,
            out.join(", ")
        ));
    }
    (passed, lines)
}

#[cfg(test)]
mod tests;
