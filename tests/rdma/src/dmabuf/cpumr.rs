// SPDX-License-Identifier: GPL-2.0
//! Ordinary MRs (`ibv_reg_mr()`: pinned, and on-demand paging) over the
//! two CPU mappings a GPU user has: the dma-buf's, whose pages are BAR
//! pages without `struct page` (`VM_PFNMAP`), and `/dev/rvramN`'s, whose
//! pages are system pages the driver inserted (`VM_MIXEDMAP`, as
//! lib/test_hmm's).
//!
//! - Over the dma-buf mapping, a pinned MR is refused with `EFAULT` (GUP
//!   does not take `VM_PFNMAP` pages), and an ODP MR registers but never
//!   reaches the BAR: HMM refuses to fault a `VM_PFNMAP` range, so the
//!   NIC's READ and WRITE of it fail with a remote access error and the
//!   buffer is left as it was. The way to RDMA into a dma-buf is a dma-buf
//!   MR.
//! - Over the `/dev/rvramN` mapping, both kinds work like any memory: the
//!   NIC reads what the CPU wrote and the CPU sees what the NIC wrote.

use super::*;

/// Pages of the `/dev/rvramN` mapping.
const GPU_PAGES: usize = 16;

/// Registers `len` bytes at `addr` with `ibv_reg_mr()`: the MR, or the
/// errno.
fn reg(dev: &Device, addr: u64, len: usize, access: AccessFlags) -> Result<Arc<MemoryRegion>, i32> {
    // SAFETY: The caller keeps the mapping at `addr` alive until the MR is
    // dropped; the kernel pins or mirrors it and never frees it.
    unsafe { dev.pd().reg_mr(addr as usize, len, access) }.map_err(|e| match &e.0 {
        RegisterMemoryRegionErrorKind::Ibverbs(io) => io.raw_os_error().unwrap_or(-1),
        _ => -1,
    })
}

/// Both kinds of MR over the dma-buf's CPU mapping (`case.cpu`).
pub(super) fn over_dmabuf_mapping(
    case: &Case<'_>,
    local: &mut Region<'_>,
    mtu: PathMtu,
) -> Result<Vec<String>, String> {
    let access = AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead;
    let addr = case.cpu.addr();
    let mut notes = Vec::new();
    match reg(case.dev, addr, LEN, access) {
        Err(libc::EFAULT) => notes.push("a pinned MR over it: EFAULT".to_owned()),
        Err(e) => return Err(format!("a pinned MR over it: errno {e}, want EFAULT")),
        Ok(_) => return Err("a pinned MR over it: registered".to_owned()),
    }
    let mr = match reg(case.dev, addr, LEN, access | AccessFlags::OnDemand) {
        Ok(mr) => mr,
        Err(e) => return Err(format!("an ODP MR over it: errno {e}")),
    };
    notes.push("an ODP MR over it: registered".to_owned());
    for name in ["READ", "WRITE"] {
        // A failed request leaves the QPs in the error state.
        let mut ep = case.dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
        local.bytes_mut()[..PAGE_SIZE].fill(0xc3);
        let remote = Remote {
            rkey: mr.rkey(),
            addr,
        };
        let op = if name == "READ" {
            SendOp::Read(remote)
        } else {
            SendOp::Write(remote)
        };
        let sge = local.sge(0, PAGE_SIZE).map_err(|e| e.to_string())?;
        match ep.post_and_wait(Side::A, 11, op, sge, case.cfg.timeout) {
            Err(OpError::Status { status, .. }) if status == WC_REM_ACCESS_ERR => notes.push(
                format!("{name} of the ODP MR: {}", verbs::wc_status_name(status)),
            ),
            Err(e) => return Err(format!("{name} of the ODP MR: {e}")),
            Ok(_) => return Err(format!("{name} of the ODP MR completed")),
        }
    }
    drop(mr);
    notes.push(case.cpu_check("after both")?);
    Ok(notes)
}

/// Both kinds of MR over a mapping of `/dev/rvramN` (`gpu`): RDMA READ of
/// what the CPU wrote, RDMA WRITE of what the CPU then reads.
pub(super) fn over_gpu_mapping(
    case: &Case<'_>,
    gpu: &File,
    local: &mut Region<'_>,
    mtu: PathMtu,
) -> Result<Vec<String>, String> {
    let len = GPU_PAGES * PAGE_SIZE;
    let map = CpuMap::new(gpu.as_raw_fd(), len)?;
    let access = AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead;
    let mut notes = Vec::new();
    for (kind, extra, seed) in [
        ("pinned", AccessFlags::none(), 0x6d61_7000),
        ("ODP", AccessFlags::OnDemand, 0x6d61_7001),
    ] {
        let mut cpu = vec![0; len];
        pattern::fill(&mut cpu, 0, seed);
        map.write(&cpu);
        let mr = reg(case.dev, map.addr(), len, access | extra)
            .map_err(|e| format!("a {kind} MR over it: errno {e}"))?;
        let mut ep = case.dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
        local.bytes_mut()[..len].fill(0);
        let remote = Remote {
            rkey: mr.rkey(),
            addr: map.addr(),
        };
        let sge = local.sge(0, len).map_err(|e| e.to_string())?;
        ep.post_and_wait(Side::A, 12, SendOp::Read(remote), sge, case.cfg.timeout)
            .map_err(|e| format!("READ of the {kind} MR: {e}"))?;
        if local.bytes()[..len] != cpu[..] {
            return Err(format!("READ of the {kind} MR: not what the CPU wrote"));
        }
        pattern::fill(&mut local.bytes_mut()[..len], 0, seed ^ 0xff);
        let sge = local.sge(0, len).map_err(|e| e.to_string())?;
        ep.post_and_wait(Side::A, 13, SendOp::Write(remote), sge, case.cfg.timeout)
            .map_err(|e| format!("WRITE of the {kind} MR: {e}"))?;
        if map.read() != local.bytes()[..len] {
            return Err(format!("WRITE of the {kind} MR: the CPU does not see it"));
        }
        notes.push(format!(
            "a {kind} MR over {len} bytes of it: READ returns what the CPU wrote, the CPU sees what WRITE wrote"
        ));
    }
    Ok(notes)
}
