// SPDX-License-Identifier: GPL-2.0
//! `ibv_advise_mr()` prefetch on every kind of MR, and what the kernel
//! refuses (`--advise`; the dma-buf MR's cases run in [`crate::dmabuf`]).
//!
//! rxe prefetches by faulting an ODP MR's pages in through its
//! `ib_umem_odp`. Linux 7.3 as released did that for any MR of the PD: a
//! pinned MR's plain `ib_umem` was read as an `ib_umem_odp` (KASAN
//! slab-out-of-bounds in `ib_umem_odp_map_dma_and_lock()`), and a dma-buf
//! MR, which has no umem, was a NULL dereference, both from the
//! synchronous path and from the work item of the asynchronous one. The
//! series' "RDMA/rxe: Refuse prefetch of MRs that are not ODP" refuses them
//! with `ENOENT`, mlx5's errno. On a kernel without it these cases end in a
//! KASAN report or an oops, which the harness finds in the console.
//!
//! The commands are sent as they are ([`advise::advise_mr`]), and every one
//! must get an exact errno (0: accepted), for each advice (`PREFETCH`,
//! `PREFETCH_WRITE`, `PREFETCH_NO_FAULT`) and both flag values (0: queued
//! to a workqueue; `FLUSH`: synchronous) unless a row says otherwise:
//!
//! | SGEs | errno | decided by |
//! |---|---|---|
//! | an ODP MR | 0 | rxe |
//! | a pinned MR, a dma-buf MR (also revoked) | `ENOENT` ([`NOT_ODP`]) | rxe, the fix |
//! | an ODP MR's SGE, then a pinned MR's | `ENOENT` | rxe, the fix |
//! | a stale lkey, no MR at the index, an MR of another PD | `EINVAL` ([`BAD_LKEY`]) | rxe's `lookup_mr()` |
//! | a range past either end of an ODP MR | `FLUSH`: `EFAULT` ([`OUT_OF_RANGE`]), async: 0 | `ib_umem_odp_map_dma_and_lock()`; the work item fails quietly |
//! | an SGE of length 2^31 or 2^32 - 1 (from the MR's start, and from two bytes into it), or at an address where the range wraps | `FLUSH`: `EFAULT` ([`HOSTILE_SGE`]), async: 0 | rxe, the fix: see [`HOSTILE_SGE`] |
//! | an SGE of length 0 | `FLUSH`: `EINVAL` ([`EMPTY_SGE`]), async: 0 | `hmm_range_fault()` |
//! | none (`num_sge` 0) | `EINVAL` ([`NO_SGE`]) | uverbs: the SGE list attribute's minimum size |
//! | advice 3 or 255 | `EOPNOTSUPP` ([`UNKNOWN_ADVICE`]) | `rxe_ib_advise_mr()` |
//! | flags `0x2`, `0x3`, `0x80000000` | `EINVAL` ([`UNKNOWN_FLAGS`]) | uverbs: `uverbs_get_flags32()` |
//!
//! An ODP MR of 2 GiB (never touched) registers, and a synchronous
//! prefetch of its last page succeeds: rxe took the MR's length as an int
//! and failed the registration with `EINVAL` before the fix.
//!
//! Then 64 asynchronous prefetches of a fresh ODP MR are queued and the MR
//! deregistered at once, which must not crash (each work item holds a
//! reference on the MR; deregistration waits for them); the old lkey is
//! then unknown (`EINVAL`), and the device still prefetches, writes and
//! reads a new ODP MR, every byte checked.

use std::time::Instant;

use crate::advise::{self, advice_name, errno_name, flags_name, IbvSge, ADVICES, FLAGS};
use crate::config::{Config, PathMtu, PAGE_SIZE};
use crate::mmap::Mmap;
use crate::pattern;
use crate::report::TestResult;
use crate::verbs::{self, Device, OpError, Region, SendOp, Sge, Side};

/// A key that is not an ODP MR: mlx5's `get_prefetchable_mr()` errno, and
/// rxe's with the fix.
pub const NOT_ODP: i32 = libc::ENOENT;
/// An lkey that names no MR of the PD: rxe's `lookup_mr()` fails (mlx5
/// says `ENOENT`, or `EPERM` for another PD's MR).
pub const BAD_LKEY: i32 = libc::EINVAL;
/// A synchronous prefetch of a range outside the ODP MR.
pub const OUT_OF_RANGE: i32 = libc::EFAULT;
/// A synchronous prefetch of an SGE of length 2^31 or 2^32 - 1, or of a
/// range that wraps past the end of the address space: `EFAULT`, as for
/// any range past the MR. Linux 7.3's rxe passed the SGE's u32 length on
/// as an int (2^31 and 2^32 - 1 became negative), and
/// `ib_umem_odp_map_dma_and_lock()` checks the range as `addr + length >
/// end`, without overflow: from the MR's start, `hmm_range_fault()`
/// refused the empty or inverted range with `EINVAL`, by luck; from two
/// bytes into the MR, 2^32 - 1 mapped one page and the prefetch succeeded
/// (from one byte in, the end lands on the page boundary: empty again).
/// The fix (rxe-fixes patch 4) checks the range in rxe first.
pub const HOSTILE_SGE: i32 = libc::EFAULT;
/// A synchronous prefetch of an SGE of length 0: `hmm_range_fault()`
/// refuses the empty range (mlx5 answers the same).
pub const EMPTY_SGE: i32 = libc::EINVAL;
/// Bytes of the large ODP MR.
const LARGE: usize = 2 << 30;
/// No SGE at all.
pub const NO_SGE: i32 = libc::EINVAL;
/// An advice the kernel does not know.
pub const UNKNOWN_ADVICE: i32 = libc::EOPNOTSUPP;
/// Flags other than `FLUSH`.
pub const UNKNOWN_FLAGS: i32 = libc::EINVAL;

/// Bytes of each MR of the errno cases.
const LEN: usize = 64 * PAGE_SIZE;
/// Bytes of the MR deregistered under queued prefetches.
const QUEUED_LEN: usize = 512 * PAGE_SIZE;
/// Asynchronous prefetches queued before that deregistration.
const QUEUED: usize = 64;
/// SGE size of the whole-MR prefetches.
const SGE_BYTES: usize = 16 * PAGE_SIZE;

/// One `advise_mr` command and the errno it must get (0: accepted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `enum ib_uverbs_advise_mr_advice`, or any other value.
    pub advice: u32,
    /// `IB_UVERBS_ADVISE_MR_FLAG_*`, or any other bits.
    pub flags: u32,
    /// The SGE list, sent as it is.
    pub sges: Vec<IbvSge>,
    /// The errno the kernel must return, 0 for success.
    pub want: i32,
}

impl Call {
    /// `PREFETCH_WRITE FLUSH, 2 SGEs`.
    pub fn describe(&self) -> String {
        let n = self.sges.len();
        format!(
            "{} {}, {n} SGE{}",
            advice_name(self.advice),
            flags_name(self.flags),
            if n == 1 { "" } else { "s" }
        )
    }
}

/// Every advice with both flag values on `sges`; `want` gives the errno
/// for a flags value.
pub fn matrix_with(sges: &[IbvSge], want: impl Fn(u32) -> i32) -> Vec<Call> {
    ADVICES
        .iter()
        .flat_map(|&(advice, _)| FLAGS.iter().map(move |&(flags, _)| (advice, flags)))
        .map(|(advice, flags)| Call {
            advice,
            flags,
            sges: sges.to_vec(),
            want: want(flags),
        })
        .collect()
}

/// Every advice with both flag values on `sges`, each expecting `want`.
pub fn matrix(sges: &[IbvSge], want: i32) -> Vec<Call> {
    matrix_with(sges, |_| want)
}

/// Sends every call on `dev`'s PD. Passes with one note per call if each
/// got its errno; fails listing every call that did not.
pub fn check_calls(dev: &Device, calls: &[Call]) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    let mut wrong = Vec::new();
    for call in calls {
        let mut sges = call.sges.clone();
        let got = dev.advise_mr(call.advice, call.flags, &mut sges)?;
        if got == call.want {
            notes.push(format!("{}: {}", call.describe(), errno_name(got)));
        } else {
            wrong.push(format!(
                "{}: {}, want {}",
                call.describe(),
                errno_name(got),
                errno_name(call.want)
            ));
        }
    }
    if wrong.is_empty() {
        Ok(notes)
    } else {
        Err(format!(
            "{} of {} calls got another errno:\n{}",
            wrong.len(),
            calls.len(),
            wrong.join("\n")
        ))
    }
}

/// The SGEs covering all of `region`, [`SGE_BYTES`] each.
fn region_sges(region: &Region<'_>) -> Result<Vec<IbvSge>, String> {
    advise::sges(region.addr(0), region.len(), region.lkey(), SGE_BYTES)
}

/// One SGE of `len` bytes at `addr` of the MR `lkey`.
fn sge(addr: u64, len: usize, lkey: u32) -> IbvSge {
    IbvSge {
        addr,
        length: len as u32,
        lkey,
    }
}

/// `IBV_WC_LOC_QP_OP_ERR`.
const WC_LOC_QP_OP_ERR: u32 = 2;
/// `IBV_WC_LOC_PROT_ERR`.
const WC_LOC_PROT_ERR: u32 = 4;

/// An RDMA WRITE from the last page of `local`, a pinned MR, whose SGE
/// reaches one page past its end, to `target`: the requester cannot read
/// the payload and must complete the request with a local error of its
/// own: rxe says `IBV_WC_LOC_QP_OP_ERR`, and `IBV_WC_LOC_PROT_ERR` would
/// be as right. Linux 7.3's rxe completed it as a flush
/// (`IBV_WC_WR_FLUSH_ERR`), which tells the application nothing. The
/// packets of the first page may have gone out: the target's content is
/// not checked.
fn local_protection(
    cfg: &Config,
    dev: &Device,
    mtu: PathMtu,
    local: &Region<'_>,
    target: &Region<'_>,
) -> Result<Vec<String>, String> {
    let len = 2 * PAGE_SIZE;
    let mut ep = dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
    let op = SendOp::Write(target.remote(0, len).map_err(|e| e.to_string())?);
    let sge = Sge::raw(local.lkey(), local.addr(LEN - PAGE_SIZE), len as u32);
    let status = match ep.post_and_wait(Side::A, 11, op, sge, cfg.timeout) {
        Err(OpError::Status { status, .. })
            if status == WC_LOC_QP_OP_ERR || status == WC_LOC_PROT_ERR =>
        {
            status
        }
        Err(e) => {
            return Err(format!(
                "WRITE: {e}; want {} or {}",
                verbs::wc_status_name(WC_LOC_QP_OP_ERR),
                verbs::wc_status_name(WC_LOC_PROT_ERR)
            ))
        }
        Ok(_) => return Err("WRITE completed".to_owned()),
    };
    Ok(vec![format!(
        "WRITE of {len} bytes from {} bytes before the end of the pinned MR: {}",
        PAGE_SIZE,
        verbs::wc_status_name(status)
    )])
}

/// An ODP MR of [`LARGE`] bytes of memory never touched: it registers
/// (rxe took its length as an int and failed with `EINVAL` before the
/// fix), and a synchronous prefetch of its last page for writing succeeds.
fn large_odp(dev: &Device) -> Result<Vec<String>, String> {
    let mut mem = Mmap::anonymous(LARGE).map_err(|e| format!("map {LARGE} bytes: {e}"))?;
    let region = dev
        .register(mem.as_mut_slice(), verbs::target_access(true))
        .map_err(|e| format!("register {} GiB with ODP: {e}", LARGE >> 30))?;
    let mut notes = vec![format!(
        "{} GiB ODP MR registered, lkey {:#x}",
        LARGE >> 30,
        region.lkey()
    )];
    let last = Call {
        advice: advise::ADVICE_PREFETCH_WRITE,
        flags: advise::FLAG_FLUSH,
        sges: vec![sge(
            region.addr(LARGE - PAGE_SIZE),
            PAGE_SIZE,
            region.lkey(),
        )],
        want: 0,
    };
    notes.extend(check_calls(dev, &[last])?);
    Ok(notes)
}

/// Runs the `--advise` cases on `cfg.device`, at the first `--mtu`. One TAP
/// point per group of calls.
pub fn run_advise(cfg: &Config) -> Vec<TestResult> {
    let mtu = cfg.mtus[0];
    let mut results = Vec::new();
    let mut point = |name: &str, r: Result<Vec<String>, String>| {
        results.push(TestResult::invalidation(
            format!("advise_mr: {name}"),
            mtu,
            r,
        ));
    };

    let setup = (|| {
        let dev = Device::open(cfg).map_err(|e| format!("open {}: {e}", cfg.device))?;
        let other = Device::open(cfg).map_err(|e| format!("open {} again: {e}", cfg.device))?;
        let mem = Mmap::anonymous(3 * LEN).map_err(|e| format!("map {} bytes: {e}", 3 * LEN))?;
        Ok::<_, String>((dev, other, mem))
    })();
    let (dev, other, mut mem) = match setup {
        Ok(s) => s,
        Err(why) => {
            point("setup", Err(why));
            return results;
        }
    };
    let (odp_mem, rest) = mem.as_mut_slice().split_at_mut(LEN);
    let (pinned_mem, other_mem) = rest.split_at_mut(LEN);
    let regions = dev
        .register(odp_mem, verbs::target_access(true))
        .and_then(|odp| Ok((odp, dev.register(pinned_mem, verbs::target_access(false))?)))
        .and_then(|(odp, pinned)| {
            Ok((
                odp,
                pinned,
                other.register(other_mem, verbs::target_access(true))?,
            ))
        });
    let (odp, pinned, foreign) = match regions {
        Ok(r) => r,
        Err(e) => {
            point("setup", Err(format!("register: {e}")));
            return results;
        }
    };
    point(
        &format!("setup: an ODP and a pinned MR of {LEN} bytes, and an ODP MR of another PD"),
        Ok(vec![
            dev.info().join("; "),
            format!(
                "ODP MR lkey {:#x}, pinned MR lkey {:#x}, other PD's MR lkey {:#x}",
                odp.lkey(),
                pinned.lkey(),
                foreign.lkey()
            ),
        ]),
    );

    let sges = region_sges(&odp).and_then(|o| Ok((o, region_sges(&pinned)?)));
    let (odp_sges, pinned_sges) = match sges {
        Ok(s) => s,
        Err(why) => {
            point("SGEs", Err(why));
            return results;
        }
    };

    point(
        "an ODP MR: every advice, async and FLUSH, is accepted",
        check_calls(&dev, &matrix(&odp_sges, 0)),
    );
    point(
        "a pinned MR: every advice, async and FLUSH, is refused with ENOENT (not an ODP MR)",
        check_calls(&dev, &matrix(&pinned_sges, NOT_ODP)),
    );
    let mixed = [odp_sges[0], pinned_sges[0]];
    point(
        "an ODP MR's SGE then a pinned MR's: refused with ENOENT, nothing queued",
        check_calls(&dev, &matrix(&mixed, NOT_ODP)),
    );

    let base = odp.addr(0);
    let lkey = odp.lkey();
    let bad: Vec<Call> = [
        ("stale key", lkey ^ 0x5a),
        ("no MR at the index", 0xffff_ff00 | (lkey & 0xff)),
        ("an MR of another PD", foreign.lkey()),
    ]
    .iter()
    .flat_map(|&(_, key)| matrix(&[sge(base, PAGE_SIZE, key)], BAD_LKEY))
    .collect();
    point(
        "bad lkeys (stale key, no MR at the index, an MR of another PD): EINVAL",
        check_calls(&dev, &bad),
    );

    let mut outside = matrix_with(
        &[sge(base + (LEN - PAGE_SIZE) as u64, 2 * PAGE_SIZE, lkey)],
        |flags| if flags == 0 { 0 } else { OUT_OF_RANGE },
    );
    outside.extend(matrix_with(
        &[sge(base - PAGE_SIZE as u64, 2 * PAGE_SIZE, lkey)],
        |flags| if flags == 0 { 0 } else { OUT_OF_RANGE },
    ));
    point(
        "an SGE past either end of the ODP MR: EFAULT with FLUSH, accepted (and dropped) async",
        check_calls(&dev, &outside),
    );
    // Lengths and addresses a hostile caller picks: rxe passes an SGE's
    // u32 length on as an int, and ib_umem_odp_map_dma_and_lock() adds it
    // to the address.
    let hostile: Vec<Call> = [
        ("length 0", base, 0u32, EMPTY_SGE),
        ("length 2^31", base, 1 << 31, HOSTILE_SGE),
        ("length 2^32 - 1", base, u32::MAX, HOSTILE_SGE),
        (
            "length 2^32 - 1, unaligned",
            base + 2,
            u32::MAX,
            HOSTILE_SGE,
        ),
        (
            "an address that wraps",
            !(PAGE_SIZE as u64 - 1),
            2 * PAGE_SIZE as u32,
            HOSTILE_SGE,
        ),
    ]
    .iter()
    .flat_map(|&(_, addr, length, want)| {
        matrix_with(&[IbvSge { addr, length, lkey }], move |flags| {
            if flags == 0 {
                0
            } else {
                want
            }
        })
    })
    .collect();
    point(
        "hostile SGEs (length 2^31, 2^32 - 1 from the start and unaligned, an address that wraps: EFAULT; length 0: EINVAL) with FLUSH, accepted (and dropped) async",
        check_calls(&dev, &hostile),
    );
    point(
        "no SGE (num_sge 0): EINVAL",
        check_calls(&dev, &matrix(&[], NO_SGE)),
    );
    let one = [sge(base, PAGE_SIZE, lkey)];
    let unknown_advice: Vec<Call> = [3, 255]
        .iter()
        .flat_map(|&advice| {
            FLAGS.iter().map(move |&(flags, _)| Call {
                advice,
                flags,
                sges: one.to_vec(),
                want: UNKNOWN_ADVICE,
            })
        })
        .collect();
    point(
        "unknown advice (3, 255): EOPNOTSUPP",
        check_calls(&dev, &unknown_advice),
    );
    let unknown_flags: Vec<Call> = ADVICES
        .iter()
        .flat_map(|&(advice, _)| {
            [1 << 1, advise::FLAG_FLUSH | 1 << 1, 1 << 31].map(|flags| Call {
                advice,
                flags,
                sges: one.to_vec(),
                want: UNKNOWN_FLAGS,
            })
        })
        .collect();
    point(
        "unknown flags (0x2, 0x3, 0x80000000): EINVAL",
        check_calls(&dev, &unknown_flags),
    );
    point(
        "a WRITE whose local SGE reaches a page past its pinned MR: a local error of its own, not a flush",
        local_protection(cfg, &dev, mtu, &pinned, &odp),
    );
    drop((odp, pinned, foreign));
    point(
        "an ODP MR of 2 GiB registers, and a FLUSH prefetch of its last page succeeds",
        large_odp(&dev),
    );

    let dereg = dereg_under_prefetch(&dev);
    let ok = dereg.is_ok();
    point(
        &format!(
            "{QUEUED} async prefetches queued, then the ODP MR deregistered at once: no crash, its lkey is gone"
        ),
        dereg,
    );
    if ok {
        point(
            "the device still works: a new ODP MR prefetched, written and read, every byte checked",
            still_works(cfg, &dev, mtu),
        );
    }
    results
}

/// Queues [`QUEUED`] asynchronous prefetches of all of a fresh ODP MR and
/// deregisters it right after.
fn dereg_under_prefetch(dev: &Device) -> Result<Vec<String>, String> {
    let mut mem = Mmap::anonymous(QUEUED_LEN).map_err(|e| format!("map: {e}"))?;
    let region = dev
        .register(mem.as_mut_slice(), verbs::target_access(true))
        .map_err(|e| format!("register: {e}"))?;
    let sges = region_sges(&region)?;
    let lkey = region.lkey();
    for i in 0..QUEUED {
        let (advice, _) = ADVICES[i % ADVICES.len()];
        let mut s = sges.clone();
        match dev.advise_mr(advice, 0, &mut s)? {
            0 => {}
            e => {
                return Err(format!(
                    "async prefetch {} ({}): {}",
                    i + 1,
                    advice_name(advice),
                    errno_name(e)
                ))
            }
        }
    }
    let start = Instant::now();
    drop(region);
    let took = start.elapsed();
    let mut notes = vec![format!(
        "{QUEUED} async prefetches of {} SGEs over {QUEUED_LEN} bytes queued; deregistration returned after {} ms",
        sges.len(),
        took.as_millis()
    )];
    notes.extend(check_calls(
        dev,
        &[Call {
            advice: advise::ADVICE_PREFETCH,
            flags: advise::FLAG_FLUSH,
            sges: vec![sge(sges[0].addr, PAGE_SIZE, lkey)],
            want: BAD_LKEY,
        }],
    )?);
    Ok(notes)
}

/// A new ODP MR: prefetched for writing (FLUSH), then RDMA WRITE into it
/// and READ back out, checked through the NIC and the CPU.
fn still_works(cfg: &Config, dev: &Device, mtu: PathMtu) -> Result<Vec<String>, String> {
    const SEED: u32 = 0xadf1_5e00;
    let mut target_mem = Mmap::anonymous(LEN).map_err(|e| format!("map: {e}"))?;
    let mut local_mem = Mmap::anonymous(2 * LEN).map_err(|e| format!("map: {e}"))?;
    let target = dev
        .register(target_mem.as_mut_slice(), verbs::target_access(true))
        .map_err(|e| format!("register the target: {e}"))?;
    let mut local = dev
        .register(local_mem.as_mut_slice(), verbs::local_access())
        .map_err(|e| format!("register the local buffer: {e}"))?;
    let took = dev.prefetch_write(&target)?;
    let mut ep = dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
    pattern::fill(&mut local.bytes_mut()[..LEN], 0, SEED);
    let op = SendOp::Write(target.remote(0, LEN).map_err(|e| e.to_string())?);
    let src = local.sge(0, LEN).map_err(|e| e.to_string())?;
    ep.post_and_wait(Side::A, 1, op, src, cfg.timeout)
        .map_err(|e| format!("RDMA WRITE: {e}"))?;
    let op = SendOp::Read(target.remote(0, LEN).map_err(|e| e.to_string())?);
    let sink = local.sge(LEN, LEN).map_err(|e| e.to_string())?;
    ep.post_and_wait(Side::A, 2, op, sink, cfg.timeout)
        .map_err(|e| format!("RDMA READ: {e}"))?;
    drop(ep);
    let read = pattern::check(&local.bytes()[LEN..], 0, SEED);
    let cpu = pattern::check(target.bytes(), 0, SEED);
    if let Some(why) = read.describe("read back by the NIC") {
        return Err(why);
    }
    if let Some(why) = cpu.describe("the target, by the CPU") {
        return Err(why);
    }
    Ok(vec![format!(
        "PREFETCH_WRITE FLUSH of {LEN} bytes in {} ms; RDMA WRITE and READ of {LEN} bytes at MTU {mtu}: every byte right, by the NIC and the CPU",
        took.as_millis()
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_covers_every_advice_and_flags_once() {
        let s = [sge(0x1000, 4096, 7)];
        let m = matrix(&s, libc::ENOENT);
        assert_eq!(m.len(), 6);
        for &(advice, _) in &ADVICES {
            for &(flags, _) in &FLAGS {
                assert_eq!(
                    m.iter()
                        .filter(|c| c.advice == advice && c.flags == flags)
                        .count(),
                    1
                );
            }
        }
        assert!(m.iter().all(|c| c.sges == s && c.want == libc::ENOENT));
        let m = matrix_with(&s, |f| if f == 0 { 0 } else { libc::EFAULT });
        assert_eq!(m.iter().filter(|c| c.want == 0).count(), 3);
        assert!(m
            .iter()
            .all(|c| (c.flags == 0) == (c.want == 0) && c.flags & !advise::FLAG_FLUSH == 0));
        assert!(matrix(&[], libc::EINVAL).iter().all(|c| c.sges.is_empty()));
    }

    #[test]
    fn names() {
        let call = Call {
            advice: advise::ADVICE_PREFETCH_WRITE,
            flags: advise::FLAG_FLUSH,
            sges: vec![sge(0, 1, 1), sge(1, 1, 1)],
            want: 0,
        };
        assert_eq!(call.describe(), "PREFETCH_WRITE FLUSH, 2 SGEs");
        let call = Call {
            advice: 3,
            flags: 2,
            sges: vec![sge(0, 1, 1)],
            want: 0,
        };
        assert_eq!(call.describe(), "advice 3 flags 0x2, 1 SGE");
        assert_eq!(flags_name(0), "async");
        assert_eq!(errno_name(0), "success");
        assert_eq!(errno_name(libc::ENOENT), "ENOENT");
        assert_eq!(errno_name(libc::EOPNOTSUPP), "EOPNOTSUPP");
        assert!(errno_name(libc::EBUSY).starts_with("errno 16 ("));
    }

    /// The errnos of the table in the module documentation.
    #[test]
    fn expected_errnos() {
        assert_eq!(
            [
                NOT_ODP,
                BAD_LKEY,
                OUT_OF_RANGE,
                NO_SGE,
                UNKNOWN_ADVICE,
                UNKNOWN_FLAGS
            ],
            [2, 22, 14, 22, 95, 22]
        );
    }

    /// The MRs' SGEs cover them exactly, within one `ibv_cmd_advise_mr`.
    #[test]
    fn sge_sizes() {
        const { assert!(QUEUED_LEN / SGE_BYTES <= advise::SGES_PER_CALL) };
        assert_eq!(LEN / SGE_BYTES, 4);
        assert_eq!(QUEUED_LEN / SGE_BYTES, 32);
        assert_eq!(LEN % SGE_BYTES + QUEUED_LEN % SGE_BYTES, 0);
    }

    /// Without an RDMA device (as on a build host) the run is one failed
    /// setup point.
    #[test]
    fn missing_device_is_a_setup_failure() {
        let cfg = Config {
            device: "rvram-no-such-device".into(),
            ..Config::default()
        };
        let results = run_advise(&cfg);
        assert_eq!(results.len(), 1);
        assert!(!results[0].passed);
        assert_eq!(results[0].name, "advise_mr: setup");
    }
}
