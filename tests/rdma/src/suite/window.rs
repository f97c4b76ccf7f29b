// SPDX-License-Identifier: GPL-2.0
//! A case's VRAM window: the target moved into VRAM before its RDMA
//! operations, the counters read around them, and the verdict on both.

use super::*;

impl Run<'_, '_, '_> {
    /// VRAM mode, once the CPU has prepared the target for a case: moves
    /// the whole target into VRAM, checks the device's read-back of it
    /// (background, and `prepared`'s pattern where the case wrote one), and
    /// reads the counters. Nothing touches the target with the CPU from here
    /// to [`end_window`](Self::end_window).
    pub(super) fn begin_window(&mut self, prepared: Option<(Span, u32)>, out: &mut Outcome) {
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
    pub(super) fn end_window(&mut self) {
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
    pub(super) fn in_vram_mode(&self) -> bool {
        self.vram.is_some()
    }

    /// VRAM mode: the result of the case's window, named after the case.
    pub(super) fn vram_result(&mut self, case: &str, span: Span) -> Option<TestResult> {
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
}

/// Judges a case's VRAM window: the counter changes over its RDMA
/// operations and the SNAPSHOT of the target after them, of which the case
/// touched the pages `touched`. Returns the verdict and its diagnostics, the
/// first line always `vram: migrated_to_ram +M, alias_grants +G, resident
/// R/N, touched pages in VRAM T/P`.
pub(super) fn vram_verdict(
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
