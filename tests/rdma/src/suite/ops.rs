// SPDX-License-Identifier: GPL-2.0
//! The RDMA operations of the cases, each between the two ends of a VRAM
//! window, and the checks of what they wrote.

use super::*;

impl Run<'_, '_, '_> {
    /// RDMA WRITE local -> target, check the target, RDMA READ it back into
    /// a zeroed sink, check the sink.
    pub(super) fn write_read(
        &mut self,
        span: Span,
        seed: u32,
        out: &mut Outcome,
    ) -> Result<(), OpError> {
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
    pub(super) fn check_written(&self, span: Span, seed: u32, out: &mut Outcome) -> WordStats {
        let bytes = &self.target.bytes()[span.offset..span.end()];
        let check = pattern::check(bytes, span.offset, seed);
        out.check("write (CPU view of target)", &check);
        self.check_guard(span, out);
        check.words
    }

    /// B receives into the target (ODP MR as receive buffer), A sends from
    /// local memory.
    pub(super) fn send_into_target(
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
    pub(super) fn send_from_target(
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
    pub(super) fn write_imm(
        &mut self,
        span: Span,
        seed: u32,
        out: &mut Outcome,
    ) -> Result<(), OpError> {
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
    pub(super) fn preset_result(&mut self, not: u64) -> usize {
        let at = LAYOUT.atomic_result();
        self.local.bytes_mut()[at..at + 8].copy_from_slice(&(!not).to_ne_bytes());
        at
    }

    /// The value an atomic returned into the local result slot.
    pub(super) fn atomic_result(&self) -> u64 {
        read_u64(self.local.bytes(), LAYOUT.atomic_result())
    }

    /// Fetch-and-add on the background word at `offset`: returns the old
    /// value and leaves the sum.
    pub(super) fn fetch_add(&mut self, offset: usize, out: &mut Outcome) -> Result<(), OpError> {
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
    pub(super) fn compare_swap(
        &mut self,
        offset: usize,
        seed: u32,
        out: &mut Outcome,
    ) -> Result<(), OpError> {
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
pub(super) fn background_u64(offset: usize) -> u64 {
    let mut bytes = [0; 8];
    pattern::fill(&mut bytes, offset, BACKGROUND_SEED);
    u64::from_ne_bytes(bytes)
}

/// The native-endian `u64` at `buf[offset..offset + 8]`.
pub(super) fn read_u64(buf: &[u8], offset: usize) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&buf[offset..offset + 8]);
    u64::from_ne_bytes(bytes)
}
