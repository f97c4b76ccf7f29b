// SPDX-License-Identifier: GPL-2.0

//! Migration of process memory to and from device-private memory.
//!
//! [`MigrateVma`] wraps `migrate_vma_setup()`, `migrate_vma_pages()` and
//! `migrate_vma_finalize()` as one typed flow over a range of a VMA:
//!
//! 1. [`MigrateVma::setup`] (or [`MigrateVma::for_fault`] from
//!    `migrate_to_ram`) collects, locks and unmaps the source pages;
//! 2. the driver looks at each [`Source`], copies its data into a new folio
//!    and hands that over with [`MigrateVma::set_device`] or
//!    [`MigrateVma::set_system`];
//! 3. [`MigrateVma::migrate`] moves the mappings over and returns
//!    [`Migrated`], which tells which entries succeeded;
//! 4. dropping [`Migrated`] finalizes.
//!
//! Every step consumes the previous state, so finalizing twice does not
//! compile, and dropping a flow at any point completes it correctly:
//! entries without a destination are restored. A destination is only
//! accepted already filled, so completing a flow never exposes a page whose
//! copy was not done.
//!
//! [`Eviction`] is the same flow for `migrate_device_range()`: it moves every
//! page of a [`Pagemap`] range back to system memory, without a VMA, before
//! the device goes away.
//!
//! Lifetimes: a flow over a VMA borrows the [`VmaRef`], which is only
//! reachable under the mmap lock, so the lock is held from setup to
//! finalize as `migrate_vma_setup()` requires.
//!
//! Device page tables: setup invalidates every interval notifier over the
//! range, the migrating device's own [`crate::mm::hmm::Mirror`]s included,
//! before any source page can be freed. A device that wants to access the
//! pages it migrated maps them with [`crate::mm::hmm::Mirror::fault`]
//! afterwards, which reports its own device-private pages in place.
//!
//! C header: [`include/linux/migrate.h`](srctree/include/linux/migrate.h)

use crate::{
    bindings,
    mm::{
        pagemap::{
            DeviceFault,
            DeviceFolio,
            DevicePrivateOps,
            NewFolio,
            Owner,
            Pagemap,
            PagemapOps,
            MAX_FOLIO_ORDER, //
        },
        virt::VmaRef, //
    },
    page::PAGE_SIZE,
    prelude::*, //
};
use crate::{
    error::to_result,
    ffi::c_ulong, //
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

const PFN_VALID: c_ulong = bindings::MIGRATE_PFN_VALID as c_ulong;
const PFN_MIGRATE: c_ulong = bindings::MIGRATE_PFN_MIGRATE as c_ulong;
const PFN_WRITE: c_ulong = bindings::MIGRATE_PFN_WRITE as c_ulong;
const PFN_COMPOUND: c_ulong = bindings::MIGRATE_PFN_COMPOUND as c_ulong;

/// Which pages a [`MigrateVma`] collects.
///
/// # Examples
///
/// ```
/// use kernel::mm::migrate::Select;
///
/// // Anonymous memory, with PMD-mapped THPs collected whole.
/// let select = Select::SYSTEM | Select::COMPOUND;
/// assert_ne!(select, Select::SYSTEM);
/// assert_eq!(select | Select::COMPOUND, select);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Select(u32);

impl Select {
    /// System memory (anonymous pages, the zero page, and holes).
    pub const SYSTEM: Select = Select(bindings::migrate_vma_direction_MIGRATE_VMA_SELECT_SYSTEM);
    /// Device-private pages whose pagemap owner is the flow's owner.
    pub const DEVICE_PRIVATE: Select =
        Select(bindings::migrate_vma_direction_MIGRATE_VMA_SELECT_DEVICE_PRIVATE);
    /// Device-coherent pages whose pagemap owner is the flow's owner.
    pub const DEVICE_COHERENT: Select =
        Select(bindings::migrate_vma_direction_MIGRATE_VMA_SELECT_DEVICE_COHERENT);
    /// Collect PMD-mapped folios whole instead of splitting them.
    pub const COMPOUND: Select =
        Select(bindings::migrate_vma_direction_MIGRATE_VMA_SELECT_COMPOUND);
}

impl core::ops::BitOr for Select {
    type Output = Select;

    fn bitor(self, rhs: Select) -> Select {
        Select(self.0 | rhs.0)
    }
}

/// What one entry of a migration holds after collection.
pub enum Source<'a, T: PagemapOps> {
    /// Not migrating: not collected, or the tail of a compound entry.
    Skip,
    /// Migrating, with no page behind it: the destination must be zeroed.
    Hole {
        /// The hole spans a PMD (`1 << MAX_FOLIO_ORDER` entries).
        compound: bool,
    },
    /// A system-memory folio, locked and unmapped: its content is stable.
    System {
        /// The folio.
        folio: SystemFolio<'a>,
        /// The mapping was writable.
        write: bool,
    },
    /// A device folio of a `Pagemap<T>` (device-private or device-coherent,
    /// as `T`'s kind).
    Device {
        /// The folio.
        folio: &'a DeviceFolio<T>,
        /// The mapping was writable.
        write: bool,
    },
}

/// A system-memory folio collected by a migration.
///
/// # Invariants
///
/// `folio` is a locked, referenced system-memory folio for `'a`, which the
/// migration has unmapped and will move: `migrate_vma_setup()` leaves out
/// (clears `MIGRATE_PFN_MIGRATE` of) every folio with references beyond
/// its own and the mappings it removed, a pin included, so no process,
/// CPU or device can write it while `'a` lasts.
#[derive(Clone, Copy)]
pub struct SystemFolio<'a> {
    folio: NonNull<bindings::folio>,
    _p: PhantomData<&'a bindings::folio>,
}

impl SystemFolio<'_> {
    /// The number of pages.
    pub fn nr_pages(&self) -> usize {
        // SAFETY: The folio is valid (type invariant).
        1 << unsafe { bindings::folio_order(self.folio.as_ptr()) }
    }

    /// Calls `f` with the content of page `i` of the folio; `EINVAL` if out of range.
    pub fn with_page<R>(&self, i: usize, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        if i >= self.nr_pages() {
            return Err(EINVAL);
        }
        // SAFETY: The folio is valid, `i` is in range; the page is a system
        // page, which `kmap_local_page()` can map.
        let addr =
            unsafe { bindings::kmap_local_page(bindings::folio_page(self.folio.as_ptr(), i)) };
        // SAFETY: `addr` maps `PAGE_SIZE` bytes that nobody writes while
        // the folio is collected: unmapped, with no other reference (type
        // invariant), so a shared slice over them is sound for the call.
        let r = f(unsafe { core::slice::from_raw_parts(addr.cast::<u8>(), PAGE_SIZE) });
        // SAFETY: `addr` was returned by `kmap_local_page()` just above.
        unsafe { bindings::kunmap_local(addr) };
        Ok(r)
    }
}

/// A new system-memory folio to migrate into: locked, with one reference.
///
/// # Invariants
///
/// `folio` is a locked system-memory folio of which this object owns one
/// reference.
pub struct NewSystemFolio {
    folio: NonNull<bindings::folio>,
}

// SAFETY: The folio is owned and may be released from any thread.
unsafe impl Send for NewSystemFolio {}

impl NewSystemFolio {
    /// Allocates a folio of `2^order` pages, `order <= MAX_FOLIO_ORDER`.
    ///
    /// The folio receives the data of a device folio and then takes its
    /// place in a process' address space, so it is allocated as a page
    /// fault allocates anonymous memory: movable, possibly from high
    /// memory (`GFP_HIGHUSER_MOVABLE`; [`Self::with_page_mut`] maps it).
    /// A folio larger than a page is allowed to fail quietly: callers fall
    /// back to single pages.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::{migrate::NewSystemFolio, pagemap::MAX_FOLIO_ORDER};
    /// use kernel::prelude::*;
    ///
    /// let mut folio = NewSystemFolio::alloc(0)?;
    /// assert_eq!(folio.nr_pages(), 1);
    /// // Fill it as the copy from device memory would.
    /// folio.with_page_mut(0, |bytes| bytes.fill(0x5a))?;
    /// assert_eq!(folio.with_page_mut(1, |_| ()), Err(EINVAL));
    /// assert!(NewSystemFolio::alloc(MAX_FOLIO_ORDER + 1).is_err());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn alloc(order: u32) -> Result<Self> {
        if order > MAX_FOLIO_ORDER {
            return Err(EINVAL);
        }
        let gfp = if order > 0 {
            bindings::GFP_HIGHUSER_MOVABLE | bindings::__GFP_NOWARN
        } else {
            bindings::GFP_HIGHUSER_MOVABLE
        };
        // SAFETY: Plain allocation.
        let folio = unsafe { bindings::folio_alloc(gfp, order) };
        let folio = NonNull::new(folio).ok_or(ENOMEM)?;
        // SAFETY: The folio is new and not visible to anyone else.
        unsafe { bindings::folio_lock(folio.as_ptr()) };
        // INVARIANT: Locked above; the allocation reference is ours.
        Ok(Self { folio })
    }

    /// The number of pages.
    pub fn nr_pages(&self) -> usize {
        // SAFETY: The folio is valid (type invariant).
        1 << unsafe { bindings::folio_order(self.folio.as_ptr()) }
    }

    /// Calls `f` to fill page `i` of the folio; `EINVAL` if out of range.
    pub fn with_page_mut<R>(&mut self, i: usize, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        if i >= self.nr_pages() {
            return Err(EINVAL);
        }
        // SAFETY: The folio is valid and `i` in range.
        let addr =
            unsafe { bindings::kmap_local_page(bindings::folio_page(self.folio.as_ptr(), i)) };
        // SAFETY: `addr` maps `PAGE_SIZE` bytes of a page nobody else can see yet.
        let r = f(unsafe { core::slice::from_raw_parts_mut(addr.cast::<u8>(), PAGE_SIZE) });
        // SAFETY: `addr` was returned by `kmap_local_page()` just above.
        unsafe { bindings::kunmap_local(addr) };
        Ok(r)
    }

    fn into_raw(self) -> *mut bindings::folio {
        let f = self.folio.as_ptr();
        core::mem::forget(self);
        f
    }
}

impl Drop for NewSystemFolio {
    fn drop(&mut self) {
        // SAFETY: We own the lock and one reference (type invariant).
        unsafe {
            bindings::folio_unlock(self.folio.as_ptr());
            bindings::folio_put(self.folio.as_ptr());
        }
    }
}

/// The src/dst arrays and completion logic shared by both flows.
///
/// # Invariants
///
/// After collection, `src` is as the migrate core left it; a non-zero `dst`
/// entry carries a locked, referenced folio whose lock and reference belong
/// to the migrate core, already filled with the entry's data.
struct Pfns {
    src: KVVec<c_ulong>,
    dst: KVVec<c_ulong>,
}

impl Pfns {
    /// Arrays for `n` entries. Without a warning when memory is short: the
    /// callers return `ENOMEM` for a size a user asked for, or retry (an
    /// eviction, which may retry for as long as memory stays short).
    fn new(n: usize) -> Result<Self> {
        let gfp = GFP_KERNEL | __GFP_NOWARN;
        let mut src = KVVec::with_capacity(n, gfp)?;
        let mut dst = KVVec::with_capacity(n, gfp)?;
        src.resize(n, 0, gfp)?;
        dst.resize(n, 0, gfp)?;
        Ok(Self { src, dst })
    }

    fn source<T: PagemapOps>(&self, i: usize) -> Source<'_, T> {
        let Some(&e) = self.src.get(i) else {
            return Source::Skip;
        };
        if e & PFN_MIGRATE == 0 {
            return Source::Skip;
        }
        let write = e & PFN_WRITE != 0;
        if e & PFN_VALID == 0 {
            return Source::Hole {
                compound: e & PFN_COMPOUND != 0,
            };
        }
        // SAFETY: A valid entry encodes a page.
        let page = unsafe { bindings::migrate_pfn_to_page(e) };
        // SAFETY: The core holds a reference on collected pages until finalize.
        if let Some(pm) = unsafe { Pagemap::<T>::of_page(page) } {
            let _ = pm;
            // SAFETY: A page of a `Pagemap<T>`, referenced for `'_`.
            let folio = unsafe { DeviceFolio::from_raw(bindings::page_folio(page)) };
            return Source::Device { folio, write };
        }
        // SAFETY: As above.
        if unsafe { bindings::is_zone_device_page(page) } {
            // Another pagemap's page: not ours to copy.
            return Source::Skip;
        }
        // SAFETY: The page is valid, hence it has a folio.
        let folio = unsafe { NonNull::new_unchecked(bindings::page_folio(page)) };
        Source::System {
            // INVARIANT: An entry still marked `PFN_MIGRATE` after setup is
            // locked, unmapped and referenced by the migration alone until
            // finalize.
            folio: SystemFolio {
                folio,
                _p: PhantomData,
            },
            write,
        }
    }

    /// Checks that entry `i` takes a destination of `nr` pages: a migrating
    /// entry, or a page of a migrating compound entry given per-page
    /// destinations (the core then splits the source).
    fn check_dst(&self, i: usize, nr: usize) -> Result {
        const PMD_NR: usize = 1 << MAX_FOLIO_ORDER;
        let e = *self.src.get(i).ok_or(EINVAL)?;
        if self.dst[i] != 0 {
            return Err(EINVAL);
        }
        // A compound entry's tail entries are 0: find the head, if any.
        let head = (i.saturating_sub(PMD_NR - 1)..i)
            .rev()
            .find(|&j| self.src[j] != 0);
        let in_compound = e == 0
            && head.is_some_and(|h| {
                self.src[h] & (PFN_MIGRATE | PFN_COMPOUND) == PFN_MIGRATE | PFN_COMPOUND
                    && self.dst[h] & PFN_COMPOUND == 0
            });
        if e & PFN_MIGRATE == 0 && !in_compound {
            return Err(EINVAL);
        }
        match nr {
            1 => Ok(()),
            n if e & PFN_COMPOUND != 0 && n == PMD_NR && i + n <= self.src.len() => Ok(()),
            _ => Err(EINVAL),
        }
    }

    fn set_dst(&mut self, i: usize, folio: *mut bindings::folio, nr: usize) {
        // SAFETY: `folio` is valid.
        let pfn = unsafe { bindings::folio_pfn(folio) };
        // SAFETY: Encoding only.
        let mut e = unsafe { bindings::migrate_pfn(pfn) };
        if nr > 1 {
            e |= PFN_COMPOUND;
        }
        // INVARIANT: The caller hands over the folio's lock and reference.
        self.dst[i] = e;
    }

    fn succeeded(&self, i: usize) -> bool {
        self.src.get(i).is_some_and(|e| e & PFN_MIGRATE != 0) && self.dst[i] != 0
    }
}

/// A migration of a range of a VMA, collected and waiting for destinations.
///
/// # Invariants
///
/// `args` was passed to `migrate_vma_setup()`, which succeeded; its `src`
/// and `dst` point into `pfns`, and `migrate_vma_pages()` has not run.
pub struct MigrateVma<'a, T: PagemapOps> {
    args: bindings::migrate_vma,
    pfns: Pfns,
    _p: PhantomData<(&'a VmaRef, T)>,
}

impl<'a, T: PagemapOps> MigrateVma<'a, T> {
    /// Collects the pages of `[start, end)` of `vma` selected by `select`.
    ///
    /// `start` and `end` must be page aligned and within the VMA; the range
    /// must not exceed 512 pages per flow (callers loop). `owner` selects
    /// device-private pages and is passed to the MMU notifier event
    /// (`MMU_NOTIFY_MIGRATE`) so that the owner's own invalidation callback
    /// can recognise it.
    ///
    /// # Examples
    ///
    /// Moving one page of a process into device memory; `copy_to_device`
    /// stands for the driver's copy engine:
    ///
    /// ```
    /// use kernel::mm::{
    ///     migrate::{MigrateVma, Select, Source},
    ///     pagemap::{PagemapOps, Pagemap},
    ///     MmWithUser,
    /// };
    /// use kernel::{page::PAGE_SIZE, prelude::*};
    ///
    /// fn copy_to_device(_index: usize, _bytes: &[u8]) {}
    ///
    /// fn to_device<T: PagemapOps>(
    ///     pm: &Pagemap<T>,
    ///     mm: &MmWithUser,
    ///     addr: usize,
    /// ) -> Result<bool> {
    ///     let guard = mm.mmap_read_lock();
    ///     let vma = guard.vma_lookup(addr).ok_or(EFAULT)?;
    ///     let end = addr + PAGE_SIZE;
    ///     let mut mig = MigrateVma::<T>::setup(vma, addr, end, pm.owner(), Select::SYSTEM)?;
    ///     let dst = pm.alloc_folio(0)?;
    ///     match mig.source(0) {
    ///         Source::System { folio, .. } => {
    ///             folio.with_page(0, |b| copy_to_device(dst.index(), b))?
    ///         }
    ///         Source::Hole { .. } => copy_to_device(dst.index(), &[0; PAGE_SIZE]),
    ///         // Not collected (e.g. pinned): dropping `mig` restores it.
    ///         _ => return Ok(false),
    ///     }
    ///     mig.set_device(0, dst)?;
    ///     let moved = mig.migrate();
    ///     // Dropping `moved` finalizes the migration.
    ///     Ok(moved.succeeded(0))
    /// }
    /// ```
    pub fn setup(
        vma: &'a VmaRef,
        start: usize,
        end: usize,
        owner: Owner,
        select: Select,
    ) -> Result<Self> {
        Self::setup_inner(vma, start, end, owner, select, core::ptr::null_mut())
    }

    fn setup_inner(
        vma: &'a VmaRef,
        start: usize,
        end: usize,
        owner: Owner,
        select: Select,
        fault_page: *mut bindings::page,
    ) -> Result<Self> {
        if start % PAGE_SIZE != 0 || end % PAGE_SIZE != 0 || start >= end {
            return Err(EINVAL);
        }
        let n = (end - start) / PAGE_SIZE;
        if n > 1 << MAX_FOLIO_ORDER {
            return Err(EINVAL);
        }
        let mut pfns = Pfns::new(n)?;
        // SAFETY: All-zeroes is a valid `migrate_vma`.
        let mut args: bindings::migrate_vma = unsafe { core::mem::zeroed() };
        args.vma = vma.as_ptr();
        args.start = start;
        args.end = end;
        args.src = pfns.src.as_mut_ptr();
        args.dst = pfns.dst.as_mut_ptr();
        args.pgmap_owner = owner.as_ptr();
        args.flags = select.0 as c_ulong;
        args.fault_page = fault_page;
        // SAFETY: `vma` is valid and its mmap lock is held for `'a`; the arrays
        // hold `n` entries each and live in `pfns`, which moves with `args`
        // but whose heap buffers do not.
        to_result(unsafe { bindings::migrate_vma_setup(&mut args) })?;
        // INVARIANT: Setup succeeded.
        Ok(Self {
            args,
            pfns,
            _p: PhantomData,
        })
    }

    /// The number of entries (pages) of the range.
    pub fn len(&self) -> usize {
        self.pfns.src.len()
    }

    /// Whether the range is empty (it never is after a successful setup).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of entries collected for migration.
    pub fn collected(&self) -> usize {
        self.args.cpages
    }

    /// The virtual address of entry `i`.
    pub fn address(&self, i: usize) -> usize {
        self.args.start + i * PAGE_SIZE
    }

    /// Entry `i` as collected.
    pub fn source(&self, i: usize) -> Source<'_, T> {
        self.pfns.source(i)
    }

    /// Makes `folio`, which must already hold entry `i`'s data, its device
    /// destination. A PMD-sized folio goes to the head of a compound entry.
    ///
    /// `EINVAL` if the entry is not migrating, already has a destination,
    /// or the size does not fit (then `folio` is dropped, hence freed).
    pub fn set_device(&mut self, i: usize, folio: NewFolio<'_, T>) -> Result {
        let nr = folio.nr_pages();
        self.pfns.check_dst(i, nr)?;
        self.pfns.set_dst(i, folio.into_raw(), nr);
        Ok(())
    }

    /// Makes `folio`, which must already hold entry `i`'s data, its system
    /// memory destination. Same rules as [`Self::set_device`].
    pub fn set_system(&mut self, i: usize, folio: NewSystemFolio) -> Result {
        let nr = folio.nr_pages();
        self.pfns.check_dst(i, nr)?;
        self.pfns.set_dst(i, folio.into_raw(), nr);
        Ok(())
    }

    /// Moves the mappings of every entry that has a destination.
    pub fn migrate(self) -> Migrated<'a, T> {
        let mut this = core::mem::ManuallyDrop::new(self);
        // SAFETY: Setup succeeded and pages has not run (type invariant).
        unsafe { bindings::migrate_vma_pages(&mut this.args) };
        // SAFETY: `this` is not used again; ownership of its fields moves on.
        let (args, pfns) = unsafe { (core::ptr::read(&this.args), core::ptr::read(&this.pfns)) };
        Migrated {
            args,
            pfns,
            _p: PhantomData,
        }
    }
}

impl<'a, T: DevicePrivateOps> MigrateVma<'a, T> {
    /// The flow a [`DevicePrivateOps::migrate_to_ram`] implementation runs:
    /// collects the faulting folio (a whole PMD if it is one and the VMA
    /// allows it, otherwise its page) for migration to system memory.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::{
    ///     migrate::{MigrateVma, NewSystemFolio, Source},
    ///     pagemap::{
    ///         DeviceFault, DeviceFolio, DevicePrivateOps, FaultError, PagemapOps, Pagemap,
    ///         Private,
    ///     },
    /// };
    /// use kernel::prelude::*;
    ///
    /// struct Vram;
    ///
    /// impl Vram {
    ///     fn read_page(&self, _index: usize, _dst: &mut [u8]) {}
    /// }
    ///
    /// impl PagemapOps for Vram {
    ///     type Kind = Private;
    ///     fn folio_free(_pm: &Pagemap<Self>, _folio: &DeviceFolio<Self>) {}
    /// }
    ///
    /// impl DevicePrivateOps for Vram {
    ///     fn migrate_to_ram(
    ///         pm: &Pagemap<Self>,
    ///         fault: &DeviceFault<'_, Self>,
    ///     ) -> core::result::Result<(), FaultError> {
    ///         let mut mig =
    ///             MigrateVma::for_fault(fault, pm.owner()).map_err(|_| FaultError::SigBus)?;
    ///         for i in 0..mig.len() {
    ///             let Source::Device { folio, .. } = mig.source(i) else {
    ///                 continue;
    ///             };
    ///             let (index, order) = (folio.index(), folio.order());
    ///             let mut new =
    ///                 NewSystemFolio::alloc(order).map_err(|_| FaultError::Oom)?;
    ///             for p in 0..new.nr_pages() {
    ///                 new.with_page_mut(p, |b| pm.data().read_page(index + p, b))
    ///                     .map_err(|_| FaultError::SigBus)?;
    ///             }
    ///             mig.set_system(i, new).map_err(|_| FaultError::SigBus)?;
    ///         }
    ///         // Dropping the result finalizes.
    ///         drop(mig.migrate());
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn for_fault(fault: &'a DeviceFault<'_, T>, owner: Owner) -> Result<Self> {
        let vma = fault.vma();
        let order = fault.folio().order();
        // SAFETY: `vmf` is valid (`DeviceFault` invariant).
        let pte_mapped = unsafe { !(*fault.as_raw()).pte.is_null() };
        let size = PAGE_SIZE << if pte_mapped { 0 } else { order };
        let start = fault.address() & !(size - 1);
        let (start, size, select) =
            if start >= vma.start() && start + size <= vma.end() && size > PAGE_SIZE {
                (start, size, Select::DEVICE_PRIVATE | Select::COMPOUND)
            } else {
                (
                    fault.address() & !(PAGE_SIZE - 1),
                    PAGE_SIZE,
                    Select::DEVICE_PRIVATE,
                )
            };
        // SAFETY: `vmf->page` is the locked faulting page (`DeviceFault` invariant).
        let page = unsafe { (*fault.as_raw()).page };
        Self::setup_inner(vma, start, start + size, owner, select, page)
    }
}

impl<T: PagemapOps> Drop for MigrateVma<'_, T> {
    fn drop(&mut self) {
        // Complete the flow: entries without a destination are restored.
        // SAFETY: Setup succeeded and pages has not run (type invariant).
        unsafe {
            bindings::migrate_vma_pages(&mut self.args);
            bindings::migrate_vma_finalize(&mut self.args);
        }
    }
}

/// A migration whose mappings have moved; dropping it finalizes.
///
/// The source and destination pages stay locked while this lives, so no CPU
/// fault can race with the driver's bookkeeping of the entries that
/// [`Migrated::succeeded`].
///
/// # Invariants
///
/// `migrate_vma_pages()` ran on `args` and `migrate_vma_finalize()` has not.
pub struct Migrated<'a, T: PagemapOps> {
    args: bindings::migrate_vma,
    pfns: Pfns,
    _p: PhantomData<(&'a VmaRef, T)>,
}

impl<T: PagemapOps> Migrated<'_, T> {
    /// Whether entry `i` moved to its destination.
    pub fn succeeded(&self, i: usize) -> bool {
        self.pfns.succeeded(i)
    }

    /// The number of entries that moved (compound entries count once).
    pub fn count(&self) -> usize {
        (0..self.pfns.src.len())
            .filter(|&i| self.succeeded(i))
            .count()
    }

    /// The number of pages that moved: a compound entry that moved whole
    /// counts all of its pages.
    pub fn pages(&self) -> usize {
        (0..self.pfns.src.len())
            .filter(|&i| self.succeeded(i))
            .map(|i| {
                if self.pfns.dst[i] & PFN_COMPOUND != 0 {
                    1 << MAX_FOLIO_ORDER
                } else {
                    1
                }
            })
            .sum()
    }

    /// The virtual address of entry `i`.
    pub fn address(&self, i: usize) -> usize {
        self.args.start + i * PAGE_SIZE
    }

    /// Finalizes now (dropping does the same).
    pub fn finalize(self) {}
}

impl<T: PagemapOps> Drop for Migrated<'_, T> {
    fn drop(&mut self) {
        // SAFETY: Pages ran and finalize has not (type invariant). This may
        // call `folio_free` of migrated-away device folios.
        unsafe { bindings::migrate_vma_finalize(&mut self.args) };
    }
}

/// Eviction of a [`Pagemap`]'s pages back to system memory, without a VMA.
///
/// Collects the in-use pages of an index range with
/// `migrate_device_range()`, unmapping them from every process. Pages that
/// are locked or pinned at that moment are skipped: call again until
/// [`Pagemap::nr_used`] says the range is empty.
///
/// # Invariants
///
/// `migrate_device_range()` ran over `pfns.src` for `pm`'s pages, and
/// `migrate_device_finalize()` has not.
pub struct Eviction<'a, T: PagemapOps> {
    pm: &'a Pagemap<T>,
    pfns: Pfns,
    done: bool,
}

impl<'a, T: PagemapOps> Eviction<'a, T> {
    /// Collects the pages `first..first + count` of `pm`.
    ///
    /// # Examples
    ///
    /// Emptying a pagemap before its device goes away; `read_page` stands
    /// for the copy out of device memory:
    ///
    /// ```
    /// use kernel::mm::{
    ///     migrate::{Eviction, NewSystemFolio},
    ///     pagemap::{PagemapOps, Pagemap},
    /// };
    /// use kernel::prelude::*;
    ///
    /// fn read_page(_index: usize, _dst: &mut [u8]) {}
    ///
    /// fn evict<T: PagemapOps>(pm: &Pagemap<T>) -> Result<usize> {
    ///     let mut ev = Eviction::collect(pm, 0, pm.nr_pages())?;
    ///     for i in 0..ev.len() {
    ///         let Some((folio, _writable)) = ev.source(i) else {
    ///             continue;
    ///         };
    ///         let (index, order) = (folio.index(), folio.order());
    ///         let mut new = NewSystemFolio::alloc(order)?;
    ///         for p in 0..new.nr_pages() {
    ///             new.with_page_mut(p, |b| read_page(index + p, b))?;
    ///         }
    ///         ev.set_system(i, new)?;
    ///     }
    ///     // Pages locked or pinned meanwhile stay: callers retry while
    ///     // `pm.nr_used() != 0`.
    ///     Ok(ev.finish())
    /// }
    /// ```
    pub fn collect(pm: &'a Pagemap<T>, first: usize, count: usize) -> Result<Self> {
        if count == 0
            || first
                .checked_add(count)
                .is_none_or(|end| end > pm.nr_pages())
        {
            return Err(EINVAL);
        }
        let mut pfns = Pfns::new(count)?;
        // SAFETY: The arrays hold `count` entries; the pfns are pages of a
        // registered pagemap.
        to_result(unsafe {
            bindings::migrate_device_range(
                pfns.src.as_mut_ptr(),
                pm.pfn_range().start + first,
                count,
            )
        })?;
        // INVARIANT: Collected above.
        Ok(Self {
            pm,
            pfns,
            done: false,
        })
    }

    /// The pagemap.
    pub fn pagemap(&self) -> &'a Pagemap<T> {
        self.pm
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.pfns.src.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device folio collected at entry `i`, with the writability of its
    /// mappings, or `None`.
    pub fn source(&self, i: usize) -> Option<(&DeviceFolio<T>, bool)> {
        match self.pfns.source::<T>(i) {
            Source::Device { folio, write } => Some((folio, write)),
            _ => None,
        }
    }

    /// Makes `folio`, which must already hold entry `i`'s data, its
    /// destination; its size must be the source folio's.
    pub fn set_system(&mut self, i: usize, folio: NewSystemFolio) -> Result {
        let nr = folio.nr_pages();
        let (src, _) = self.source(i).ok_or(EINVAL)?;
        if src.nr_pages() != nr || self.pfns.dst[i] != 0 {
            return Err(EINVAL);
        }
        self.pfns.set_dst(i, folio.into_raw(), nr);
        Ok(())
    }

    /// Moves every entry with a destination and finalizes; returns how many
    /// pages moved.
    pub fn finish(mut self) -> usize {
        self.complete()
    }

    fn complete(&mut self) -> usize {
        let n = self.pfns.src.len() as c_ulong;
        // SAFETY: Collected and not finalized (type invariant).
        unsafe {
            bindings::migrate_device_pages(
                self.pfns.src.as_mut_ptr(),
                self.pfns.dst.as_mut_ptr(),
                n,
            )
        };
        let moved = (0..self.len())
            .filter(|&i| self.pfns.succeeded(i))
            .map(|i| {
                1usize
                    // SAFETY: A successful entry holds a valid, referenced page.
                    << unsafe {
                        bindings::folio_order(bindings::page_folio(bindings::migrate_pfn_to_page(
                            self.pfns.src[i],
                        )))
                    }
            })
            .sum();
        // SAFETY: As above; this frees the device folios that moved.
        unsafe {
            bindings::migrate_device_finalize(
                self.pfns.src.as_mut_ptr(),
                self.pfns.dst.as_mut_ptr(),
                n,
            )
        };
        self.done = true;
        moved
    }
}

impl<T: PagemapOps> Drop for Eviction<'_, T> {
    fn drop(&mut self) {
        if !self.done {
            self.complete();
        }
    }
}

/// Support for KUnit tests of migration users: a pagemap whose "device
/// memory" is a kernel buffer, and an anonymous mapping in the test's mm.
#[cfg(CONFIG_KUNIT)]
pub(crate) mod testing {
    use super::*;
    use crate::{
        mm::pagemap::FaultError,
        sync::{
            atomic::{Atomic, Relaxed},
            Mutex,
        },
        uaccess::{UserPtr, UserSlice},
    };

    /// Device memory backed by a kernel buffer, one page per pagemap page.
    #[pin_data]
    pub(crate) struct Backing {
        #[pin]
        pub(crate) store: Mutex<KVVec<u8>>,
        pub(crate) faults: Atomic<usize>,
    }

    impl Backing {
        pub(crate) fn new(size: usize) -> impl PinInit<Self, Error> {
            try_pin_init!(Self {
                store <- {
                    let mut v = KVVec::with_capacity(size, GFP_KERNEL)?;
                    v.resize(size, 0, GFP_KERNEL)?;
                    crate::new_mutex!(v)
                },
                faults: Atomic::new(0),
            })
        }
    }

    impl PagemapOps for Backing {
        type Kind = crate::mm::pagemap::Private;

        fn folio_free(_pm: &Pagemap<Self>, _folio: &DeviceFolio<Self>) {}
    }

    impl DevicePrivateOps for Backing {
        fn migrate_to_ram(
            pm: &Pagemap<Self>,
            fault: &DeviceFault<'_, Self>,
        ) -> core::result::Result<(), FaultError> {
            pm.data().faults.fetch_add(1, Relaxed);
            let mut mig =
                MigrateVma::for_fault(fault, pm.owner()).map_err(|_| FaultError::SigBus)?;
            for i in 0..mig.len() {
                let (index, order) = match mig.source(i) {
                    Source::Device { folio, .. } => (folio.index(), folio.order()),
                    _ => continue,
                };
                let mut new = NewSystemFolio::alloc(order).map_err(|_| FaultError::Oom)?;
                let store = pm.data().store.lock();
                for p in 0..new.nr_pages() {
                    let src = &store[(index + p) * PAGE_SIZE..][..PAGE_SIZE];
                    new.with_page_mut(p, |dst| dst.copy_from_slice(src))
                        .map_err(|_| FaultError::SigBus)?;
                }
                drop(store);
                mig.set_system(i, new).map_err(|_| FaultError::SigBus)?;
            }
            mig.migrate().finalize();
            Ok(())
        }
    }

    /// `npages` of fresh anonymous memory in the test's mm, unmapped by
    /// KUnit when the test ends; filled with a pattern derived from `seed`.
    pub(crate) fn user_pages(npages: usize, seed: u8) -> Result<(usize, KVVec<u8>)> {
        let len = npages * PAGE_SIZE;
        // SAFETY: Called from a KUnit test; the mapping is released by KUnit.
        let addr = unsafe {
            bindings::kunit_vm_mmap(
                bindings::kunit_get_current_test(),
                core::ptr::null_mut(),
                0,
                len,
                (bindings::PROT_READ | bindings::PROT_WRITE) as c_ulong,
                (bindings::MAP_ANONYMOUS | bindings::MAP_PRIVATE) as c_ulong,
                0,
            )
        } as usize;
        if addr == 0 || addr >= usize::MAX - 4095 {
            return Err(ENOMEM);
        }
        let mut data = KVVec::with_capacity(len, GFP_KERNEL)?;
        for i in 0..len {
            data.push((i / 7) as u8 ^ seed, GFP_KERNEL)?;
        }
        UserSlice::new(UserPtr::from_addr(addr), len)
            .writer()
            .write_slice(&data)?;
        Ok((addr, data))
    }

    /// Reads `len` bytes of user memory at `addr`.
    pub(crate) fn read_user(addr: usize, len: usize) -> Result<KVVec<u8>> {
        let mut out = KVVec::with_capacity(len, GFP_KERNEL)?;
        out.resize(len, 0, GFP_KERNEL)?;
        UserSlice::new(UserPtr::from_addr(addr), len)
            .reader()
            .read_slice(&mut out)?;
        Ok(out)
    }

    /// Migrates `[addr, addr + npages * PAGE_SIZE)` of the current mm into
    /// `pm`, copying the data into the backing store; returns the number
    /// of pages that moved.
    pub(crate) fn to_device(pm: &Pagemap<Backing>, addr: usize, npages: usize) -> Result<usize> {
        let task = crate::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let guard = mm.mmap_read_lock();
        let vma = guard.vma_lookup(addr).ok_or(EFAULT)?;
        let mut mig = MigrateVma::<Backing>::setup(
            vma,
            addr,
            addr + npages * PAGE_SIZE,
            pm.owner(),
            Select::SYSTEM,
        )?;
        for i in 0..mig.len() {
            let f = pm.alloc_folio(0)?;
            let mut store = pm.data().store.lock();
            let dst = &mut store[f.index() * PAGE_SIZE..][..PAGE_SIZE];
            match mig.source(i) {
                Source::System { folio, .. } => {
                    folio.with_page(0, |src| dst.copy_from_slice(src))?
                }
                Source::Hole { .. } => dst.fill(0),
                _ => continue,
            }
            drop(store);
            mig.set_device(i, f)?;
        }
        let moved = mig.migrate();
        // Order-0 destinations: as many pages as entries moved.
        if moved.pages() != moved.count() {
            return Err(EIO);
        }
        Ok(moved.pages())
    }

    /// Moves every page of `pm` back to system memory.
    pub(crate) fn evict_all(pm: &Pagemap<Backing>) -> Result<usize> {
        let mut ev = Eviction::collect(pm, 0, pm.nr_pages())?;
        for i in 0..ev.len() {
            let Some((folio, _)) = ev.source(i) else {
                continue;
            };
            let (index, order) = (folio.index(), folio.order());
            let mut new = NewSystemFolio::alloc(order)?;
            let store = pm.data().store.lock();
            for p in 0..new.nr_pages() {
                let src = &store[(index + p) * PAGE_SIZE..][..PAGE_SIZE];
                new.with_page_mut(p, |dst| dst.copy_from_slice(src))?;
            }
            drop(store);
            ev.set_system(i, new)?;
        }
        let moved = ev.finish();
        Ok(moved)
    }
}

#[kunit_tests(rust_kernel_mm_migrate)]
mod tests {
    use super::testing::*;
    use super::*;
    use crate::sync::atomic::Relaxed;

    const PMD: usize = PAGE_SIZE << MAX_FOLIO_ORDER;

    #[test]
    fn migrates_to_device_and_back_on_cpu_fault() -> Result {
        let pm = KBox::pin_init(Pagemap::new(PMD, None, Backing::new(PMD)), GFP_KERNEL)?;
        let n = 8;
        let (addr, data) = user_pages(n, 0x5a)?;
        let moved = to_device(&pm, addr, n);
        let used = pm.nr_used();
        // The CPU reads every page: each faults back through migrate_to_ram.
        let back = read_user(addr, n * PAGE_SIZE);
        let leftover = evict_all(&pm);
        assert_eq!(moved?, n);
        assert_eq!(used, n);
        assert!(back?[..] == data[..]);
        assert_eq!(pm.data().faults.load(Relaxed), n);
        assert_eq!(leftover?, 0);
        assert_eq!(pm.nr_used(), 0);
        Ok(())
    }

    #[test]
    fn eviction_moves_everything_back() -> Result {
        let pm = KBox::pin_init(Pagemap::new(PMD, None, Backing::new(PMD)), GFP_KERNEL)?;
        let n = 5;
        let (addr, data) = user_pages(n, 0xc3)?;
        let moved = to_device(&pm, addr, n);
        let evicted = evict_all(&pm);
        assert_eq!(moved?, n);
        assert_eq!(evicted?, n);
        assert_eq!(pm.nr_used(), 0);
        let back = read_user(addr, n * PAGE_SIZE)?;
        assert!(back[..] == data[..]);
        // Eviction, not CPU faults, brought the data back.
        assert_eq!(pm.data().faults.load(Relaxed), 0);
        Ok(())
    }

    #[test]
    fn eviction_leaves_a_folio_that_migrated_away() -> Result {
        let pm = KBox::pin_init(Pagemap::new(PMD, None, Backing::new(PMD)), GFP_KERNEL)?;
        let (addr, data) = user_pages(1, 0x3c)?;
        assert_eq!(to_device(&pm, addr, 1)?, 1);
        let task = crate::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let guard = mm.mmap_read_lock();
        let vma = guard.vma_lookup(addr).ok_or(EFAULT)?;
        let mut mig = MigrateVma::<Backing>::setup(
            vma,
            addr,
            addr + PAGE_SIZE,
            pm.owner(),
            Select::DEVICE_PRIVATE,
        )?;
        let Source::Device { folio, .. } = mig.source(0) else {
            return Err(EINVAL);
        };
        let (folio, index) = (folio.as_raw(), folio.index());
        let mut new = NewSystemFolio::alloc(0)?;
        let store = pm.data().store.lock();
        new.with_page_mut(0, |dst| {
            dst.copy_from_slice(&store[index * PAGE_SIZE..][..PAGE_SIZE])
        })?;
        drop(store);
        mig.set_system(0, new)?;
        let moved = mig.migrate();
        // The data has moved; the folio is still locked. A reference
        // taken now is the one another eviction's pfn walk takes, and
        // still holds, when the migration unlocks the folio and drops its
        // own: the migration's refcount check is behind it.
        // SAFETY: The migration holds a reference until `moved` is
        // dropped; this one keeps the folio until `folio_put()` below.
        unsafe { bindings::folio_get(folio) };
        let count = moved.count();
        drop(moved);
        drop(guard);
        let used = pm.nr_used();
        // Nothing maps the folio: an eviction must leave it to its last
        // holder, which lets go while the eviction runs. Before
        // "mm/migrate_device: do not collect device folios that nothing
        // maps" the eviction collected it and, the holder gone, migrated
        // it a second time: a stale copy, and a system page that no memcg
        // was charged for (mem_cgroup_migrate() warns).
        let ev = Eviction::collect(&pm, 0, pm.nr_pages());
        // SAFETY: The reference taken above, dropped on every path: a
        // folio left referenced would keep `pm`'s teardown waiting.
        unsafe { bindings::folio_put(folio) };
        let mut ev = ev?;
        let mut collected = 0;
        for i in 0..ev.len() {
            let Some(order) = ev.source(i).map(|(f, _)| f.order()) else {
                continue;
            };
            collected += 1;
            ev.set_system(i, NewSystemFolio::alloc(order)?)?;
        }
        let evicted = ev.finish();
        assert_eq!(count, 1);
        assert_eq!(used, 1);
        assert_eq!(collected, 0);
        assert_eq!(evicted, 0);
        assert_eq!(pm.nr_used(), 0);
        assert!(read_user(addr, PAGE_SIZE)?[..] == data[..]);
        assert_eq!(pm.data().faults.load(Relaxed), 0);
        Ok(())
    }

    #[test]
    fn rejects_bad_ranges_and_destinations() -> Result {
        let pm = KBox::pin_init(Pagemap::new(PMD, None, Backing::new(PMD)), GFP_KERNEL)?;
        let (addr, _) = user_pages(2, 1)?;
        let task = crate::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let guard = mm.mmap_read_lock();
        let vma = guard.vma_lookup(addr).ok_or(EFAULT)?;
        let owner = pm.owner();
        assert_eq!(
            MigrateVma::<Backing>::setup(vma, addr + 1, addr + PAGE_SIZE, owner, Select::SYSTEM)
                .err(),
            Some(EINVAL)
        );
        assert_eq!(
            MigrateVma::<Backing>::setup(vma, addr, addr, owner, Select::SYSTEM).err(),
            Some(EINVAL)
        );
        let mut mig =
            MigrateVma::<Backing>::setup(vma, addr, addr + 2 * PAGE_SIZE, owner, Select::SYSTEM)?;
        // Out of range, then twice the same entry.
        assert_eq!(mig.set_device(2, pm.alloc_folio(0)?), Err(EINVAL));
        mig.set_device(0, pm.alloc_folio(0)?)?;
        assert_eq!(mig.set_device(0, pm.alloc_folio(0)?), Err(EINVAL));
        // Dropped without migrate(): entry 0 moves (its destination was
        // set), entry 1 is restored; rejected folios were freed.
        drop(mig);
        drop(guard);
        assert_eq!(pm.nr_used(), 1);
        assert_eq!(evict_all(&pm)?, 1);
        assert_eq!(pm.nr_used(), 0);
        Ok(())
    }
}
