// SPDX-License-Identifier: GPL-2.0
//! Invalidation and bad-input cases of an ODP target MR, once per MTU.
//!
//! - **remap**: while the MR is registered and the NIC has read it, the
//!   process unmaps part of the target and maps fresh memory with new data
//!   at the same addresses. The NIC must fault again and read the new data;
//!   reading the old pages would mean it kept a stale translation. In VRAM
//!   mode the target is in VRAM for both READs (the new pages are migrated
//!   in too), so the NIC's mapping of VRAM pages is what gets invalidated.
//! - **hole**: after the NIC read the whole target, the process unmaps one
//!   page of it (the MR is now partly unmapped). A READ of that page must
//!   complete with an error status: not succeed from a stale mapping, not
//!   hang, not oops. Mapped again with new data, the page reads right on
//!   fresh QPs (the error leaves the old ones in the error state).

use std::time::Duration;

use crate::config::{Config, PathMtu, PAGE_SIZE};
use crate::mmap::Mmap;
use crate::pattern;
use crate::report::TestResult;
use crate::verbs::{self, wc_status_name, Device, OpError, Region, SendOp, Side};
use crate::vram::{self, Vram};

/// Pages of the target of each case.
const PAGES: usize = 4;
/// `IBV_WC_REM_ACCESS_ERR`.
const WC_REM_ACCESS_ERR: u32 = 10;
/// Pattern seeds: before and after the remap.
const SEED_OLD: u32 = 0x0bad_cafe;
const SEED_NEW: u32 = 0x600d_f00d;

/// Runs both cases at `mtu`.
pub fn run_invalidation(cfg: &Config, mtu: PathMtu) -> Vec<TestResult> {
    let mut vram = match cfg.vram.as_ref().map(|v| Vram::open(&v.device)).transpose() {
        Ok(v) => v,
        Err(err) => {
            return vec![TestResult::setup_failure(
                format!("mtu {mtu}: invalidation: open VRAM device"),
                Some(mtu),
                err,
            )]
        }
    };
    vec![
        TestResult::invalidation(
            format!("mtu {mtu}: remap part of a registered ODP target, READ sees the new data"),
            mtu,
            remap(cfg, mtu, vram.as_mut()),
        ),
        TestResult::invalidation(
            format!(
                "mtu {mtu}: munmap a page of a registered ODP target: READ of it fails cleanly"
            ),
            mtu,
            hole(cfg, mtu, vram.as_mut()),
        ),
    ]
}

fn op_err(what: &str, e: OpError) -> String {
    format!("{what}: {e}")
}

/// RDMA READs `len` bytes at `offset` of `target` into the start of `local`.
fn read(
    ep: &mut verbs::Endpoints,
    local: &Region<'_>,
    target: &Region<'_>,
    offset: usize,
    len: usize,
    timeout: Duration,
) -> Result<(), OpError> {
    let op = SendOp::Read(target.remote(offset, len)?);
    ep.post_and_wait(Side::A, 1, op, local.sge(0, len)?, timeout)
        .map(|_| ())
}

/// Replaces `[addr, addr + len)` with fresh anonymous memory.
///
/// # Safety
///
/// The range must be whole pages of an anonymous private mapping of the
/// caller, through which no Rust reference is used across the call.
unsafe fn replace(addr: usize, len: usize) -> Result<(), String> {
    // SAFETY: The caller owns the range; MAP_FIXED replaces exactly it.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED || p as usize != addr {
        return Err(format!(
            "mmap(MAP_FIXED): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn to_vram(v: &mut Vram, bytes: &[u8], what: &str) -> Result<String, String> {
    v.migrate_to_dev(bytes, &mut |_, _| {})
        .map_err(|e| format!("{what}: {e}"))?;
    let snap = v.snapshot(bytes).map_err(|e| format!("{what}: {e}"))?;
    let n = vram::resident(&snap);
    if n != snap.len() {
        return Err(format!("{what}: {n} of {} pages in VRAM", snap.len()));
    }
    Ok(format!("{what}: {n} pages in VRAM"))
}

fn remap(cfg: &Config, mtu: PathMtu, mut vram: Option<&mut Vram>) -> Result<Vec<String>, String> {
    let len = PAGES * PAGE_SIZE;
    let mut notes = Vec::new();
    let mut target = Mmap::anonymous(len).map_err(|e| format!("map target: {e}"))?;
    let mut local = Mmap::anonymous(len).map_err(|e| format!("map local: {e}"))?;
    pattern::fill(target.as_mut_slice(), 0, SEED_OLD);
    if let Some(v) = vram.as_deref_mut() {
        notes.push(to_vram(v, target.as_slice(), "before the first READ")?);
    }
    let dev = Device::open(cfg).map_err(|e| format!("open device: {e}"))?;
    let local = dev
        .register(local.as_mut_slice(), verbs::local_access())
        .map_err(|e| format!("register local: {e}"))?;
    let mut target = dev
        .register(target.as_mut_slice(), verbs::target_access(true))
        .map_err(|e| format!("register target: {e}"))?;
    let mut ep = dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;

    read(&mut ep, &local, &target, 0, len, cfg.timeout).map_err(|e| op_err("first READ", e))?;
    if let Some(why) = pattern::check(local.bytes(), 0, SEED_OLD).describe("first READ") {
        return Err(why);
    }

    // Pages 1.. get new memory, and new data, under the registered MR.
    let addr = target.bytes().as_ptr() as usize + PAGE_SIZE;
    // SAFETY: Whole pages of the target's anonymous mapping; the region's
    // slice is not used across the call and covers the same memory after.
    unsafe { replace(addr, len - PAGE_SIZE) }?;
    pattern::fill(&mut target.bytes_mut()[PAGE_SIZE..], PAGE_SIZE, SEED_NEW);
    if let Some(v) = vram {
        notes.push(to_vram(v, target.bytes(), "after the remap")?);
    }

    read(&mut ep, &local, &target, 0, len, cfg.timeout).map_err(|e| op_err("second READ", e))?;
    let b = local.bytes();
    let mut check = pattern::check(&b[..PAGE_SIZE], 0, SEED_OLD);
    check.merge(pattern::check(&b[PAGE_SIZE..], PAGE_SIZE, SEED_NEW));
    if let Some(why) = check.describe("second READ (page 0 old data, pages 1.. new data)") {
        return Err(why);
    }
    notes.push(format!(
        "{} pages remapped under the MR; the NIC read the new data",
        PAGES - 1
    ));
    Ok(notes)
}

fn hole(cfg: &Config, mtu: PathMtu, vram: Option<&mut Vram>) -> Result<Vec<String>, String> {
    const HOLE: usize = 2;
    let len = PAGES * PAGE_SIZE;
    let mut notes = Vec::new();
    let mut target = Mmap::anonymous(len).map_err(|e| format!("map target: {e}"))?;
    let mut local = Mmap::anonymous(len).map_err(|e| format!("map local: {e}"))?;
    pattern::fill(target.as_mut_slice(), 0, SEED_OLD);
    if let Some(v) = vram {
        notes.push(to_vram(v, target.as_slice(), "before the first READ")?);
    }
    let dev = Device::open(cfg).map_err(|e| format!("open device: {e}"))?;
    let local = dev
        .register(local.as_mut_slice(), verbs::local_access())
        .map_err(|e| format!("register local: {e}"))?;
    let mut target = dev
        .register(target.as_mut_slice(), verbs::target_access(true))
        .map_err(|e| format!("register target: {e}"))?;
    let mut ep = dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
    // The NIC maps every page, the hole-to-be included.
    read(&mut ep, &local, &target, 0, len, cfg.timeout).map_err(|e| op_err("first READ", e))?;
    if let Some(why) = pattern::check(local.bytes(), 0, SEED_OLD).describe("first READ") {
        return Err(why);
    }

    let hole_addr = target.bytes().as_ptr() as usize + HOLE * PAGE_SIZE;
    // SAFETY: A whole page of the target's anonymous mapping. Nothing reads
    // or writes it through the region's slice until `replace()` below maps
    // it again (only the NIC tries, and must fail).
    if unsafe { libc::munmap(hole_addr as *mut libc::c_void, PAGE_SIZE) } != 0 {
        return Err(format!("munmap: {}", std::io::Error::last_os_error()));
    }
    match read(
        &mut ep,
        &local,
        &target,
        HOLE * PAGE_SIZE,
        PAGE_SIZE,
        cfg.timeout,
    ) {
        Ok(()) => {
            return Err("READ of the unmapped page succeeded: the NIC kept a stale mapping".into())
        }
        // The responder cannot fault the page in: a remote access error,
        // as for any address outside what the MR may access.
        Err(OpError::Status { status, .. }) if status == WC_REM_ACCESS_ERR => notes.push(format!(
            "READ of the unmapped page completed with {} ({status})",
            wc_status_name(status)
        )),
        Err(OpError::Status { status, .. }) => {
            return Err(format!(
                "READ of the unmapped page completed with {} ({status}), not {}",
                wc_status_name(status),
                wc_status_name(WC_REM_ACCESS_ERR)
            ))
        }
        Err(e) => return Err(op_err("READ of the unmapped page", e)),
    }

    // SAFETY: As for `munmap()` above; the page is mapped again after this.
    unsafe { replace(hole_addr, PAGE_SIZE) }?;
    pattern::fill(
        &mut target.bytes_mut()[HOLE * PAGE_SIZE..(HOLE + 1) * PAGE_SIZE],
        HOLE * PAGE_SIZE,
        SEED_NEW,
    );
    // The error moved the QPs to the error state: fresh ones read the MR.
    drop(ep);
    let mut ep = dev.connect(mtu).map_err(|e| format!("reconnect: {e}"))?;
    read(&mut ep, &local, &target, 0, len, cfg.timeout)
        .map_err(|e| op_err("READ on fresh QPs", e))?;
    let b = local.bytes();
    let mut check = pattern::check(&b[..HOLE * PAGE_SIZE], 0, SEED_OLD);
    check.merge(pattern::check(
        &b[HOLE * PAGE_SIZE..(HOLE + 1) * PAGE_SIZE],
        HOLE * PAGE_SIZE,
        SEED_NEW,
    ));
    check.merge(pattern::check(
        &b[(HOLE + 1) * PAGE_SIZE..],
        (HOLE + 1) * PAGE_SIZE,
        SEED_OLD,
    ));
    if let Some(why) = check.describe("READ after the page was mapped again") {
        return Err(why);
    }
    notes.push("mapped again with new data: fresh QPs read old and new pages right".into());
    Ok(notes)
}
