// SPDX-License-Identifier: GPL-2.0
//! `--demo`: the project's story in one run, for people rather than TAP.
//!
//! A buffer is moved into an rvram GPU's VRAM, registered with plain ODP,
//! and written by the NIC (RDMA WRITE from a second QP). rvram's counters
//! and a SNAPSHOT then show where the data is, an RDMA READ checks what
//! the NIC wrote, and finally the CPU reads the buffer, which migrates it
//! back to system RAM, and checks it too.

use std::time::Instant;

use crate::config::Config;
use crate::mmap::Mmap;
use crate::pattern;
use crate::verbs::{self, Device, SendOp, Side};
use crate::vram::{self, Vram};

const SEED: u32 = 0xdec0_de00;

/// Runs the demo on `cfg.vram`'s GPU with a target of `cfg.size` bytes;
/// prints as it goes. Errors say which step failed.
pub fn run_demo(cfg: &Config) -> Result<(), String> {
    let vram_cfg = cfg.vram.as_ref().ok_or("--demo needs --vram /dev/rvramN")?;
    let mtu = *cfg.mtus.first().ok_or("no MTU")?;
    let mut gpu = Vram::open(&vram_cfg.device)?;
    let len = cfg.size;
    let pages = vram::pages(len);
    let alias = vram::odp_p2p_alias_param().unwrap_or_else(|| "?".into());
    println!(
        "{len} bytes ({pages} pages), {} at MTU {mtu}, ib_core.odp_p2p_alias={alias} \
         (rvram counts folios: a 2 MiB folio is one migration or alias grant)",
        cfg.device
    );

    let mut target = Mmap::anonymous(len).map_err(|e| format!("map target: {e}"))?;
    let mut local = Mmap::anonymous(len).map_err(|e| format!("map source: {e}"))?;
    target.as_mut_slice().fill(0);
    gpu.migrate_to_dev(target.as_slice(), &mut |_, _| {})?;
    let snap = gpu.snapshot(target.as_slice())?;
    println!(
        "1. moved into {}: {}/{pages} pages in VRAM",
        vram_cfg.device.display(),
        vram::resident(&snap)
    );

    pattern::fill(local.as_mut_slice(), 0, SEED);
    let before = gpu.stats()?;
    let dev = Device::open(cfg).map_err(|e| format!("open {}: {e}", cfg.device))?;
    let local = dev
        .register(local.as_mut_slice(), verbs::local_access())
        .map_err(|e| format!("register source: {e}"))?;
    let target = dev
        .register(target.as_mut_slice(), verbs::target_access(true))
        .map_err(|e| format!("register target: {e}"))?;
    let mut ep = dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
    // rxe faults the whole MR in when it is registered.
    let delta = gpu.stats()?.since(&before);
    let snap = gpu.snapshot(target.bytes())?;
    println!(
        "2. registered with IBV_ACCESS_ON_DEMAND (rxe maps it at once): \
         {}/{pages} pages still in VRAM; rvram: {delta}",
        vram::resident(&snap)
    );

    let before = gpu.stats()?;
    let t = Instant::now();
    let op = SendOp::Write(target.remote(0, len).map_err(|e| e.to_string())?);
    let sge = local.sge(0, len).map_err(|e| e.to_string())?;
    ep.post_and_wait(Side::A, 1, op, sge, cfg.timeout)
        .map_err(|e| e.to_string())?;
    let took = t.elapsed();
    let delta = gpu.stats()?.since(&before);
    let snap = gpu.snapshot(target.bytes())?;
    println!(
        "3. the NIC wrote all {len} bytes in {:.1} ms: {}/{pages} pages still in VRAM; \
         rvram: {delta}",
        took.as_secs_f64() * 1e3,
        vram::resident(&snap)
    );

    // Read back by the NIC into the (now overwritten) source buffer.
    let mut local = local;
    local.bytes_mut().fill(0);
    let op = SendOp::Read(target.remote(0, len).map_err(|e| e.to_string())?);
    let sge = local.sge(0, len).map_err(|e| e.to_string())?;
    ep.post_and_wait(Side::A, 2, op, sge, cfg.timeout)
        .map_err(|e| e.to_string())?;
    if let Some(why) = pattern::check(local.bytes(), 0, SEED).describe("RDMA READ back") {
        return Err(why);
    }
    println!("4. RDMA READ back: every byte as written");

    let before = gpu.stats()?;
    if let Some(why) = pattern::check(target.bytes(), 0, SEED).describe("CPU read") {
        return Err(why);
    }
    let delta = gpu.stats()?.since(&before);
    println!(
        "5. the CPU reads it (its faults bring it back to RAM): every byte right; rvram: {delta}"
    );
    Ok(())
}
