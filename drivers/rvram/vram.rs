// SPDX-License-Identifier: GPL-2.0

//! VRAM geometry: how a BAR is carved into pages.

use kernel::{
    cgroup::dmem::{
        ChargeSlots,
        Region, //
    },
    page::PAGE_SIZE,
    prelude::*,
    sizes::SZ_2M,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

/// Largest VRAM rvram accepts (64 GiB): bounds every page index to `u32`.
const MAX_VRAM: u64 = 64 << 30;

/// The geometry of one device's VRAM.
///
/// # Invariants
///
/// `size` is a non-zero multiple of 2 MiB (one PMD, so that every VRAM page
/// can also be part of a THP-sized device folio) and at most [`MAX_VRAM`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VramLayout {
    size: u64,
}

impl VramLayout {
    /// Validates the length of the VRAM BAR.
    ///
    /// Returns `EINVAL` when the BAR cannot back device pages: empty, not a
    /// multiple of 2 MiB, or larger than 64 GiB.
    pub(crate) fn new(bar_len: u64) -> Result<Self> {
        if bar_len == 0 || bar_len % SZ_2M as u64 != 0 || bar_len > MAX_VRAM {
            return Err(EINVAL);
        }
        // INVARIANT: checked just above.
        Ok(Self { size: bar_len })
    }

    /// VRAM size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Number of base pages of VRAM.
    pub(crate) fn pages(&self) -> usize {
        // Cannot truncate: `size <= MAX_VRAM`, so the page count fits in `u32`.
        (self.size / PAGE_SIZE as u64) as usize
    }

    /// Byte offset in the BAR of VRAM page `index`, or `None` if out of range.
    pub(crate) fn page_offset(&self, index: usize) -> Option<usize> {
        if index < self.pages() {
            Some(index * PAGE_SIZE)
        } else {
            None
        }
    }
}

/// Which open file moved each VRAM page in: the file's id
/// (`Gpu::new_file_id`) from the page's allocation for a migration until
/// it is freed, 0 for a free page. `HMM_DMIRROR_RELEASE` evicts the pages
/// of the calling file only.
///
/// Every page of a folio carries the same id (set for the whole folio when
/// it is allocated, cleared when it is freed), so a run of pages with one
/// id starts and ends at folio boundaries.
pub(crate) struct Owners(KVVec<Atomic<u32>>);

impl Owners {
    pub(crate) fn new(nr: usize) -> Result<Self> {
        let mut v = KVVec::with_capacity(nr, GFP_KERNEL)?;
        for _ in 0..nr {
            v.push(Atomic::new(0), GFP_KERNEL)?;
        }
        Ok(Self(v))
    }

    /// Tags pages `index..index + nr`, a folio just allocated, with `id`.
    pub(crate) fn set(&self, index: usize, nr: usize, id: u32) {
        for o in self.0.iter().skip(index).take(nr) {
            o.store(id, Relaxed);
        }
    }

    /// The id of page `index`, 0 if out of range.
    pub(crate) fn get(&self, index: usize) -> u32 {
        self.0.get(index).map_or(0, |o| o.load(Relaxed))
    }

    /// The first run `first..end` of pages tagged `id` at or after `from`.
    pub(crate) fn next_run(&self, from: usize, id: u32) -> Option<(usize, usize)> {
        let tail = self.0.get(from..)?;
        let first = from + tail.iter().position(|o| o.load(Relaxed) == id)?;
        let len = self.0[first..]
            .iter()
            .position(|o| o.load(Relaxed) != id)
            .unwrap_or(self.0.len() - first);
        Some((first, first + len))
    }
}

/// The dmem cgroup charges of the VRAM pages that hold migrated process
/// memory, one page each, from the page's allocation for a migration until
/// it is freed.
///
/// A page is charged on its own, not with its folio, because a device THP
/// can be split in VRAM (a partial migration back, a partial `munmap()`),
/// and its pages are then freed one by one: each takes its charge with it.
/// Pages are freed wherever core mm drops their last reference, softirq
/// and hardirq included, so the charges are kept in lockless slots, one
/// pointer per VRAM page.
pub(crate) struct Charges(ChargeSlots);

impl Charges {
    /// The charges of `pages` VRAM pages, none charged.
    pub(crate) fn new(pages: usize) -> Result<Self> {
        Ok(Self(ChargeSlots::new(pages, PAGE_SIZE as u64)?))
    }

    /// Charges pages `index..index + nr`, a folio just allocated for a
    /// migration, to the caller's dmem cgroup for `region`; nothing without
    /// a region. `ENOSPC` over the cgroup's `dmem.max`: the pages charged
    /// so far stay charged until [`Charges::release`] (the folio is freed).
    pub(crate) fn charge(&self, region: Option<&Region>, index: usize, nr: usize) -> Result {
        let Some(region) = region else {
            return Ok(());
        };
        self.0
            .charge(region, index..index.checked_add(nr).ok_or(EINVAL)?)
    }

    /// Uncharges pages `index..index + nr`, a folio being freed. Takes no
    /// lock: safe in any context.
    pub(crate) fn release(&self, index: usize, nr: usize) {
        self.0.release(index..index.saturating_add(nr));
    }
}

#[kunit_tests(rvram_vram)]
mod tests {
    use super::*;

    #[test]
    fn accepts_pmd_multiples() -> Result {
        let l = VramLayout::new(256 << 20)?;
        assert_eq!(l.size(), 256 << 20);
        assert_eq!(l.pages(), (256 << 20) / PAGE_SIZE);
        assert_eq!(VramLayout::new(SZ_2M as u64)?.pages(), SZ_2M / PAGE_SIZE);
        assert!(VramLayout::new(MAX_VRAM).is_ok());
        Ok(())
    }

    #[test]
    fn rejects_bad_sizes() {
        assert_eq!(VramLayout::new(0), Err(EINVAL));
        assert_eq!(VramLayout::new(PAGE_SIZE as u64), Err(EINVAL));
        assert_eq!(VramLayout::new((3 << 20) as u64), Err(EINVAL));
        assert_eq!(VramLayout::new(MAX_VRAM + SZ_2M as u64), Err(EINVAL));
    }

    #[test]
    fn owner_runs_are_found_per_id() -> Result {
        let o = Owners::new(16)?;
        assert_eq!(o.next_run(0, 1), None);
        o.set(2, 2, 1);
        o.set(4, 1, 2);
        o.set(5, 3, 1);
        o.set(15, 1, 1);
        assert_eq!(o.next_run(0, 1), Some((2, 4)));
        assert_eq!(o.next_run(4, 1), Some((5, 8)));
        assert_eq!(o.next_run(8, 1), Some((15, 16)));
        assert_eq!(o.next_run(16, 1), None);
        assert_eq!(o.next_run(0, 2), Some((4, 5)));
        assert_eq!((o.get(4), o.get(16)), (2, 0));
        o.set(0, 16, 0);
        assert_eq!(o.next_run(0, 1), None);
        Ok(())
    }

    #[test]
    fn page_offsets_are_bounded() -> Result {
        let l = VramLayout::new(SZ_2M as u64)?;
        assert_eq!(l.page_offset(0), Some(0));
        assert_eq!(l.page_offset(l.pages() - 1), Some(SZ_2M - PAGE_SIZE));
        assert_eq!(l.page_offset(l.pages()), None);
        assert_eq!(l.page_offset(usize::MAX), None);
        Ok(())
    }
}
