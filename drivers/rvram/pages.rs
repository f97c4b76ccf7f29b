// SPDX-License-Identifier: GPL-2.0

//! The owner side of VRAM pages: what the kernel calls back for them
//! ([`PagemapOps`]) and how rvram copies them, for each kind of VRAM.
//!
//! - [`PrivatePages`]: device-private pages, which the CPU cannot reach: a
//!   CPU fault migrates the page to system memory, and a peer that can
//!   reach the BAR accesses the page there, as its alias (the pagemap's
//!   [`kernel::mm::pagemap::LinearAlias`]);
//! - [`CoherentPages`]: device-coherent pages, the BAR itself, which the CPU
//!   maps as it maps system memory.
//!
//! [`VramKind`] is what migrations and device accesses are written against,
//! once for both kinds.

use crate::{
    stats::Stats,
    vram::{
        Charges,
        Owners, //
    },
};
use kernel::{
    io::Io,
    mm::{
        migrate::{
            MigrateVma,
            NewSystemFolio,
            Select,
            Source, //
        },
        pagemap::{
            Coherent,
            DeviceFault,
            DeviceFolio,
            DevicePrivateOps,
            FaultError,
            NewFolio,
            Pagemap,
            PagemapOps,
            Private, //
        },
    },
    page::PAGE_SIZE,
    pci,
    prelude::*,
    sync::atomic::Relaxed,
    time::{
        Instant,
        Monotonic, //
    },
};

/// What rvram keeps of a GPU's VRAM pages, whatever their kind.
pub(crate) struct Books {
    /// The GPU's event counters.
    pub(crate) stats: Stats,
    /// Which file moved each page in.
    pub(crate) owners: Owners,
    /// The dmem cgroup charges of the pages migrated in.
    pub(crate) charges: Charges,
}

impl Books {
    /// The books of `pages` VRAM pages, none of them in use.
    pub(crate) fn new(pages: usize) -> Result<Self> {
        Ok(Self {
            stats: Stats::new(),
            owners: Owners::new(pages)?,
            charges: Charges::new(pages)?,
        })
    }

    /// `folio` is free again: it has no owner and no charge.
    fn free<T: PagemapOps>(&self, folio: &DeviceFolio<T>) {
        self.owners.set(folio.index(), folio.nr_pages(), 0);
        self.charges.release(folio.index(), folio.nr_pages());
    }
}

/// The owner side of rvram's device-private pages: VRAM access and counters.
pub(crate) struct PrivatePages {
    pub(crate) vram: pci::DevresBar,
    pub(crate) books: Books,
}

impl PrivatePages {
    fn offset(index: usize) -> Result<usize> {
        index.checked_mul(PAGE_SIZE).ok_or(EINVAL)
    }

    /// Copies VRAM page `index` into `dst` (one page).
    pub(crate) fn read_page(&self, index: usize, dst: &mut [u8]) -> Result {
        if dst.len() != PAGE_SIZE {
            return Err(EINVAL);
        }
        let bar = self.vram.try_access().ok_or(ENODEV)?;
        copy_from_vram(&bar, Self::offset(index)?, dst)
    }

    /// Copies `src` (one page) into VRAM page `index`.
    pub(crate) fn write_page(&self, index: usize, src: &[u8]) -> Result {
        if src.len() != PAGE_SIZE {
            return Err(EINVAL);
        }
        let bar = self.vram.try_access().ok_or(ENODEV)?;
        copy_to_vram(&bar, Self::offset(index)?, src)
    }

    /// Copies the VRAM pages from `index` on into every page of `dst`.
    pub(crate) fn read_pages(&self, index: usize, dst: &mut NewSystemFolio) -> Result {
        let bar = self.vram.try_access().ok_or(ENODEV)?;
        for p in 0..dst.nr_pages() {
            let offset = Self::offset(index.checked_add(p).ok_or(EINVAL)?)?;
            dst.with_page_mut(p, |b| copy_from_vram(&bar, offset, b))??;
        }
        Ok(())
    }

    /// Zeroes VRAM page `index`.
    pub(crate) fn zero_page(&self, index: usize) -> Result {
        /// A page of zeroes, aligned for 64-bit copies.
        #[repr(C, align(8))]
        struct Zeroes([u8; PAGE_SIZE]);
        static ZERO: Zeroes = Zeroes([0; PAGE_SIZE]);
        self.write_page(index, &ZERO.0)
    }
}

impl PagemapOps for PrivatePages {
    type Kind = Private;

    fn folio_free(pm: &Pagemap<Self>, folio: &DeviceFolio<Self>) {
        pm.data().books.free(folio);
    }
}

impl DevicePrivateOps for PrivatePages {
    fn migrate_to_ram(
        pm: &Pagemap<Self>,
        fault: &DeviceFault<'_, Self>,
    ) -> core::result::Result<(), FaultError> {
        let data = pm.data();
        let start = Instant::<Monotonic>::now();
        data.books.stats.cpu_faults.fetch_add(1, Relaxed);
        let r = Self::fault_to_ram(pm, fault);
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(0);
        data.books.stats.fault_ns.fetch_add(ns, Relaxed);
        r
    }
}

impl PrivatePages {
    /// Migrates the folio of a faulting address to system memory.
    fn fault_to_ram(
        pm: &Pagemap<Self>,
        fault: &DeviceFault<'_, Self>,
    ) -> core::result::Result<(), FaultError> {
        let mut mig = MigrateVma::for_fault(fault, pm.owner()).map_err(|_| FaultError::SigBus)?;
        for i in 0..mig.len() {
            let Source::Device { folio, .. } = mig.source(i) else {
                continue;
            };
            let new = Self::move_out(pm, folio).map_err(|e| {
                if e == ENOMEM {
                    FaultError::Oom
                } else {
                    FaultError::SigBus
                }
            })?;
            mig.set_system(i, new).map_err(|_| FaultError::SigBus)?;
        }
        let moved = mig.migrate();
        let stats = &pm.data().books.stats;
        stats.to_sys.fetch_add(moved.count() as u64, Relaxed);
        stats.pages_to_ram.fetch_add(moved.pages() as u64, Relaxed);
        Ok(())
    }
}

/// The owner side of rvram's device-coherent pages: the CPU reaches them
/// through the kernel's linear map, so only counters are left.
pub(crate) struct CoherentPages {
    pub(crate) books: Books,
}

impl PagemapOps for CoherentPages {
    type Kind = Coherent;

    fn folio_free(pm: &Pagemap<Self>, folio: &DeviceFolio<Self>) {
        pm.data().books.free(folio);
    }
}

/// What rvram does with VRAM pages of either kind: migrations and device
/// accesses are written once against this trait.
pub(crate) trait VramKind: PagemapOps {
    /// The device pages of this kind a migration to system memory collects.
    const SELECT: Select;

    /// Whether users can hold pages of this kind for as long as they like:
    /// a device-coherent page can be pinned (`vmsplice()` into a pipe).
    /// Nothing holds a device-private page for long (it cannot be pinned,
    /// and what locks it finishes), so eviction waits for those.
    const PINNABLE: bool;

    /// The GPU's books of its VRAM pages.
    fn books(&self) -> &Books;

    /// The GPU's event counters.
    fn stats(&self) -> &Stats {
        &self.books().stats
    }

    /// Which file moved each page in.
    fn owners(&self) -> &Owners {
        &self.books().owners
    }

    /// The dmem cgroup charges of the pages migrated in.
    fn charges(&self) -> &Charges {
        &self.books().charges
    }

    /// Fills page `p` of `dst`, a new VRAM folio, with `src` (one page), or
    /// with zeroes for `None`.
    fn fill(
        pm: &Pagemap<Self>,
        dst: &mut NewFolio<'_, Self>,
        p: usize,
        src: Option<&[u8]>,
    ) -> Result;

    /// Copies page `p` of the VRAM folio `src` into `dst` (one page).
    fn read(pm: &Pagemap<Self>, src: &DeviceFolio<Self>, p: usize, dst: &mut [u8]) -> Result;

    /// The one way out of VRAM, for CPU faults, `HMM_DMIRROR_MIGRATE_TO_SYS`
    /// and eviction: a new system folio of `src`'s order that holds its
    /// data. `ENOMEM`, counted in `alloc_failures`, when system memory has
    /// none for it now.
    fn move_out(pm: &Pagemap<Self>, src: &DeviceFolio<Self>) -> Result<NewSystemFolio> {
        let mut new = NewSystemFolio::alloc(src.order()).inspect_err(|_| {
            pm.data().stats().alloc_fail.fetch_add(1, Relaxed);
        })?;
        Self::copy_out(pm, src, &mut new)?;
        Ok(new)
    }

    /// Copies the VRAM folio `src` into `dst`, a system folio of its order.
    fn copy_out(pm: &Pagemap<Self>, src: &DeviceFolio<Self>, dst: &mut NewSystemFolio) -> Result {
        for p in 0..dst.nr_pages() {
            dst.with_page_mut(p, |b| Self::read(pm, src, p, b))??;
        }
        Ok(())
    }
}

impl VramKind for PrivatePages {
    const SELECT: Select = Select::DEVICE_PRIVATE;
    const PINNABLE: bool = false;

    fn books(&self) -> &Books {
        &self.books
    }

    fn fill(
        pm: &Pagemap<Self>,
        dst: &mut NewFolio<'_, Self>,
        p: usize,
        src: Option<&[u8]>,
    ) -> Result {
        let index = dst.index().checked_add(p).ok_or(EINVAL)?;
        match src {
            Some(b) => pm.data().write_page(index, b),
            None => pm.data().zero_page(index),
        }
    }

    fn read(pm: &Pagemap<Self>, src: &DeviceFolio<Self>, p: usize, dst: &mut [u8]) -> Result {
        pm.data()
            .read_page(src.index().checked_add(p).ok_or(EINVAL)?, dst)
    }

    fn copy_out(pm: &Pagemap<Self>, src: &DeviceFolio<Self>, dst: &mut NewSystemFolio) -> Result {
        pm.data().read_pages(src.index(), dst)
    }
}

impl VramKind for CoherentPages {
    const SELECT: Select = Select::DEVICE_COHERENT;
    const PINNABLE: bool = true;

    fn books(&self) -> &Books {
        &self.books
    }

    fn fill(
        _pm: &Pagemap<Self>,
        dst: &mut NewFolio<'_, Self>,
        p: usize,
        src: Option<&[u8]>,
    ) -> Result {
        dst.with_page_mut(p, |d| match src {
            Some(b) => d.copy_from_slice(b),
            None => d.fill(0),
        })
    }

    fn read(_pm: &Pagemap<Self>, src: &DeviceFolio<Self>, p: usize, dst: &mut [u8]) -> Result {
        src.read_page(p, dst)
    }
}

/// Copies `dst.len()` bytes of VRAM at byte `offset` into `dst` (8-byte
/// aligned, a multiple of 8 bytes long) with 64-bit reads.
fn copy_from_vram(bar: &pci::Bar<'_>, offset: usize, dst: &mut [u8]) -> Result {
    bar.try_bytes(offset, dst.len())?.copy_to_slice64(dst)
}

/// Copies `src` (8-byte aligned, a multiple of 8 bytes long) into VRAM at
/// byte `offset` with 64-bit writes.
fn copy_to_vram(bar: &pci::Bar<'_>, offset: usize, src: &[u8]) -> Result {
    bar.try_bytes(offset, src.len())?.copy_from_slice64(src)
}
