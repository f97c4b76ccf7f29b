// SPDX-License-Identifier: GPL-2.0
//! Synchronous ODP prefetch: `ibv_advise_mr(PREFETCH_WRITE, FLUSH)`.
//!
//! A FLUSH prefetch makes the provider fault the given ranges of an ODP MR
//! into the device before the call returns: for rxe
//! `rxe_ib_prefetch_sg_list()`, which runs `rxe_odp_do_pagefault_and_lock()`
//! per SGE, the same fault path an RDMA request to an unmapped page takes,
//! without the packet path around it. That is what the benchmark times.
//! (Without FLUSH the prefetch is queued to a workqueue and returns at once:
//! useless for timing.)
//!
//! rdma-core's inline `ibv_advise_mr()` calls the provider's `advise_mr`
//! op, which Debian bookworm's rdma-core (v44) does not implement for rxe
//! (`EOPNOTSUPP`) even though the kernel does. Providers that implement it
//! end in `ibv_cmd_advise_mr()`, which libibverbs exports (as a private
//! symbol, `IBVERBS_PRIVATE_34`) and which issues the uverbs ioctl: this
//! module calls that directly, looked up with `dlsym` in the libibverbs
//! that sideway's shim already loaded.
//!
//! The ranges are split into SGEs of [`SGE_PAGES`] pages, [`SGES_PER_CALL`]
//! per call: with aliases disabled, each page that migrates invalidates the
//! MR's interval notifier, and `ib_umem_odp_map_dma_and_lock()` restarts
//! `hmm_range_fault()` from the start of its SGE (within a 1 s budget), so
//! one SGE over a large range would take quadratic time and fail.
//!
//! [`advise_mr`] sends any advice, flags and SGEs as they are, for the
//! tests of what the kernel accepts and refuses ([`crate::prefetch`]).

use std::ffi::{c_char, c_int, c_void};
use std::ptr::NonNull;
use std::sync::OnceLock;

use crate::config::PAGE_SIZE;

/// Pages per prefetch SGE (256 KiB).
pub const SGE_PAGES: usize = 64;
/// SGEs per `ibv_cmd_advise_mr` call.
pub const SGES_PER_CALL: usize = 64;

/// `IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH`: fault in for reading.
pub const ADVICE_PREFETCH: u32 = 0;
/// `IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE`: fault in for writing.
pub const ADVICE_PREFETCH_WRITE: u32 = 1;
/// `IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT`: map what is present,
/// fault nothing in.
pub const ADVICE_PREFETCH_NO_FAULT: u32 = 2;
/// `IB_UVERBS_ADVISE_MR_FLAG_FLUSH`: synchronous.
pub const FLAG_FLUSH: u32 = 1 << 0;

/// Every advice the kernel knows, with its name.
pub const ADVICES: [(u32, &str); 3] = [
    (ADVICE_PREFETCH, "PREFETCH"),
    (ADVICE_PREFETCH_WRITE, "PREFETCH_WRITE"),
    (ADVICE_PREFETCH_NO_FAULT, "PREFETCH_NO_FAULT"),
];

/// Both valid flag values: asynchronous (queued to a workqueue) and
/// synchronous, with their names.
pub const FLAGS: [(u32, &str); 2] = [(0, "async"), (FLAG_FLUSH, "FLUSH")];

/// The name of an advice, for diagnostics.
pub fn advice_name(advice: u32) -> String {
    ADVICES.iter().find(|(a, _)| *a == advice).map_or_else(
        || format!("advice {advice}"),
        |(_, name)| (*name).to_owned(),
    )
}

/// The name of a flags value, for diagnostics.
pub fn flags_name(flags: u32) -> String {
    FLAGS.iter().find(|(f, _)| *f == flags).map_or_else(
        || format!("flags {flags:#x}"),
        |(_, name)| (*name).to_owned(),
    )
}

/// An errno as `ENAME` (0 is `success`), for diagnostics.
pub fn errno_name(errno: i32) -> String {
    match errno {
        0 => "success".to_owned(),
        libc::EPERM => "EPERM".to_owned(),
        libc::ENOENT => "ENOENT".to_owned(),
        libc::ENOMEM => "ENOMEM".to_owned(),
        libc::EFAULT => "EFAULT".to_owned(),
        libc::EINVAL => "EINVAL".to_owned(),
        libc::EOPNOTSUPP => "EOPNOTSUPP".to_owned(),
        e => format!("errno {e} ({})", std::io::Error::from_raw_os_error(e)),
    }
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbvSge {
    /// Virtual address (for rxe: the user address, as iova == address).
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of the MR.
    pub lkey: u32,
}

/// `int ibv_cmd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice
/// advice, uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)`.
type AdviseMrFn = unsafe extern "C" fn(*mut c_void, u32, u32, *mut IbvSge, u32) -> c_int;

/// The SGEs covering `len` bytes at `addr` of an MR with `lkey`, at most
/// `sge_bytes` each (the last one may be shorter).
pub fn sges(addr: u64, len: usize, lkey: u32, sge_bytes: usize) -> Result<Vec<IbvSge>, String> {
    let length = u32::try_from(sge_bytes)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("invalid SGE size {sge_bytes}"))?;
    let mut out = Vec::with_capacity(len.div_ceil(sge_bytes));
    let mut offset = 0;
    while offset < len {
        let n = (len - offset).min(length as usize);
        out.push(IbvSge {
            addr: addr + offset as u64,
            length: n as u32,
            lkey,
        });
        offset += n;
    }
    Ok(out)
}

/// The SGEs of a whole-range prefetch: [`SGE_PAGES`] pages each.
pub fn prefetch_sges(addr: u64, len: usize, lkey: u32) -> Result<Vec<IbvSge>, String> {
    sges(addr, len, lkey, SGE_PAGES * PAGE_SIZE)
}

/// Looks up `ibv_cmd_advise_mr` once per process.
fn advise_mr_fn() -> Result<AdviseMrFn, String> {
    static FN: OnceLock<Result<usize, String>> = OnceLock::new();
    let addr = FN.get_or_init(|| {
        const LIB: &[u8] = b"libibverbs.so.1\0";
        const SYM: &[u8] = b"ibv_cmd_advise_mr\0";
        // SAFETY: both strings are NUL-terminated; dlopen of a library
        // that is already loaded (by sideway's shim) only takes a
        // reference to it, and the handle is kept for the life of the
        // process (never dlclose'd), so the symbol stays valid.
        unsafe {
            let mut handle = libc::dlopen(
                LIB.as_ptr().cast::<c_char>(),
                libc::RTLD_NOW | libc::RTLD_NOLOAD,
            );
            if handle.is_null() {
                handle = libc::dlopen(LIB.as_ptr().cast::<c_char>(), libc::RTLD_NOW);
            }
            if handle.is_null() {
                return Err(format!("dlopen libibverbs.so.1: {}", dlerror()));
            }
            let sym = libc::dlsym(handle, SYM.as_ptr().cast::<c_char>());
            if sym.is_null() {
                return Err(format!(
                    "dlsym ibv_cmd_advise_mr in libibverbs.so.1: {} \
                     (rdma-core older than v22?)",
                    dlerror()
                ));
            }
            Ok(sym as usize)
        }
    });
    let addr = addr.clone()?;
    // SAFETY: `addr` is the address of libibverbs' `ibv_cmd_advise_mr`,
    // whose C signature `AdviseMrFn` spells out; the library stays loaded.
    Ok(unsafe { std::mem::transmute::<usize, AdviseMrFn>(addr) })
}

/// The last `dlerror()` text.
fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until
    // the next dl* call on this thread; it is copied at once.
    unsafe {
        let msg = libc::dlerror();
        if msg.is_null() {
            "unknown error".to_owned()
        } else {
            std::ffi::CStr::from_ptr(msg).to_string_lossy().into_owned()
        }
    }
}

/// Sends one `advise_mr` uverbs command with `advice`, `flags` and all of
/// `sges` (none is allowed: the kernel decides) on the protection domain
/// `pd` (a live `struct ibv_pd *`). Returns 0 if the kernel accepted it,
/// else its errno; `Err` only if `ibv_cmd_advise_mr` cannot be found.
/// Nothing is checked here: advice, flags, keys and ranges go to the
/// kernel as they are.
///
/// # Safety
///
/// `pd` must point to a live `ibv_pd` for the duration of the call.
pub unsafe fn advise_mr(
    pd: NonNull<c_void>,
    advice: u32,
    flags: u32,
    sges: &mut [IbvSge],
) -> Result<i32, String> {
    let advise = advise_mr_fn()?;
    let n = u32::try_from(sges.len()).map_err(|_| format!("{} SGEs", sges.len()))?;
    // SAFETY: `pd` is live (caller), `sges` is a valid array of `n`
    // `ibv_sge`s the function only reads (a dangling but aligned pointer
    // when `n` is 0: nothing is read).
    let ret = unsafe { advise(pd.as_ptr(), advice, flags, sges.as_mut_ptr(), n) };
    // libibverbs returns the errno; be lenient about its sign.
    Ok(ret.wrapping_abs())
}

/// Prefetches `sges` for writing, synchronously, [`SGES_PER_CALL`] per
/// call, on the protection domain `pd` (a live `struct ibv_pd *`).
///
/// # Safety
///
/// `pd` must point to a live `ibv_pd` of the context that registered the
/// MRs the SGEs name, for the duration of the call.
pub unsafe fn prefetch_write(pd: NonNull<c_void>, sges: &mut [IbvSge]) -> Result<(), String> {
    for (i, batch) in sges.chunks_mut(SGES_PER_CALL).enumerate() {
        let n = batch.len();
        let first = batch[0];
        // SAFETY: `pd` is live (caller).
        let ret = unsafe { advise_mr(pd, ADVICE_PREFETCH_WRITE, FLAG_FLUSH, batch) }?;
        if ret != 0 {
            let err = std::io::Error::from_raw_os_error(ret);
            return Err(format!(
                "ibv_cmd_advise_mr(PREFETCH_WRITE, FLUSH) of {n} SGEs from {:#x} \
                 (call {}): {err}",
                first.addr,
                i + 1
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sge_layout() {
        assert_eq!(std::mem::size_of::<IbvSge>(), 16);
        assert_eq!(std::mem::align_of::<IbvSge>(), 8);
    }

    #[test]
    fn sges_cover_the_range_exactly() {
        let s = sges(0x1000, 10_000, 7, 4096).unwrap();
        assert_eq!(
            s,
            [
                IbvSge {
                    addr: 0x1000,
                    length: 4096,
                    lkey: 7
                },
                IbvSge {
                    addr: 0x2000,
                    length: 4096,
                    lkey: 7
                },
                IbvSge {
                    addr: 0x3000,
                    length: 10_000 - 8192,
                    lkey: 7
                },
            ]
        );
        assert!(sges(0, 0, 1, 4096).unwrap().is_empty());
        assert!(sges(0, 4096, 1, 0).is_err());
        assert!(sges(0, 4096, 1, 1 << 32).is_err());
    }

    /// Where libibverbs is installed (rdma-core, as in the test guest),
    /// `ibv_cmd_advise_mr` must be found, also without sideway having
    /// loaded the library first.
    #[test]
    fn finds_ibv_cmd_advise_mr() {
        const LIB: &[u8] = b"libibverbs.so.1\0";
        // SAFETY: a NUL-terminated name; the handle is not used.
        let present =
            !unsafe { libc::dlopen(LIB.as_ptr().cast::<c_char>(), libc::RTLD_LAZY) }.is_null();
        if present {
            assert!(advise_mr_fn().is_ok(), "{:?}", advise_mr_fn().err());
        }
    }

    #[test]
    fn prefetch_sges_are_256k() {
        let len = 64 << 20;
        let s = prefetch_sges(1 << 30, len, 3).unwrap();
        assert_eq!(s.len(), 256);
        assert!(s.iter().all(|g| g.length == 256 << 10 && g.lkey == 3));
        assert_eq!(s[255].addr, (1 << 30) + (len - (256 << 10)) as u64);
        // 4 calls of 64 SGEs.
        assert_eq!(s.chunks(SGES_PER_CALL).count(), 4);
        assert_eq!(prefetch_sges(0, 4 << 20, 1).unwrap().len(), 16);
    }
}
