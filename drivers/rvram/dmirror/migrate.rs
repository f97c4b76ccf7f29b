// SPDX-License-Identifier: GPL-2.0

//! The dmirror commands that move pages: `HMM_DMIRROR_MIGRATE_TO_DEV`,
//! `HMM_DMIRROR_MIGRATE_TO_SYS` and `HMM_DMIRROR_RELEASE`.
//!
//! Migrations into VRAM hold the GPU bound ([`Gpu::hold_bound`]) and charge
//! each page to the caller's dmem cgroup; `RELEASE` evicts the pages the
//! calling file moved in and no one else's.
//!
//! [`Gpu::hold_bound`]: crate::gpu::Gpu::hold_bound

use super::{
    chunks,
    Cmd,
    DmirrorFile, //
};
use crate::{
    gpu::{
        evict_range,
        with_vram,
        EVICT_CHUNK,
        PMD_PAGES, //
    },
    pages::VramKind,
};
use kernel::{
    alloc::flags::GFP_KERNEL_ACCOUNT,
    mm::{
        hmm::{
            RangeRequest,
            DEFAULT_TIMEOUT_MS, //
        },
        migrate::{
            MigrateVma,
            Select,
            Source, //
        },
        pagemap::{
            Pagemap,
            MAX_FOLIO_ORDER, //
        },
    },
    page::PAGE_SIZE,
    prelude::*,
    sync::atomic::Relaxed,
    task::might_sleep,
    time::{
        delay::fsleep,
        Delta, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// How often `HMM_DMIRROR_RELEASE` looks again for pages it could not evict
/// (a page locked or pinned meanwhile), 10 ms apart, before `EBUSY`.
const RELEASE_TRIES: usize = 100;

/// The VMA at `addr` and the end of the next migration chunk in
/// `[addr, end)`: at most up to the next PMD boundary and the VMA's end.
/// `EINVAL` for a hole or a VMA that cannot be read (as test_hmm).
fn migration_chunk<'a>(
    guard: &'a kernel::mm::MmapReadGuard<'_>,
    addr: usize,
    end: usize,
) -> Result<(&'a kernel::mm::virt::VmaRef, usize)> {
    let vma = guard.vma_lookup(addr).ok_or(EINVAL)?;
    if vma.flags() & kernel::mm::virt::flags::READ == 0 {
        return Err(EINVAL);
    }
    let chunk = PAGE_SIZE << MAX_FOLIO_ORDER;
    Ok((vma, end.min(vma.end()).min((addr & !(chunk - 1)) + chunk)))
}

impl DmirrorFile {
    /// HMM_DMIRROR_MIGRATE_TO_DEV: moves the range into VRAM, then reads it
    /// back through the device into `ptr`.
    ///
    /// `migrate_vma` is best effort: a page that someone else briefly holds
    /// (a per-CPU LRU batch right after a fault, a concurrent fault) is
    /// skipped. Such a range is migrated again, twice at most, before the
    /// read-back reports `ENOENT`.
    pub(super) fn migrate_to_dev(&self, c: &mut Cmd) -> Result {
        let start = usize::try_from(c.addr)?;
        let end = start + Self::bounce_len(c)?;
        let ptr = usize::try_from(c.ptr)?;
        let mut tries = 0;
        loop {
            self.migrate_range_to_dev(start, end)?;
            match self.read_back(start, end, ptr) {
                Err(e) if e == ENOENT && tries < 2 => tries += 1,
                r => break r?,
            }
        }
        c.cpages = c.npages;
        Ok(())
    }

    /// Migrates what is in system memory in `[start, end)` into VRAM.
    fn migrate_range_to_dev(&self, start: usize, end: usize) -> Result {
        with_vram!(&self.gpu.vram, pm => self.migrate_range_into(pm, start, end))
    }

    /// Charges pages `index..index + nr` of a folio allocated for a
    /// migration into VRAM to the caller's dmem cgroup
    /// ([`Charges`](crate::vram::Charges)).
    fn charge<T: VramKind>(&self, pm: &Pagemap<T>, index: usize, nr: usize) -> Result {
        let region = self.gpu.dmem.lock();
        pm.data().charges().charge(region.as_ref(), index, nr)
    }

    /// Migrates what is in system memory in `[start, end)` into VRAM, each
    /// page charged to the caller's dmem cgroup. A page VRAM has no room
    /// for stays where it is; `ENOSPC` once a page would take the cgroup
    /// over its `dmem.max`, after the pages that fit have moved.
    fn migrate_range_into<T: VramKind>(&self, pm: &Pagemap<T>, start: usize, end: usize) -> Result {
        let gpu = &self.gpu;
        let mm = self.mirror.mm().mmget_not_zero().ok_or(EINVAL)?;
        let mut over_limit = false;
        {
            let _bound = gpu.hold_bound()?;
            let guard = mm.mmap_read_lock();
            let mut addr = start;
            while addr < end {
                let (vma, next) = migration_chunk(&guard, addr, end)?;
                let mut mig = MigrateVma::<T>::setup(
                    vma,
                    addr,
                    next,
                    pm.owner(),
                    Select::SYSTEM | Select::COMPOUND,
                )?;
                for i in 0..mig.len() {
                    let (system, nr) = match mig.source(i) {
                        Source::System { folio, .. } => (Some(folio), folio.nr_pages()),
                        Source::Hole { compound } => {
                            (None, if compound { 1 << MAX_FOLIO_ORDER } else { 1 })
                        }
                        _ => continue,
                    };
                    let order = if nr > 1 { MAX_FOLIO_ORDER } else { 0 };
                    let big = if self.fail_alloc() && nr > 1 {
                        None
                    } else {
                        pm.alloc_folio(order).ok()
                    };
                    // Not charged: freed, which uncharges what it took.
                    let big = big.and_then(|dst| match self.charge(pm, dst.index(), nr) {
                        Ok(()) => Some(dst),
                        Err(e) => {
                            over_limit |= e == ENOSPC;
                            None
                        }
                    });
                    if let Some(mut dst) = big {
                        pm.data().owners().set(dst.index(), nr, self.id);
                        for p in 0..nr {
                            match system {
                                Some(s) => {
                                    s.with_page(p, |b| T::fill(pm, &mut dst, p, Some(b)))??
                                }
                                None => T::fill(pm, &mut dst, p, None)?,
                            }
                        }
                        mig.set_device(i, dst)?;
                        continue;
                    }
                    // No PMD-sized VRAM: per-page destinations; the core
                    // splits the source folio.
                    let mut small = KVec::with_capacity(nr, GFP_KERNEL_ACCOUNT)?;
                    for p in 0..nr {
                        let Ok(mut dst) = pm.alloc_folio(0) else {
                            pm.data().stats().alloc_fail.fetch_add(1, Relaxed);
                            break;
                        };
                        if let Err(e) = self.charge(pm, dst.index(), 1) {
                            over_limit |= e == ENOSPC;
                            break;
                        }
                        pm.data().owners().set(dst.index(), 1, self.id);
                        match system {
                            Some(s) => s.with_page(p, |b| T::fill(pm, &mut dst, 0, Some(b)))??,
                            None => T::fill(pm, &mut dst, 0, None)?,
                        }
                        small.push(dst, GFP_KERNEL_ACCOUNT)?;
                    }
                    for (p, dst) in small.into_iter().enumerate() {
                        mig.set_device(i + p, dst)?;
                    }
                }
                let moved = mig.migrate();
                let stats = pm.data().stats();
                stats.to_dev.fetch_add(moved.count() as u64, Relaxed);
                stats.pages_to_vram.fetch_add(moved.pages() as u64, Relaxed);
                drop(moved);
                addr = next;
                // A range may be 1 GiB: one scheduling point per chunk.
                might_sleep();
                if over_limit {
                    return Err(ENOSPC);
                }
            }
        }
        Ok(())
    }

    /// Reads `[start, end)` back through the device into the user buffer
    /// at `ptr`, a chunk at a time; `ENOENT` unless every page is in this
    /// GPU's VRAM.
    fn read_back(&self, start: usize, end: usize, ptr: usize) -> Result {
        with_vram!(&self.gpu.vram, pm => self.read_back_from(pm, start, end, ptr))
    }

    fn read_back_from<T: VramKind>(
        &self,
        pm: &Pagemap<T>,
        start: usize,
        end: usize,
        ptr: usize,
    ) -> Result {
        let len = end - start;
        let mut out = UserSlice::new(UserPtr::from_addr(ptr), len).writer();
        let mut buf = Self::bounce(len)?;
        for (off, n) in chunks(len) {
            let chunk = &mut buf[..n];
            let mut req = RangeRequest::snapshot(start + off, n / PAGE_SIZE)?;
            {
                let f = self.mirror.fault(&mut req, DEFAULT_TIMEOUT_MS)?;
                for ((_, pfn), dst) in f.iter().zip(chunk.chunks_mut(PAGE_SIZE)) {
                    let folio = pfn.device_folio::<T>().ok_or(ENOENT)?;
                    if !core::ptr::eq(folio.pagemap(), pm) {
                        return Err(ENOENT);
                    }
                    T::read(pm, folio, pfn.pfn().ok_or(ENOENT)? - folio.pfn(), dst)?;
                }
            }
            out.write_slice(chunk)?;
        }
        Ok(())
    }

    /// HMM_DMIRROR_MIGRATE_TO_SYS: moves this GPU's pages of the range back.
    pub(super) fn migrate_to_sys(&self, c: &mut Cmd) -> Result {
        with_vram!(&self.gpu.vram, pm => self.migrate_to_sys_from(pm, c))
    }

    fn migrate_to_sys_from<T: VramKind>(&self, pm: &Pagemap<T>, c: &mut Cmd) -> Result {
        let start = usize::try_from(c.addr)?;
        let end = start + Self::bounce_len(c)?;
        let mm = self.mirror.mm().mmget_not_zero().ok_or(EINVAL)?;
        let guard = mm.mmap_read_lock();
        let mut addr = start;
        let mut total = 0u64;
        let mut oom = false;
        while addr < end {
            let (vma, next) = migration_chunk(&guard, addr, end)?;
            let mut mig =
                MigrateVma::<T>::setup(vma, addr, next, pm.owner(), T::SELECT | Select::COMPOUND)?;
            for i in 0..mig.len() {
                let Source::Device { folio, .. } = mig.source(i) else {
                    continue;
                };
                // FLAGS bit 0: this allocation fails, once.
                if self.fail_alloc() {
                    continue;
                }
                let new = match T::move_out(pm, folio) {
                    Ok(new) => new,
                    Err(e) if e == ENOMEM => {
                        oom |= folio.order() == 0;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                mig.set_system(i, new)?;
            }
            // cpages counts pages, migrated_to_ram folios.
            let moved = mig.migrate();
            let n = moved.count() as u64;
            let pages = moved.pages() as u64;
            drop(moved);
            let stats = pm.data().stats();
            stats.to_sys.fetch_add(n, Relaxed);
            stats.pages_to_ram.fetch_add(pages, Relaxed);
            total += pages;
            addr = next;
            might_sleep();
        }
        if oom {
            return Err(ENOMEM);
        }
        c.cpages = total;
        Ok(())
    }

    /// HMM_DMIRROR_RELEASE: evicts the pages this file moved into VRAM to
    /// system memory, wherever they are mapped now; other files' pages,
    /// and so other users', stay in VRAM. (test_hmm tears down all of its
    /// device memory; that is for unbind here.) `EBUSY` if some stay
    /// pinned.
    pub(super) fn release(&self) -> Result {
        with_vram!(&self.gpu.vram, pm => self.release_from(pm))
    }

    fn release_from<T: VramKind>(&self, pm: &Pagemap<T>) -> Result {
        let owners = pm.data().owners();
        for _ in 0..RELEASE_TRIES {
            let mut from = 0;
            while let Some((first, end)) = owners.next_run(from, self.id) {
                // At most EVICT_CHUNK pages a round, ending on a PMD
                // boundary: a run starts on a folio, so no folio straddles
                // two rounds.
                let end = end.min((first + EVICT_CHUNK) & !(PMD_PAGES - 1));
                from = end;
                // Only this file's pages are collected, not other users'.
                // One freed and handed to another file since the scan is
                // skipped: a collected page cannot change hands.
                let done = evict_range(pm, first, end - first, |folio| {
                    owners.get(folio.index()) == self.id
                })?;
                if done.no_memory {
                    return Err(ENOMEM);
                }
            }
            // A page that moved is untagged when it is freed; one that is
            // still tagged was locked or pinned: try it again.
            if owners.next_run(0, self.id).is_none() {
                return Ok(());
            }
            fsleep(Delta::from_millis(10));
        }
        Err(EBUSY)
    }
}
