// SPDX-License-Identifier: GPL-2.0
//! [`Rig`]: the device, QPs, local buffer and GPU the measurements share,
//! and the targets they measure.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Placement, BENCH_MTU, PMD_SIZE, RDMA_CHUNK};
use crate::config::{Config, Pages};
use crate::mmap::Mmap;
use crate::pattern::{self, Check};
use crate::verbs::{self, Device, Endpoints, Expected, Queue, Region, SendOp, Side};
use crate::vram::{self, AliasSwitch, Vram};

/// The device, QPs, local buffer and GPU the measurements share.
///
/// Open one with [`with_rig`].
pub struct Rig<'a> {
    cfg: &'a Config,
    pub(super) dev: &'a Device,
    // Field order is drop order: QPs before the local MR.
    ep: Endpoints,
    pub(super) local: Region<'a>,
    pub(super) gpu: Vram,
    aliases: AliasSwitch,
    next_wr_id: u64,
}

/// Which way an RDMA transfer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dir {
    /// RDMA WRITE from the local buffer into the target.
    Write,
    /// RDMA READ from the target into the local buffer.
    Read,
}

/// The name of a GPU's device file, e.g. `rvram0`.
pub(super) fn gpu_name(device: &Path) -> String {
    device.file_name().map_or_else(
        || device.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Opens what the measurements need: `cfg.vram`'s GPU, the P2P alias
/// switches, the RDMA device, a local buffer of `local_len` bytes and two
/// QPs at [`BENCH_MTU`]; runs `f` with it. The switches are restored after
/// `f`.
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
    let aliases = AliasSwitch::open()?;
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
        aliases,
        next_wr_id: 0,
    };
    Ok(f(&mut rig))
}

/// A fresh target: PMD aligned, advised for THP or against it.
pub(super) fn new_target(size: usize, pages: Pages) -> Result<Mmap, String> {
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
pub(super) fn huge_mapped(snapshot: &[u8]) -> usize {
    snapshot
        .iter()
        .filter(|&&b| b != 0xff && b & vram::SNAP_PMD != 0)
        .count()
}

/// `check`'s description as a failure line, if it found wrong bytes.
pub(super) fn data_error(errors: &mut Vec<String>, check: &Check, what: &str) {
    if let Some(line) = check.describe(what) {
        errors.push(line);
    }
}

impl Rig<'_> {
    /// The GPU the target goes into.
    pub fn gpu(&self) -> &Vram {
        &self.gpu
    }

    /// Sets the P2P alias switches for `placement`.
    pub(super) fn set_placement(&mut self, placement: Placement) -> Result<(), String> {
        self.aliases.set(placement.p2p_alias())
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
    pub(super) fn transfer(
        &mut self,
        dir: Dir,
        region: &Region<'_>,
        len: usize,
    ) -> Result<Duration, String> {
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
    pub(super) fn timed_migrate(
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
    pub(super) fn place_in_vram(
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_counts() {
        assert_eq!(huge_mapped(&[0x06, 0x26, 0x22, 0xff, 0x02]), 2);
    }
}
