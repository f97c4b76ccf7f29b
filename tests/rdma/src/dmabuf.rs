// SPDX-License-Identifier: GPL-2.0
//! RDMA to and from a VRAM buffer object registered as a dma-buf MR.
//!
//! rvram exports VRAM buffer objects as dma-bufs (`RVRAM_IOCTL_ALLOC_DMABUF`
//! on `/dev/rvramN`). Here one is registered with `ibv_reg_dmabuf_mr()` on
//! Soft-RoCE, which imports it through a kernel mapping of the BAR and
//! copies with the CPU, and used in both roles:
//!
//! - as the target of RDMA WRITE and READ (its rkey), at whole-buffer and
//!   unaligned offsets;
//! - as the local buffer of an RDMA READ from, and an RDMA WRITE to, an MR
//!   in system RAM (its lkey);
//! - as the target of atomic fetch-and-add and compare-and-swap (a matching
//!   and a stale compare), whose old values come back to the requester, and
//!   of a misaligned fetch-and-add, which the responder refuses
//!   (`IBV_WC_REM_INV_REQ_ERR`) without touching the buffer.
//!
//! Every byte is checked twice: through the NIC, and with the CPU through
//! an `mmap()` of the dma-buf, which maps the BAR pages themselves, so the
//! data must be in VRAM. rvram's counters must show no page moved between
//! VRAM and RAM. Bad registrations (a range past the buffer, a file that
//! is no dma-buf) get their errnos, and so does `ibv_advise_mr()`
//! prefetch of the MR, which is not ODP: `ENOENT` for every advice, async
//! and `FLUSH` (Linux 7.3 with our dma-buf MRs dereferenced their missing
//! umem; [`crate::prefetch`]). With a PCI address, the GPU is then unbound
//! under the live MR: the exporter revokes the buffer, and later WRITEs,
//! READs and atomics of the MR must fail with a remote access error instead
//! of reaching a BAR the driver gave up, and a prefetch still gets `ENOENT`; the MR and
//! buffer are then released and the GPU bound again.
//!
//! rdma-core's rxe provider (as of rdma-core 44, Debian bookworm's) has no
//! `reg_dmabuf_mr` method, so `ibv_reg_dmabuf_mr()` fails in user space
//! with `EOPNOTSUPP` before reaching the kernel. The test then issues the
//! provider's part itself: `ibv_cmd_reg_dmabuf_mr()`, the uverbs command
//! every provider with dma-buf MRs sends, into a `verbs_mr` that the
//! provider's `dereg_mr` releases as its own. Which path was taken is
//! reported.

use std::ffi::{c_int, c_void, CStr};
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

use sideway::ibverbs::memory_region::{
    MemoryRegion, RegisterMemoryRegionError, RegisterMemoryRegionErrorKind,
};
use sideway::ibverbs::AccessFlags;

use crate::advise::IbvSge;
use crate::config::{Config, PathMtu, PAGE_SIZE};
use crate::mmap::Mmap;
use crate::pattern;
use crate::prefetch;
use crate::report::TestResult;
use crate::unbind;
use crate::verbs::{self, Device, OpError, Region, Remote, SendOp, Sge, Side};
use crate::vram::Vram;

mod cpumr;
mod mr;

use mr::{alloc_dmabuf, rvram_dmabufs, CpuMap, DmabufMr};

/// Pages of the buffer object.
const PAGES: usize = 64;
/// Bytes of the buffer object.
const LEN: usize = PAGES * PAGE_SIZE;
/// Where the MR's first byte appears to the NIC: any IOVA works.
const IOVA: u64 = 0x7e57_0000_0000;
/// `IBV_WC_LOC_PROT_ERR`.
const WC_LOC_PROT_ERR: u32 = 4;
/// `IBV_WC_REM_INV_REQ_ERR`.
const WC_REM_INV_REQ_ERR: u32 = 9;
/// `IBV_WC_REM_ACCESS_ERR`.
const WC_REM_ACCESS_ERR: u32 = 10;

/// One case's state: the buffer object, its CPU mapping, the NIC.
struct Case<'a> {
    cfg: &'a Config,
    dev: &'a Device,
    cpu: CpuMap,
    /// What the buffer must hold.
    model: Vec<u8>,
}

impl Case<'_> {
    /// Checks the buffer through the CPU mapping against the model.
    fn cpu_check(&self, what: &str) -> Result<String, String> {
        let got = self.cpu.read();
        let bad = got.iter().zip(&self.model).filter(|(a, b)| a != b).count();
        if bad == 0 {
            Ok(format!(
                "{what}: the CPU mapping of the buffer (its BAR pages) holds every byte, {LEN} checked"
            ))
        } else {
            let first = got.iter().zip(&self.model).position(|(a, b)| a != b);
            Err(format!(
                "{what}: {bad} of {LEN} bytes of the buffer differ (first at {first:?})"
            ))
        }
    }

    /// At `mtu`: WRITEs into and READs out of the dma-buf MR, then uses it
    /// as the local buffer against an MR in RAM.
    fn traffic(
        &mut self,
        mtu: PathMtu,
        mr: &DmabufMr<'_>,
        local: &mut Region<'_>,
        ram: &mut Region<'_>,
    ) -> Result<Vec<String>, String> {
        let timeout = self.cfg.timeout;
        let mut ep = self.dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
        let mut notes = Vec::new();
        let seed = 0xd3ab_0000 ^ mtu.bytes() as u32;
        // The whole buffer, then an unaligned range across a page boundary.
        for (offset, len, seed) in [(0, LEN, seed), (PAGE_SIZE - 3, 5000, seed ^ 0x55)] {
            pattern::fill(&mut local.bytes_mut()[..len], offset, seed);
            let op = SendOp::Write(mr.remote(offset, len).map_err(|e| e.to_string())?);
            let sge = local.sge(0, len).map_err(|e| e.to_string())?;
            ep.post_and_wait(Side::A, 1, op, sge, timeout)
                .map_err(|e| format!("WRITE of {len} bytes at {offset}: {e}"))?;
            self.model[offset..offset + len].copy_from_slice(&local.bytes()[..len]);
            notes.push(self.cpu_check(&format!("WRITE of {len} bytes at {offset}"))?);
            let sink = LEN;
            local.bytes_mut()[sink..sink + len].fill(0);
            let op = SendOp::Read(mr.remote(offset, len).map_err(|e| e.to_string())?);
            let sge = local.sge(sink, len).map_err(|e| e.to_string())?;
            ep.post_and_wait(Side::A, 2, op, sge, timeout)
                .map_err(|e| format!("READ of {len} bytes at {offset}: {e}"))?;
            if local.bytes()[sink..sink + len] != self.model[offset..offset + len] {
                return Err(format!("READ of {len} bytes at {offset}: data differs"));
            }
            notes.push(format!(
                "READ of {len} bytes at {offset}: every byte as written"
            ));
        }
        // The dma-buf MR as the local buffer: READ from RAM into it, then
        // WRITE from it back to RAM.
        let (offset, len) = (3 * PAGE_SIZE + 1, 6 * PAGE_SIZE);
        pattern::fill(&mut ram.bytes_mut()[..len], offset, seed ^ 0xaa);
        let op = SendOp::Read(ram.remote(0, len).map_err(|e| e.to_string())?);
        let sge = mr.sge(offset, len).map_err(|e| e.to_string())?;
        ep.post_and_wait(Side::A, 3, op, sge, timeout)
            .map_err(|e| format!("READ from RAM into the dma-buf MR: {e}"))?;
        self.model[offset..offset + len].copy_from_slice(&ram.bytes()[..len]);
        notes.push(self.cpu_check(&format!(
            "READ of {len} bytes from RAM into the dma-buf MR at {offset}"
        ))?);
        ram.bytes_mut()[len..2 * len].fill(0);
        let op = SendOp::Write(ram.remote(len, len).map_err(|e| e.to_string())?);
        let sge = mr.sge(offset, len).map_err(|e| e.to_string())?;
        ep.post_and_wait(Side::A, 4, op, sge, timeout)
            .map_err(|e| format!("WRITE from the dma-buf MR to RAM: {e}"))?;
        if ram.bytes()[len..2 * len] != self.model[offset..offset + len] {
            return Err("WRITE from the dma-buf MR to RAM: data differs".to_owned());
        }
        notes.push(format!(
            "WRITE of {len} bytes from the dma-buf MR at {offset} to RAM: every byte right"
        ));
        notes.extend(self.atomics(&mut ep, mr, local, seed)?);
        Ok(notes)
    }

    /// Fetch-and-add, then a matching and a stale compare-and-swap, on a
    /// word of the dma-buf MR: each returns the old word to the requester,
    /// and the CPU mapping shows what each left.
    fn atomics(
        &mut self,
        ep: &mut verbs::Endpoints,
        mr: &DmabufMr<'_>,
        local: &mut Region<'_>,
        seed: u32,
    ) -> Result<Vec<String>, String> {
        let timeout = self.cfg.timeout;
        // A word in the second page; the result lands past the buffer
        // copies in the local region.
        let offset = PAGE_SIZE + 8 * (seed as usize % 64);
        let slot = 2 * LEN - 8;
        let word =
            |m: &[u8]| u64::from_ne_bytes(m[offset..offset + 8].try_into().expect("8 bytes"));
        let mut atomic = |op: SendOp, tag: u64| -> Result<u64, String> {
            local.bytes_mut()[slot..slot + 8].fill(0xee);
            let sge = local.sge(slot, 8).map_err(|e| e.to_string())?;
            ep.post_and_wait(Side::A, tag, op, sge, timeout)
                .map_err(|e| format!("{} at {offset}: {e}", op.name()))?;
            Ok(u64::from_ne_bytes(
                local.bytes()[slot..slot + 8].try_into().expect("8 bytes"),
            ))
        };
        let remote = mr.remote(offset, 8).map_err(|e| e.to_string())?;
        let mut notes = Vec::new();

        let old = word(&self.model);
        let add = 0x1_0000_0001 ^ u64::from(seed);
        let got = atomic(SendOp::FetchAdd(remote, add), 5)?;
        if got != old {
            return Err(format!(
                "fetch-and-add returned {got:#x}, the word held {old:#x}"
            ));
        }
        let new = old.wrapping_add(add);
        self.model[offset..offset + 8].copy_from_slice(&new.to_ne_bytes());
        notes.push(self.cpu_check(&format!(
            "fetch-and-add of {add:#x} at {offset} returned {old:#x}"
        ))?);

        let swap = !new;
        let op = SendOp::CompareSwap {
            remote,
            compare: new,
            swap,
        };
        let got = atomic(op, 6)?;
        if got != new {
            return Err(format!(
                "matching compare-and-swap returned {got:#x}, want {new:#x}"
            ));
        }
        self.model[offset..offset + 8].copy_from_slice(&swap.to_ne_bytes());
        notes.push(self.cpu_check(&format!("matching compare-and-swap at {offset} swapped"))?);

        let op = SendOp::CompareSwap {
            remote,
            compare: new,
            swap: 0,
        };
        let got = atomic(op, 7)?;
        if got != swap {
            return Err(format!(
                "stale compare-and-swap returned {got:#x}, want {swap:#x}"
            ));
        }
        notes.push(self.cpu_check(&format!("stale compare-and-swap at {offset} left the word"))?);

        // A fetch-and-add on a word that is not 8-byte aligned: the
        // responder refuses it (IBA A19.4.2), the word and its neighbours
        // stay as they were. It leaves the QPs in the error state, so it
        // comes last.
        let remote = mr.remote(offset + 4, 8).map_err(|e| e.to_string())?;
        match atomic(SendOp::FetchAdd(remote, 1), 8) {
            Err(e) if e.contains(verbs::wc_status_name(WC_REM_INV_REQ_ERR)) => {}
            Err(e) => return Err(format!("misaligned fetch-and-add: {e}")),
            Ok(got) => {
                return Err(format!(
                    "misaligned fetch-and-add at {} completed, returning {got:#x}",
                    offset + 4
                ))
            }
        }
        notes.push(self.cpu_check(&format!(
            "misaligned fetch-and-add at {}: IBV_WC_REM_INV_REQ_ERR",
            offset + 4
        ))?);
        Ok(notes)
    }
}

/// Expects a registration to fail with `errno`.
fn refused(
    dev: &Device,
    fd: RawFd,
    offset: u64,
    len: usize,
    access: AccessFlags,
    errno: i32,
    what: &str,
) -> Result<String, String> {
    match DmabufMr::register(dev, fd, offset, len, access) {
        Ok(_) => Err(format!("{what}: registered")),
        Err((Some(e), _)) if e == errno => {
            Ok(format!("{what}: {}", std::io::Error::from_raw_os_error(e)))
        }
        Err((e, why)) => Err(format!("{what}: {why} (errno {e:?}, want {errno})")),
    }
}

/// Runs the dma-buf MR case against the GPU `device` (`/dev/rvramN`),
/// at every `--mtu`; then, given its PCI address, unbinds it under the MR
/// and binds it again. One TAP point per step.
pub fn run_dmabuf(cfg: &Config, device: &Path, gpu: Option<&str>) -> Vec<TestResult> {
    let mtu0 = cfg.mtus[0];
    let mut results = Vec::new();
    let mut point = |name: &str, mtu: PathMtu, r: Result<Vec<String>, String>| {
        let result = TestResult::invalidation(format!("dma-buf MR: {name}"), mtu, r);
        let passed = result.passed;
        results.push(result);
        passed
    };

    // The buffer object, its CPU mapping, and the GPU's counters.
    let setup = (|| {
        let vram = Vram::open(device)?;
        let gpu_file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(device)
            .map_err(|e| format!("open {}: {e}", device.display()))?;
        let baseline = rvram_dmabufs()?;
        let fd = alloc_dmabuf(&gpu_file, LEN)?;
        let cpu = CpuMap::new(fd.as_raw_fd(), LEN)?;
        let dev = Device::open(cfg).map_err(|e| format!("open device: {e}"))?;
        Ok::<_, String>((vram, gpu_file, baseline, fd, cpu, dev))
    })();
    let (vram, gpu_file, baseline, fd, cpu, dev) = match setup {
        Ok(s) => s,
        Err(why) => {
            point(
                "allocate a VRAM buffer object and open the NIC",
                mtu0,
                Err(why),
            );
            return results;
        }
    };
    let before = vram.stats();
    let maps = Mmap::anonymous(2 * LEN).and_then(|l| Ok((l, Mmap::anonymous(2 * LEN)?)));
    let (mut local_buf, mut ram_buf) = match maps {
        Ok(m) => m,
        Err(e) => {
            point("map local buffers", mtu0, Err(e.to_string()));
            return results;
        }
    };
    let regions = dev
        .register(local_buf.as_mut_slice(), verbs::local_access())
        .and_then(|l| {
            Ok((
                l,
                dev.register(ram_buf.as_mut_slice(), verbs::target_access(false))?,
            ))
        });
    let (mut local, mut ram) = match regions {
        Ok(r) => r,
        Err(e) => {
            point("register local buffers", mtu0, Err(e.to_string()));
            return results;
        }
    };

    let access = AccessFlags::LocalWrite
        | AccessFlags::RemoteWrite
        | AccessFlags::RemoteRead
        | AccessFlags::RemoteAtomic;
    let raw = fd.as_raw_fd();
    let mr = match DmabufMr::register(&dev, raw, 0, LEN, access) {
        Ok((mr, note)) => {
            let (lkey, rkey) = mr.keys();
            point(
                &format!("register {LEN} bytes of VRAM with ibv_reg_dmabuf_mr"),
                mtu0,
                Ok(vec![
                    note,
                    format!("lkey {lkey:#x} rkey {rkey:#x} at IOVA {IOVA:#x}"),
                ]),
            );
            mr
        }
        Err((_, why)) => {
            point(
                &format!("register {LEN} bytes of VRAM with ibv_reg_dmabuf_mr"),
                mtu0,
                Err(why),
            );
            return results;
        }
    };

    let null = File::open("/dev/null").map_err(|e| e.to_string());
    let bad = null.and_then(|null| {
        Ok(vec![
            refused(
                &dev,
                raw,
                PAGE_SIZE as u64,
                LEN,
                access,
                libc::EINVAL,
                "a range past the end of the buffer",
            )?,
            refused(
                &dev,
                null.as_raw_fd(),
                0,
                LEN,
                access,
                libc::EINVAL,
                "a file that is not a dma-buf",
            )?,
        ])
    });
    point("bad registrations are refused", mtu0, bad);
    point(
        "ibv_advise_mr prefetch of the MR, every advice, async and FLUSH: ENOENT (not an ODP MR)",
        mtu0,
        mr.prefetch_refused(&dev),
    );

    // The buffer starts out zeroed (rvram clears VRAM before export).
    let mut case = Case {
        cfg,
        dev: &dev,
        cpu,
        model: vec![0; LEN],
    };
    point(
        "ibv_reg_mr over the dma-buf's CPU mapping: a pinned MR gets EFAULT, an ODP MR never reaches the BAR",
        mtu0,
        cpumr::over_dmabuf_mapping(&case, &mut local, mtu0),
    );
    point(
        "ibv_reg_mr over a mapping of the GPU's file: pinned and ODP MRs carry the data both ways",
        mtu0,
        cpumr::over_gpu_mapping(&case, &gpu_file, &mut local, mtu0),
    );
    let mut all_ok = true;
    for &mtu in &cfg.mtus {
        let r = case.traffic(mtu, &mr, &mut local, &mut ram);
        all_ok &= point(
            &format!("mtu {mtu}: RDMA WRITE, READ and atomics on VRAM through the MR, every byte checked by the NIC and the CPU"),
            mtu,
            r,
        );
    }
    if all_ok {
        let moved = vram.stats().and_then(|after| {
            let before = before.clone()?;
            let d = after.since(&before);
            if d.migrated_to_vram == 0
                && d.migrated_to_ram == 0
                && d.pages_to_vram == 0
                && d.pages_to_ram == 0
            {
                Ok(vec![format!(
                    "rvram0 counters over the case: 0 migrations, 0 pages between VRAM and RAM ({})",
                    d.detail()
                )])
            } else {
                Err(format!("pages moved: {}", d.detail()))
            }
        });
        point("no page moved between VRAM and RAM", mtu0, moved);
    }

    let mut unbound = None;
    if let Some(gpu) = gpu {
        let revoked = unbind_under_mr(&mut case, (&mr, raw), (&mut local, &mut ram), mtu0, gpu);
        if revoked.is_ok() || !device.exists() {
            unbound = Some(gpu);
        }
        point(
            "unbind the GPU under the live MR: the NIC's WRITE, READ and atomics fail, nothing reaches the BAR, a prefetch gets ENOENT",
            mtu0,
            revoked,
        );
    }
    // The MR, the CPU mapping and the file each hold the dma-buf: once
    // all are gone, the buffer is released (its VRAM freed, or with the
    // GPU unbound, the exporter's state of it).
    let released = mr.deregister().and_then(|()| {
        drop(case);
        drop(fd);
        match rvram_dmabufs()? {
            n if n == baseline => Ok(vec![format!(
                "the MR deregistered, the mapping and file closed: the dma-buf is released ({n} rvram dma-bufs left, as before)"
            )]),
            n => Err(format!("{n} rvram dma-bufs alive after the release, {baseline} before the case")),
        }
    });
    point(
        "deregister the MR and close the buffer: the dma-buf is released",
        mtu0,
        released,
    );
    drop(gpu_file);
    drop(vram);
    if let Some(gpu) = unbound {
        point("bind the GPU again", mtu0, unbind::bind(gpu, device));
    }
    results
}

/// Unbinds `gpu` through sysfs with `mr` registered, then checks that the
/// NIC's accesses to the MR fail.
fn unbind_under_mr(
    case: &mut Case<'_>,
    (mr, fd): (&DmabufMr<'_>, RawFd),
    (local, ram): (&mut Region<'_>, &mut Region<'_>),
    mtu: PathMtu,
    gpu: &str,
) -> Result<Vec<String>, String> {
    unbind::unbind_gpu(gpu)?;
    let mut notes = vec![format!("{gpu} unbound with the MR registered")];
    let timeout = case.cfg.timeout;
    // Each failed request leaves the QPs in the error state: a new pair
    // for each.
    for name in ["WRITE", "READ", "fetch-and-add", "compare-and-swap"] {
        let mut ep = case.dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
        local.bytes_mut()[..PAGE_SIZE].fill(0x5a);
        let atomic = name.starts_with("fetch") || name.starts_with("compare");
        let len = if atomic { 8 } else { PAGE_SIZE };
        let remote = mr.remote(0, len).map_err(|e| e.to_string())?;
        let op = match name {
            "WRITE" => SendOp::Write(remote),
            "READ" => SendOp::Read(remote),
            "fetch-and-add" => SendOp::FetchAdd(remote, 1),
            _ => SendOp::CompareSwap {
                remote,
                compare: 0,
                swap: 1,
            },
        };
        let sge = local.sge(0, len).map_err(|e| e.to_string())?;
        match ep.post_and_wait(Side::A, 9, op, sge, timeout) {
            Err(OpError::Status { status, .. }) if status == WC_REM_ACCESS_ERR => {
                notes.push(format!(
                    "{name} of the revoked MR: {}",
                    verbs::wc_status_name(status)
                ))
            }
            Err(e) => return Err(format!("{name} of the revoked MR: {e}")),
            Ok(_) => return Err(format!("{name} of the revoked MR completed")),
        }
    }
    // As the local buffer: the requester fails to read it, before any
    // packet; nothing may arrive at the remote buffer.
    let mut ep = case.dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
    ram.bytes_mut()[..PAGE_SIZE].fill(0x77);
    let op = SendOp::Write(ram.remote(0, PAGE_SIZE).map_err(|e| e.to_string())?);
    let sge = mr.sge(0, PAGE_SIZE).map_err(|e| e.to_string())?;
    match ep.post_and_wait(Side::A, 10, op, sge, timeout) {
        Err(OpError::Status { status, .. }) if status == WC_LOC_PROT_ERR => notes.push(format!(
            "WRITE from the revoked MR: {}",
            verbs::wc_status_name(status)
        )),
        Err(e) => return Err(format!("WRITE from the revoked MR: {e}")),
        Ok(_) => return Err("WRITE from the revoked MR completed".to_owned()),
    }
    if ram.bytes()[..PAGE_SIZE].iter().any(|&b| b != 0x77) {
        return Err("WRITE from the revoked MR: data arrived at the remote buffer".to_owned());
    }
    // Prefetch of the revoked MR: refused like before, nothing touched.
    let refused_prefetch = mr
        .prefetch_refused(case.dev)
        .map_err(|why| format!("ibv_advise_mr prefetch of the revoked MR: {why}"))?;
    notes.push(format!(
        "ibv_advise_mr prefetch of the revoked MR: ENOENT for all {} calls (every advice, async and FLUSH, whole MR and one page)",
        refused_prefetch.len()
    ));
    let access = AccessFlags::LocalWrite | AccessFlags::RemoteWrite;
    notes.push(refused(
        case.dev,
        fd,
        0,
        LEN,
        access,
        libc::ENODEV,
        "a new registration of the revoked buffer",
    )?);
    Ok(notes)
}
