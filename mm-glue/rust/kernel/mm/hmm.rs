// SPDX-License-Identifier: GPL-2.0

//! HMM mirroring: MMU interval notifiers and `hmm_range_fault()`.
//!
//! A device that mirrors a process's page tables (a GPU, an RDMA NIC with
//! on-demand paging) keeps its own page table for an address range and
//! must drop entries before the CPU's change. [`Mirror`] ties the three
//! pieces of that protocol together so that they cannot be used apart:
//!
//! - an `mmu_interval_notifier` over the range;
//! - the driver's device page table `T`, behind the mutex that the
//!   protocol calls the "user lock";
//! - [`Mirror::fault`], the standard loop: `mmu_interval_read_begin()`,
//!   `hmm_range_fault()` (with the mmap lock, retried on `-EBUSY` until a
//!   timeout), then the user lock and `mmu_interval_read_retry()`.
//!
//! The notifier callback takes the user lock (only trylock when the
//! invalidation cannot block), records the new sequence with
//! `mmu_interval_set_seq()` and calls [`MirrorOps::invalidate`] with the
//! locked state. [`Faulted`], the result of a fault, holds the lock guard,
//! so the pfns it hands out cannot outlive the window in which they are
//! valid.
//!
//! # Soundness
//!
//! `hmm_range_fault()` takes no reference on the pages it reports. A
//! reported page stays allocated because the core invalidates every
//! interval notifier over an address before the page mapped there can be
//! freed or reused: on unmap and zap, on migration (`migrate_vma_setup()`,
//! and `try_to_migrate()` when a device evicts its memory), on exclusive
//! access and on mm teardown. Every invalidation of a [`Mirror`] takes the
//! user lock and bumps the notifier's sequence, so:
//!
//! - a fault that raced with an invalidation sees `mmu_interval_read_retry()`
//!   fail and starts again;
//! - once [`Mirror::fault`] returns, any invalidation of the range waits for
//!   the lock that [`Faulted`] holds, so the pages it reports cannot be freed
//!   while its [`HmmPfn`]s, which borrow it, are alive.
//!
//! The callback has no exception: a migration by the mirror's own device
//! (`MMU_NOTIFY_MIGRATE` with the mirror's owner) invalidates it too.
//! `lib/test_hmm` skips those events because its migration code rewrites
//! its device page table before `migrate_vma_finalize()` frees the source
//! pages; a safe abstraction cannot make a driver keep that promise, and a
//! driver that reads through the pfns of a fault (as rvram does) would read
//! freed pages when another thread migrates the range. The cost is one lock
//! round trip per mirror for each migration of a range it covers, and a
//! retried fault when the two race. A device maps the pages it migrated
//! into its memory by faulting them through its mirror: pages of the
//! mirror's own owner are reported, not migrated back.
//!
//! Other page references the abstractions hand out are held by other
//! means: an [`ExclusivePage`] keeps its folio locked and referenced, and the
//! folios of a migration stay locked and referenced until it is finalized
//! (see [`crate::mm::migrate`]).
//!
//! C headers: [`include/linux/hmm.h`](srctree/include/linux/hmm.h),
//! [`include/linux/mmu_notifier.h`](srctree/include/linux/mmu_notifier.h)

use crate::ffi::c_ulong;
use crate::{
    bindings,
    device::Device,
    error::{
        to_result,
        Result, //
    },
    mm::{
        pagemap::{
            DeviceFolio,
            Owner,
            Pagemap,
            PagemapOps, //
        },
        Mm,
        MmWithUser,
        MmapReadGuard, //
    },
    prelude::*,
    sync::{
        aref::ARef,
        Mutex,
        MutexGuard, //
    },
    time::{
        msecs_to_jiffies,
        Instant,
        Monotonic, //
    },
    types::Opaque, //
};
use core::{
    marker::PhantomData,
    ops::Range,
    ptr::NonNull, //
};

/// How long [`Mirror::fault`] keeps retrying an invalidated fault.
pub const DEFAULT_TIMEOUT_MS: u32 = bindings::HMM_RANGE_DEFAULT_TIMEOUT;

/// Why an address range is being invalidated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// munmap() or similar: the range is going away.
    Unmap,
    /// The pages are being cleared (reclaim, zap, COW, ...).
    Clear,
    /// mprotect() on the VMA.
    ProtectionVma,
    /// Write protection of a page.
    ProtectionPage,
    /// Soft-dirty tracking.
    SoftDirty,
    /// The mm is exiting.
    Release,
    /// Pages are migrating (`migrate_vma_setup()`, device migration).
    Migrate,
    /// A device takes exclusive access (`make_device_exclusive()`).
    Exclusive,
}

/// An invalidated range, as passed to [`MirrorOps::invalidate`].
pub struct NotifierRange<'a>(&'a bindings::mmu_notifier_range);

impl NotifierRange<'_> {
    /// The virtual address range.
    pub fn range(&self) -> Range<usize> {
        self.0.start..self.0.end
    }

    /// The event.
    pub fn event(&self) -> Event {
        match self.0.event {
            bindings::mmu_notifier_event_MMU_NOTIFY_UNMAP => Event::Unmap,
            bindings::mmu_notifier_event_MMU_NOTIFY_PROTECTION_VMA => Event::ProtectionVma,
            bindings::mmu_notifier_event_MMU_NOTIFY_PROTECTION_PAGE => Event::ProtectionPage,
            bindings::mmu_notifier_event_MMU_NOTIFY_SOFT_DIRTY => Event::SoftDirty,
            bindings::mmu_notifier_event_MMU_NOTIFY_RELEASE => Event::Release,
            bindings::mmu_notifier_event_MMU_NOTIFY_MIGRATE => Event::Migrate,
            bindings::mmu_notifier_event_MMU_NOTIFY_EXCLUSIVE => Event::Exclusive,
            _ => Event::Clear,
        }
    }

    /// The owner the event was raised for (migration and exclusive access).
    pub fn owner(&self) -> Option<Owner> {
        (!self.0.owner.is_null()).then(|| Owner::from_raw(self.0.owner))
    }
}

/// The device page table of a [`Mirror`], and how to invalidate it.
pub trait MirrorOps: Send + Unpin + 'static {
    /// Drops the device's mappings of `range.range()`.
    ///
    /// Called with the mirror's lock held, in reclaim context: it must not
    /// allocate memory with a GFP mask that can recurse into reclaim.
    fn invalidate(&mut self, range: &NotifierRange<'_>);
}

/// The name and class of every mirror's lock, defined outside the generic
/// code: a lock class key there is shared by all instantiations while a
/// name literal is not, which lockdep reports as a class conflict.
static MIRROR_LOCK_NAME: &crate::str::CStr = c"Mirror::state";

fn mirror_lock_class() -> Pin<&'static crate::sync::LockClassKey> {
    crate::static_lock_class!()
}

/// A mirror of an address range of an mm.
///
/// # Invariants
///
/// `notifier` is inserted into the mm's interval tree with `Self::OPS` from
/// creation until drop; its callbacks only run while it is inserted.
#[pin_data(PinnedDrop)]
pub struct Mirror<T: MirrorOps> {
    #[pin]
    state: Mutex<T>,
    owner: Option<Owner>,
    #[pin]
    notifier: Opaque<bindings::mmu_interval_notifier>,
}

// SAFETY: The notifier may be used from any thread; `T` is protected by its mutex.
unsafe impl<T: MirrorOps> Send for Mirror<T> {}
// SAFETY: As above.
unsafe impl<T: MirrorOps> Sync for Mirror<T> {}

impl<T: MirrorOps> Mirror<T> {
    const OPS: bindings::mmu_interval_notifier_ops = bindings::mmu_interval_notifier_ops {
        invalidate: Some(Self::invalidate_callback),
        invalidate_start: None,
        invalidate_finish: None,
    };

    /// Mirrors `[start, start + length)` of `mm` into `state`.
    ///
    /// `owner` is the device-private owner of the mirroring device, if it
    /// has device memory: its pages are reported by [`Mirror::fault`]
    /// instead of being migrated back. Every invalidation, including those
    /// of the owner's own migrations, takes the mirror's lock (see the
    /// module documentation). Sleeps; must not be called with the mmap lock
    /// held. Returns `EOVERFLOW` for an empty or wrapping range.
    ///
    /// # Examples
    ///
    /// A device that reads process memory through a mirror:
    ///
    /// ```
    /// use kernel::mm::{
    ///     hmm::{Mirror, MirrorOps, NotifierRange, RangeRequest, DEFAULT_TIMEOUT_MS},
    ///     MmWithUser,
    /// };
    /// use kernel::{page::PAGE_SIZE, prelude::*};
    ///
    /// /// The device page table; this device caches no translations.
    /// struct Table;
    ///
    /// impl MirrorOps for Table {
    ///     fn invalidate(&mut self, _range: &NotifierRange<'_>) {
    ///         // Drop the device's mappings of `range.range()` here.
    ///     }
    /// }
    ///
    /// fn first_byte(mm: &MmWithUser, addr: usize) -> Result<u8> {
    ///     let mirror = KBox::pin_init(Mirror::new(mm, addr, PAGE_SIZE, None, Table), GFP_KERNEL)?;
    ///     let mut req = RangeRequest::new(addr, 1, false)?;
    ///     // The pfns are valid while `f`, which holds the table's lock, lives.
    ///     let f = mirror.fault(&mut req, DEFAULT_TIMEOUT_MS)?;
    ///     let pfn = f.pfn(0).ok_or(EFAULT)?;
    ///     let mut byte = [0u8; 1];
    ///     pfn.read_system_page(&mut byte).ok_or(EFAULT)?;
    ///     Ok(byte[0])
    /// }
    /// ```
    pub fn new<'a>(
        mm: &'a MmWithUser,
        start: usize,
        length: usize,
        owner: Option<Owner>,
        state: T,
    ) -> impl PinInit<Self, Error> + 'a {
        try_pin_init!(Self {
            state <- Mutex::new(state, MIRROR_LOCK_NAME, mirror_lock_class()),
            owner,
            notifier <- Opaque::try_ffi_init(move |n: *mut bindings::mmu_interval_notifier| {
                // SAFETY: `n` is valid for writes and pinned; it stays
                // inserted until `drop` removes it. `mm` has users.
                to_result(unsafe {
                    n.write(core::mem::zeroed());
                    let mm = mm.as_raw();
                    bindings::mmu_interval_notifier_insert(n, mm, start, length, &Self::OPS)
                })
            }),
        })
    }

    fn raw(&self) -> *mut bindings::mmu_interval_notifier {
        self.notifier.get()
    }

    /// Locks the device page table.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.state.lock()
    }

    /// The mm being mirrored.
    pub fn mm(&self) -> &Mm {
        // SAFETY: The notifier holds an `mmgrab()` reference while inserted.
        unsafe { Mm::from_raw((*self.raw()).mm) }
    }

    /// Faults in the pages of `req` and reports them.
    ///
    /// Runs `hmm_range_fault()` until it succeeds without a concurrent
    /// invalidation, for at most `timeout_ms` (then `EBUSY`), and returns
    /// with the device page table locked. Errors of `hmm_range_fault()`:
    /// `EFAULT` (no VMA, or it cannot be read), `EPERM` (write requested on
    /// a read-only VMA), `ENOMEM`, `EINTR`; `EFAULT` also when the mm has
    /// exited.
    pub fn fault<'a>(
        &'a self,
        req: &'a mut RangeRequest,
        timeout_ms: u32,
    ) -> Result<Faulted<'a, T>> {
        let mm = self.mm().mmget_not_zero().ok_or(EFAULT)?;
        let begin = Instant::<Monotonic>::now();
        req.pfns.iter_mut().for_each(|p| *p = 0);
        // SAFETY: All-zeroes is a valid `hmm_range`.
        let mut range: bindings::hmm_range = unsafe { core::mem::zeroed() };
        range.notifier = self.raw();
        range.start = req.start;
        range.end = req.start + req.pfns.len() * crate::page::PAGE_SIZE;
        range.hmm_pfns = req.pfns.as_mut_ptr();
        range.default_flags = req.flags;
        range.dev_private_owner = match self.owner {
            Some(owner) if !req.fault_own => owner.as_ptr(),
            _ => core::ptr::null_mut(),
        };
        if let Some((client, access)) = &req.alias {
            range.alias_client = client.as_raw();
            range.alias_by_cpu = *access == AliasAccess::Cpu;
        }
        loop {
            let left = i64::from(timeout_ms) - begin.elapsed().as_millis();
            if left <= 0 {
                return Err(EBUSY);
            }
            // `left` is in `1..=timeout_ms`; a zero timeout would mean "forever".
            let left = msecs_to_jiffies(left as u32);
            // SAFETY: `range` is set up for our notifier, whose mm has users
            // (`mm`); the caller holds no mmap lock (`&mut req` is not
            // reachable from a fault handler). This sets `notifier_seq`.
            to_result(unsafe { bindings::hmm_range_fault_unlocked_timeout(&mut range, left) })?;
            let guard = self.state.lock();
            // SAFETY: The notifier is inserted; `notifier_seq` came from it.
            if unsafe { bindings::mmu_interval_read_retry(self.raw(), range.notifier_seq) } {
                continue;
            }
            // INVARIANT: `guard` is declared before `_mm` and is dropped
            // first: this may be the mm's last user, and its teardown
            // invalidates the mirror, which takes the lock.
            return Ok(Faulted {
                guard,
                req,
                _mm: mm,
            });
        }
    }

    /// Takes exclusive access to the anonymous page at `addr` for the
    /// device, as a device does for atomics (`make_device_exclusive()`).
    ///
    /// The page is faulted in writable and its CPU mapping replaced by a
    /// device-exclusive entry. The next CPU access restores the mapping,
    /// after invalidating every mirror of the page, this one included. The
    /// returned [`ExclusivePage`] keeps the page locked, which holds that
    /// access off: record the device's mapping in the page table (under
    /// [`Mirror::lock`]) before dropping it, so that the invalidation
    /// finds the entry to drop. Must not be called with [`Mirror::lock`]
    /// held: taking the page invalidates this mirror too.
    ///
    /// `guard` must lock the mirrored mm (else `EINVAL`). Errors of
    /// `make_device_exclusive()`: `EFAULT` (no page can be faulted in
    /// writable at `addr`), `EOPNOTSUPP` (not anonymous memory, or
    /// hugetlb), `EBUSY`, `EINTR`.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::hmm::{Mirror, MirrorOps};
    /// use kernel::prelude::*;
    ///
    /// /// The device's atomic mappings, by address.
    /// fn map_atomic<T: MirrorOps>(
    ///     mirror: &Mirror<T>,
    ///     addr: usize,
    ///     record: impl FnOnce(&mut T, usize) -> Result,
    /// ) -> Result<u8> {
    ///     let mm = mirror.mm().mmget_not_zero().ok_or(EINVAL)?;
    ///     let guard = mm.mmap_read_lock();
    ///     let page = mirror.make_exclusive(&guard, addr)?;
    ///     // Still locked: the CPU cannot take the page back before this.
    ///     record(&mut mirror.lock(), addr)?;
    ///     let mut first = [0u8];
    ///     page.read(&mut first)?;
    ///     Ok(first[0])
    /// }
    /// ```
    pub fn make_exclusive<'g>(
        &self,
        guard: &'g MmapReadGuard<'_>,
        addr: usize,
    ) -> Result<ExclusivePage<'g>> {
        if !core::ptr::eq(guard.mm.as_raw(), self.mm().as_raw()) {
            return Err(EINVAL);
        }
        let mut folio = core::ptr::null_mut();
        // SAFETY: The mmap lock of `mm` is held (`guard`), which has users
        // while the guard lives. A null owner invalidates every mirror.
        let page = unsafe {
            bindings::make_device_exclusive(
                guard.mm.as_raw(),
                addr,
                core::ptr::null_mut(),
                &mut folio,
            )
        };
        let page = crate::error::from_err_ptr(page)?;
        // INVARIANT: On success the folio is locked with a reference we own,
        // and `page` is one of its pages.
        Ok(ExclusivePage {
            page: NonNull::new(page).ok_or(EFAULT)?,
            folio: NonNull::new(folio).ok_or(EFAULT)?,
            _guard: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Only called by the MMU notifier core for a notifier inserted by [`Mirror::new`].
    unsafe extern "C" fn invalidate_callback(
        sub: *mut bindings::mmu_interval_notifier,
        range: *const bindings::mmu_notifier_range,
        cur_seq: c_ulong,
    ) -> bool {
        // SAFETY: `sub` is the `notifier` field of a pinned `Mirror<T>`, alive
        // while inserted (type invariant).
        let this = unsafe {
            &*crate::container_of!(
                sub.cast::<Opaque<bindings::mmu_interval_notifier>>(),
                Self,
                notifier
            )
        };
        // SAFETY: The core passes a valid range for the duration of the call.
        let range = NotifierRange(unsafe { &*range });
        // No event is skipped, not even a migration by the mirror's own
        // owner: the pages a `Faulted` reports must not be freed while it
        // holds the lock (see the module documentation).
        // SAFETY: `range` is valid.
        let blockable = unsafe { bindings::mmu_notifier_range_blockable(range.0) };
        let mut guard = if blockable {
            this.state.lock()
        } else {
            match this.state.try_lock() {
                Some(g) => g,
                None => return false,
            }
        };
        // SAFETY: Called from the notifier's callback with the user lock held.
        unsafe { bindings::mmu_interval_set_seq(sub, cur_seq) };
        guard.invalidate(&range);
        true
    }
}

#[pinned_drop]
impl<T: MirrorOps> PinnedDrop for Mirror<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: Inserted (type invariant). Waits for running callbacks;
        // none runs afterwards.
        unsafe { bindings::mmu_interval_notifier_remove(self.raw()) };
    }
}

/// A page a device has exclusive access to: see [`Mirror::make_exclusive`].
///
/// Dropping it unlocks the page and drops its reference; the device keeps
/// its exclusive access until the next invalidation of the page.
///
/// # Invariants
///
/// `folio` is locked and holds a reference owned by this object; `page` is
/// one of its pages, of system memory.
pub struct ExclusivePage<'g> {
    page: NonNull<bindings::page>,
    folio: NonNull<bindings::folio>,
    _guard: PhantomData<&'g MmapReadGuard<'g>>,
}

impl ExclusivePage<'_> {
    /// Copies the start of the page into `dst` (at most a page); `EINVAL`
    /// if `dst` is larger than a page.
    ///
    /// No CPU mapping of the page is left, but others may still write it:
    /// `make_device_exclusive()` does not refuse a page pinned before, by
    /// `O_DIRECT` or a device, for example. The copy is the C `memcpy()`,
    /// with no Rust reference to the page, and `dst` gets whatever each
    /// byte held when it was read.
    pub fn read(&self, dst: &mut [u8]) -> Result {
        if dst.len() > crate::page::PAGE_SIZE {
            return Err(EINVAL);
        }
        // SAFETY: A system page, alive and locked (type invariant);
        // `kmap_local_page()` maps it.
        let addr = unsafe { bindings::kmap_local_page(self.page.as_ptr()) };
        // SAFETY: `addr` maps `PAGE_SIZE` bytes, `dst` is valid for
        // `dst.len() <= PAGE_SIZE` bytes and is not the page.
        unsafe { bindings::memcpy(dst.as_mut_ptr().cast(), addr, dst.len()) };
        // SAFETY: Mapped just above.
        unsafe { bindings::kunmap_local(addr) };
        Ok(())
    }
}

impl Drop for ExclusivePage<'_> {
    fn drop(&mut self) {
        // SAFETY: Locked, with a reference we own (type invariant).
        unsafe {
            bindings::folio_unlock(self.folio.as_ptr());
            bindings::folio_put(self.folio.as_ptr());
        }
    }
}

/// The input and output of [`Mirror::fault`]: a range of pages and the
/// `hmm_range_fault()` pfn array.
pub struct RangeRequest {
    start: usize,
    flags: c_ulong,
    pfns: KVVec<c_ulong>,
    alias: Option<(ARef<Device>, AliasAccess)>,
    fault_own: bool,
}

/// Where the owner of an alias maps it in the kernel.
enum AliasAddr {
    /// An I/O mapping (`ioremap()`).
    Io(*mut core::ffi::c_void),
    /// System memory.
    Mem(*mut core::ffi::c_void),
}

/// How an alias client of a [`RangeRequest::with_alias_client`] reaches
/// memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AliasAccess {
    /// By DMA: core hands out an alias of system memory, or one whose P2P
    /// provider the client can reach (`pci_p2pdma_map_type()`).
    Dma,
    /// With the CPU (a virtual-DMA device): an alias qualifies if its owner
    /// maps it in the kernel ([`HmmPfn::read_alias`]).
    Cpu,
}

impl RangeRequest {
    /// A request to fault `npages` pages at `start` (page aligned),
    /// writable if `write`. `EINVAL` for a misaligned, empty or wrapping
    /// range.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::hmm::RangeRequest;
    /// use kernel::{page::PAGE_SIZE, prelude::*};
    ///
    /// let req = RangeRequest::new(0x10_0000, 4, true)?;
    /// assert_eq!((req.start(), req.len()), (0x10_0000, 4));
    /// assert_eq!(RangeRequest::new(0x10_0001, 4, true).err(), Some(EINVAL));
    /// assert_eq!(RangeRequest::new(0x10_0000, 0, true).err(), Some(EINVAL));
    /// assert_eq!(RangeRequest::new(usize::MAX & !(PAGE_SIZE - 1), 2, false).err(), Some(EINVAL));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn new(start: usize, npages: usize, write: bool) -> Result<Self> {
        Self::with_flags(
            start,
            npages,
            bindings::hmm_pfn_flags_HMM_PFN_REQ_FAULT as c_ulong
                | if write {
                    bindings::hmm_pfn_flags_HMM_PFN_REQ_WRITE as c_ulong
                } else {
                    0
                },
        )
    }

    /// A request that faults nothing in and only reports what is mapped (a
    /// snapshot).
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::hmm::RangeRequest;
    /// use kernel::prelude::*;
    ///
    /// let req = RangeRequest::snapshot(0x20_0000, 512)?;
    /// assert_eq!(req.len(), 512);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn snapshot(start: usize, npages: usize) -> Result<Self> {
        Self::with_flags(start, npages, 0)
    }

    fn with_flags(start: usize, npages: usize, flags: c_ulong) -> Result<Self> {
        let len = npages.checked_mul(crate::page::PAGE_SIZE).ok_or(EINVAL)?;
        if npages == 0 || start % crate::page::PAGE_SIZE != 0 || start.checked_add(len).is_none() {
            return Err(EINVAL);
        }
        let mut pfns = KVVec::with_capacity(npages, GFP_KERNEL)?;
        pfns.resize(npages, 0, GFP_KERNEL)?;
        Ok(Self {
            start,
            flags,
            pfns,
            alias: None,
            fault_own: false,
        })
    }

    /// Faults on behalf of `client`: device-private pages of other owners
    /// whose pagemap has a DMA-able alias that `client` can reach are
    /// reported as aliases ([`HmmPfn::is_alias`]) and stay where they are;
    /// the others are migrated to system memory as usual.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::{device::Device, mm::hmm::{AliasAccess, RangeRequest}, prelude::*};
    ///
    /// fn request(client: &Device, addr: usize) -> Result<RangeRequest> {
    ///     let req = RangeRequest::new(addr, 16, false)?;
    ///     Ok(req.with_alias_client(client.into(), AliasAccess::Dma))
    /// }
    /// ```
    pub fn with_alias_client(mut self, client: ARef<Device>, access: AliasAccess) -> Self {
        self.alias = Some((client, access));
        self
    }

    /// Faults the mirror owner's own device-private pages like any other
    /// page, instead of reporting them as they are.
    ///
    /// `hmm_range_fault()` reports the owner's pages without faulting them,
    /// even for a write to one mapped read-only: one that `fork()` shared
    /// copy-on-write. A device write to such a page must break the sharing
    /// as a CPU write would; with this, the write fault migrates the page
    /// to system memory (the pagemap's `migrate_to_ram()`) and copies it.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::hmm::RangeRequest;
    /// use kernel::prelude::*;
    ///
    /// // Break the copy-on-write sharing of the page at 0x30_0000.
    /// let req = RangeRequest::new(0x30_0000, 1, true)?.fault_owner_pages();
    /// assert_eq!(req.len(), 1);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn fault_owner_pages(mut self) -> Self {
        self.fault_own = true;
        self
    }

    /// The first address.
    pub fn start(&self) -> usize {
        self.start
    }

    /// The number of pages.
    pub fn len(&self) -> usize {
        self.pfns.len()
    }

    /// Whether the request covers no page (never true).
    pub fn is_empty(&self) -> bool {
        self.pfns.is_empty()
    }

    fn entries(&self) -> impl Iterator<Item = (usize, HmmPfn<'_>)> {
        let start = self.start;
        self.pfns
            .iter()
            .enumerate()
            .map(move |(i, &v)| (start + i * crate::page::PAGE_SIZE, HmmPfn(v, PhantomData)))
    }
}

/// A successful [`Mirror::fault`]: the pfns, valid while the mirror's lock
/// (held here) is.
///
/// # Invariants
///
/// `guard` locks the mirror whose fault produced the pfns of `req`, and no
/// invalidation ran between `hmm_range_fault()` and taking it. `_mm` is a
/// user reference on the mirrored mm, released after `guard` (fields drop
/// in declaration order): dropping the last user tears the mm down, which
/// invalidates the mirror and needs its lock.
pub struct Faulted<'a, T: MirrorOps> {
    guard: MutexGuard<'a, T>,
    req: &'a RangeRequest,
    _mm: ARef<MmWithUser>,
}

impl<'a, T: MirrorOps> Faulted<'a, T> {
    /// The device page table, locked.
    pub fn state(&mut self) -> &mut T {
        &mut self.guard
    }

    /// The entry of page `i`.
    pub fn pfn(&self, i: usize) -> Option<HmmPfn<'_>> {
        self.req.pfns.get(i).map(|&v| HmmPfn(v, PhantomData))
    }

    /// The entries, with their addresses.
    pub fn iter(&self) -> impl Iterator<Item = (usize, HmmPfn<'_>)> {
        self.req.entries()
    }

    /// Splits into the device page table and the entries.
    pub fn split(&mut self) -> (&mut T, impl Iterator<Item = (usize, HmmPfn<'_>)>) {
        (&mut self.guard, self.req.entries())
    }
}

/// One output entry of `hmm_range_fault()`.
///
/// The page it names is only valid while the mirror's lock is held, which
/// the lifetime expresses; HMM takes no page reference.
///
/// # Examples
///
/// Sorting the entries of a fault the way a device driver does:
///
/// ```
/// use kernel::mm::{
///     hmm::{Faulted, MirrorOps},
///     pagemap::PagemapOps,
/// };
///
/// fn classify<T: MirrorOps, P: PagemapOps>(f: &Faulted<'_, T>) -> [usize; 4] {
///     let mut counts = [0; 4]; // own device memory, peer alias, system, none
///     for (_addr, pfn) in f.iter() {
///         if let Some(folio) = pfn.device_folio::<P>() {
///             let _ = folio.index(); // Our page: access device memory directly.
///             counts[0] += 1;
///         } else if pfn.is_alias() {
///             counts[1] += 1; // Another device's memory, reachable peer to peer.
///         } else if pfn.is_system_page() {
///             counts[2] += 1;
///         } else {
///             counts[3] += 1; // Not mapped (a snapshot), or an error.
///         }
///     }
///     counts
/// }
/// ```
#[derive(Clone, Copy)]
pub struct HmmPfn<'a>(c_ulong, PhantomData<&'a ()>);

impl<'a> HmmPfn<'a> {
    const VALID: c_ulong = bindings::hmm_pfn_flags_HMM_PFN_VALID as c_ulong;
    const WRITE: c_ulong = bindings::hmm_pfn_flags_HMM_PFN_WRITE as c_ulong;
    const ERROR: c_ulong = bindings::hmm_pfn_flags_HMM_PFN_ERROR as c_ulong;
    const FLAGS: c_ulong = bindings::hmm_pfn_flags_HMM_PFN_FLAGS as c_ulong;
    const ALIAS: c_ulong = bindings::hmm_pfn_flags_HMM_PFN_ALIAS as c_ulong;

    /// The raw entry.
    pub fn raw(&self) -> c_ulong {
        self.0
    }

    /// A page is mapped (`HMM_PFN_VALID`).
    pub fn is_valid(&self) -> bool {
        self.0 & Self::VALID != 0 && !self.is_error()
    }

    /// The mapping is writable.
    pub fn is_writable(&self) -> bool {
        self.is_valid() && self.0 & Self::WRITE != 0
    }

    /// The entry is a device-private page of another owner that the client
    /// reaches through its DMA-able alias (`HMM_PFN_ALIAS`, see
    /// [`RangeRequest::with_alias_client`]), with no reference taken, like
    /// every entry.
    pub fn is_alias(&self) -> bool {
        Self::ALIAS != 0 && self.is_valid() && self.0 & Self::ALIAS != 0
    }

    /// Copies the start of the alias of this entry's page into `dst` (at
    /// most a page), as a client accessing it with the CPU does; `None` if
    /// the entry is not an alias, its owner maps none in the kernel, or
    /// `dst` is larger than a page.
    pub fn read_alias(&self, dst: &mut [u8]) -> Option<()> {
        match self.alias_addr(dst.len())? {
            AliasAddr::Io(addr) => {
                // SAFETY: `addr` maps the alias, which stays valid while the
                // mirror lock (the lifetime of `self`) is held: its owner
                // migrates the page, which invalidates the mirror, before it
                // releases the alias (`Documentation/mm/hmm.rst`).
                unsafe { bindings::memcpy_fromio(dst.as_mut_ptr().cast(), addr, dst.len()) };
            }
            AliasAddr::Mem(addr) => {
                // SAFETY: As above, for system memory the alias owner maps;
                // others may write it meanwhile, so the copy is the C
                // `memcpy()`, with no Rust reference to it.
                unsafe { bindings::memcpy(dst.as_mut_ptr().cast(), addr, dst.len()) };
            }
        }
        Some(())
    }

    /// Copies `src` (at most a page) to the start of the alias of this
    /// entry's page; `None` if the entry is not a writable alias, its owner
    /// maps none in the kernel, or `src` is larger than a page.
    pub fn write_alias(&self, src: &[u8]) -> Option<()> {
        if !self.is_writable() {
            return None;
        }
        match self.alias_addr(src.len())? {
            AliasAddr::Io(addr) => {
                // SAFETY: As in `read_alias`; the mapping is writable for the
                // mirrored process.
                unsafe { bindings::memcpy_toio(addr, src.as_ptr().cast(), src.len()) };
            }
            AliasAddr::Mem(addr) => {
                // SAFETY: As in `read_alias`.
                unsafe { bindings::memcpy(addr, src.as_ptr().cast(), src.len()) };
            }
        }
        Some(())
    }

    /// The owner's kernel mapping of the alias of this entry's page
    /// (`hmm_pfn_alias()`), for `len` bytes.
    fn alias_addr(&self, len: usize) -> Option<AliasAddr> {
        if !self.is_alias() || len > crate::page::PAGE_SIZE {
            return None;
        }
        let mut alias = core::mem::MaybeUninit::<bindings::dev_pagemap_alias>::zeroed();
        // SAFETY: The entry is an alias entry, valid while the lock is held;
        // `alias` is valid for writes.
        if unsafe { bindings::hmm_pfn_alias(self.0, alias.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: `hmm_pfn_alias()` filled it in.
        let alias = unsafe { alias.assume_init() };
        if !alias.ioaddr.is_null() {
            Some(AliasAddr::Io(alias.ioaddr))
        } else if !alias.vaddr.is_null() {
            Some(AliasAddr::Mem(alias.vaddr))
        } else {
            None
        }
    }

    /// The address cannot be mirrored (`HMM_PFN_ERROR`).
    pub fn is_error(&self) -> bool {
        self.0 & Self::ERROR != 0
    }

    /// The order of the CPU mapping (0: a page, 9: a PMD on x86-64).
    pub fn map_order(&self) -> u32 {
        // SAFETY: Decoding only.
        unsafe { bindings::hmm_pfn_to_map_order(self.0) }
    }

    /// The page frame number, if valid.
    pub fn pfn(&self) -> Option<usize> {
        self.is_valid().then_some(self.0 & !Self::FLAGS)
    }

    /// The raw page, if valid.
    pub fn page(&self) -> Option<*mut bindings::page> {
        // SAFETY: A valid entry names a page that exists while the lock is held.
        self.is_valid()
            .then(|| unsafe { bindings::hmm_pfn_to_page(self.0) })
    }

    /// Whether the entry maps the shared zero page.
    pub fn is_zero_page(&self) -> bool {
        let Some(pfn) = self.pfn() else {
            return false;
        };
        // SAFETY: Only compares the pfn.
        unsafe { bindings::is_zero_pfn(pfn) }
    }

    /// Whether the entry maps a page the CPU can address: a system-memory
    /// page, or a device-coherent page (which is in the kernel's linear
    /// map); not another ZONE_DEVICE page, which may have no kernel mapping.
    pub fn is_system_page(&self) -> bool {
        self.system_page().is_some()
    }

    /// Copies the start of the page this entry maps into `dst` (at most a
    /// page), if the CPU can address it ([`HmmPfn::is_system_page`]);
    /// `None` if it cannot or `dst` is larger than a page.
    ///
    /// The mirrored process, or a device, may write the page meanwhile:
    /// the copy is the C `memcpy()`, with no Rust reference to the page,
    /// and `dst` gets whatever each byte held when it was read, as a
    /// device read of system memory would.
    pub fn read_system_page(&self, dst: &mut [u8]) -> Option<()> {
        if dst.len() > crate::page::PAGE_SIZE {
            return None;
        }
        let page = self.system_page()?;
        // SAFETY: A system or device-coherent page, alive while the mirror
        // lock is held (the lifetime of `self`); `kmap_local_page()` maps it.
        let addr = unsafe { bindings::kmap_local_page(page) };
        // SAFETY: `addr` maps `PAGE_SIZE` bytes, `dst` is valid for
        // `dst.len() <= PAGE_SIZE` bytes and cannot overlap a page the
        // mirrored process maps (it is ours).
        unsafe { bindings::memcpy(dst.as_mut_ptr().cast(), addr, dst.len()) };
        // SAFETY: Mapped just above.
        unsafe { bindings::kunmap_local(addr) };
        Some(())
    }

    /// Copies `src` (at most a page) to the start of the page this entry
    /// maps, if the CPU can address it and the mapping is writable; `None`
    /// otherwise or if `src` is larger than a page.
    ///
    /// As for [`HmmPfn::read_system_page`], others may access the page
    /// meanwhile. Like a device write, this does not mark the page dirty
    /// beyond what the write fault that made it writable did.
    pub fn write_system_page(&self, src: &[u8]) -> Option<()> {
        if !self.is_writable() || src.len() > crate::page::PAGE_SIZE {
            return None;
        }
        let page = self.system_page()?;
        // SAFETY: As in `read_system_page`; the page is mapped writable for
        // the mirrored process, so writing it is what that process could do.
        let addr = unsafe { bindings::kmap_local_page(page) };
        // SAFETY: `addr` maps `PAGE_SIZE` bytes, `src` is valid for
        // `src.len() <= PAGE_SIZE` bytes and is not the page.
        unsafe { bindings::memcpy(addr, src.as_ptr().cast(), src.len()) };
        // SAFETY: Mapped just above.
        unsafe { bindings::kunmap_local(addr) };
        Some(())
    }

    /// The page, if the CPU can address it through the kernel's linear map.
    fn system_page(&self) -> Option<*mut bindings::page> {
        let page = self.page()?;
        // SAFETY: `page` is valid while the lock is held.
        let cpu = unsafe {
            !bindings::is_zone_device_page(page) || bindings::is_device_coherent_page(page)
        };
        cpu.then_some(page)
    }

    /// The device folio of a `Pagemap<P>` (device-private or
    /// device-coherent, as `P`'s kind), if this entry is one and is not an
    /// alias: an alias entry is another owner's device-private page, maybe
    /// of another `Pagemap<P>`, which only its alias reaches.
    pub fn device_folio<P: PagemapOps>(&self) -> Option<&'a DeviceFolio<P>> {
        if self.is_alias() {
            return None;
        }
        let page = self.page()?;
        // SAFETY: The page is kept alive by the held mirror lock: it cannot
        // be freed before an invalidation, which needs that lock.
        unsafe { Pagemap::<P>::of_page(page) }?;
        // SAFETY: As above, a page of a `Pagemap<P>`.
        Some(unsafe { DeviceFolio::from_raw(bindings::page_folio(page)) })
    }

    /// As [`HmmPfn::device_folio`], with the index in its pagemap of the
    /// page this entry names, which may be any page of the folio (an entry
    /// of a range that starts inside a device THP). Computed from the
    /// folio's own index, not from the page's pfn.
    pub fn device_page<P: PagemapOps>(&self) -> Option<(&'a DeviceFolio<P>, usize)> {
        let folio = self.device_folio::<P>()?;
        let page = self.page()?;
        // SAFETY: `page` is a page of `folio` (its `page_folio()`), whose
        // struct pages are one array starting with the folio's, as
        // `folio_page_idx()` counts them.
        let i = unsafe { page.offset_from(folio.as_raw().cast::<bindings::page>()) };
        Some((folio, folio.index() + usize::try_from(i).ok()?))
    }
}

#[kunit_tests(rust_kernel_mm_hmm)]
mod tests {
    use super::*;
    use crate::mm::migrate::testing::{
        evict_all,
        read_user,
        to_device,
        user_pages,
        Backing, //
    };
    use crate::page::PAGE_SIZE;

    #[derive(Default)]
    struct Table {
        invalidated: KVec<Range<usize>>,
    }

    impl MirrorOps for Table {
        fn invalidate(&mut self, range: &NotifierRange<'_>) {
            // Test only: a real table must not allocate here.
            let _ = self.invalidated.push(range.range(), GFP_ATOMIC);
        }
    }

    const PMD: usize = PAGE_SIZE << crate::mm::pagemap::MAX_FOLIO_ORDER;

    #[test]
    fn owner_sees_device_pages_others_fault_them_back() -> Result {
        let pm = KBox::pin_init(Pagemap::new(PMD, None, Backing::new(PMD)), GFP_KERNEL)?;
        let n = 4;
        let (addr, data) = user_pages(n, 0x77)?;
        let moved = to_device(&pm, addr, n)?;
        let task = crate::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let len = n * PAGE_SIZE;

        let own = KBox::pin_init(
            Mirror::new(mm, addr, len, Some(pm.owner()), Table::default()),
            GFP_KERNEL,
        )?;
        let mut req = RangeRequest::new(addr, n, false)?;
        let (own_device, own_order, own_indexed) = {
            let f = own.fault(&mut req, DEFAULT_TIMEOUT_MS)?;
            let device = f
                .iter()
                .filter(|(_, p)| p.device_folio::<Backing>().is_some())
                .count();
            // Single pages: each entry's page is its folio's first.
            let indexed = f
                .iter()
                .filter_map(|(_, p)| p.device_page::<Backing>())
                .filter(|(folio, index)| *index == folio.index())
                .count();
            (device, f.pfn(0).map(|p| p.map_order()), indexed)
        };
        let used_after_own = pm.nr_used();

        let other = KBox::pin_init(
            Mirror::new(mm, addr, len, None, Table::default()),
            GFP_KERNEL,
        )?;
        let mut req = RangeRequest::new(addr, n, true)?;
        let (other_valid, other_writable, other_device) = {
            let f = other.fault(&mut req, DEFAULT_TIMEOUT_MS)?;
            (
                f.iter().filter(|(_, p)| p.is_valid()).count(),
                f.iter().filter(|(_, p)| p.is_writable()).count(),
                f.iter()
                    .filter(|(_, p)| p.device_folio::<Backing>().is_some())
                    .count(),
            )
        };
        let used_after_other = pm.nr_used();
        let back = read_user(addr, len)?;
        let leftover = evict_all(&pm)?;

        // Unmapping the first page invalidates both mirrors.
        // SAFETY: The range is the test's own mapping.
        to_result(unsafe { bindings::vm_munmap(addr, PAGE_SIZE) })?;
        let seen = |m: &Mirror<Table>| {
            m.lock()
                .invalidated
                .iter()
                .any(|r| r.start <= addr && r.end > addr)
        };

        assert_eq!(moved, n);
        assert_eq!(own_device, n);
        assert_eq!(own_indexed, n);
        assert_eq!(own_order, Some(0));
        assert_eq!(used_after_own, n);
        assert_eq!(other_valid, n);
        assert_eq!(other_writable, n);
        assert_eq!(other_device, 0);
        assert_eq!(used_after_other, 0);
        assert_eq!(pm.data().faults.load(crate::sync::atomic::Relaxed), n);
        assert!(back[..] == data[..]);
        assert_eq!(leftover, 0);
        assert!(seen(&own));
        assert!(seen(&other));
        Ok(())
    }

    /// A migration by the mirror's own owner invalidates it like any other
    /// event: a fault taken before it must not be used after it.
    #[test]
    fn own_migrations_invalidate_the_mirror() -> Result {
        let pm = KBox::pin_init(Pagemap::new(PMD, None, Backing::new(PMD)), GFP_KERNEL)?;
        let n = 4;
        let (addr, data) = user_pages(n, 0x3c)?;
        let task = crate::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let own = KBox::pin_init(
            Mirror::new(mm, addr, n * PAGE_SIZE, Some(pm.owner()), Table::default()),
            GFP_KERNEL,
        )?;
        let mut req = RangeRequest::new(addr, n, false)?;
        let system_before = {
            let f = own.fault(&mut req, DEFAULT_TIMEOUT_MS)?;
            f.iter().filter(|(_, p)| p.is_system_page()).count()
        };
        let seen = |m: &Mirror<Table>| {
            m.lock()
                .invalidated
                .iter()
                .filter(|r| r.start < addr + n * PAGE_SIZE && r.end > addr)
                .count()
        };
        let before = seen(&own);
        let moved = to_device(&pm, addr, n)?;
        let after_to_device = seen(&own);
        let device_after = {
            let f = own.fault(&mut req, DEFAULT_TIMEOUT_MS)?;
            f.iter()
                .filter(|(_, p)| p.device_folio::<Backing>().is_some())
                .count()
        };
        // The CPU's access migrates the pages back, through the owner's
        // `migrate_to_ram`: that invalidates the mirror too.
        let back = read_user(addr, n * PAGE_SIZE)?;
        let after_cpu = seen(&own);
        let leftover = evict_all(&pm)?;

        assert_eq!(system_before, n);
        assert_eq!(before, 0);
        assert_eq!(moved, n);
        assert!(after_to_device > before);
        assert_eq!(device_after, n);
        assert!(after_cpu > after_to_device);
        assert!(back[..] == data[..]);
        assert_eq!(leftover, 0);
        Ok(())
    }

    #[test]
    fn requests_validate_their_range() {
        assert_eq!(RangeRequest::new(1, 1, false).err(), Some(EINVAL));
        assert_eq!(RangeRequest::new(0, 0, false).err(), Some(EINVAL));
        assert_eq!(
            RangeRequest::new(usize::MAX & !(PAGE_SIZE - 1), 2, false).err(),
            Some(EINVAL)
        );
        assert_eq!(
            RangeRequest::snapshot(PAGE_SIZE, usize::MAX).err(),
            Some(EINVAL)
        );
        assert!(RangeRequest::new(PAGE_SIZE, 3, true).is_ok_and(|r| r.len() == 3));
    }

    #[test]
    fn exclusive_access_ends_at_the_next_cpu_access() -> Result {
        let n = 2;
        let (addr, data) = user_pages(n, 0x5a)?;
        let task = crate::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let len = n * PAGE_SIZE;
        let m = KBox::pin_init(
            Mirror::new(mm, addr, len, None, Table::default()),
            GFP_KERNEL,
        )?;
        let seen = |m: &Mirror<Table>, a: usize| {
            m.lock()
                .invalidated
                .iter()
                .filter(|r| r.start <= a && r.end > a)
                .count()
        };
        let (content, after_take) = {
            let guard = mm.mmap_read_lock();
            let page = m.make_exclusive(&guard, addr)?;
            // Taking the page invalidated the mirror (null owner).
            let after_take = seen(&m, addr);
            let mut content = KVec::from_elem(0u8, PAGE_SIZE, GFP_KERNEL)?;
            page.read(&mut content)?;
            (content[..] == data[..PAGE_SIZE], after_take)
        };
        let before_cpu = seen(&m, addr);
        // The CPU's access restores its mapping and invalidates the mirror.
        let back = read_user(addr, len)?;
        let after_cpu = seen(&m, addr);
        // SAFETY: The range is the test's own mapping.
        to_result(unsafe { bindings::vm_munmap(addr + PAGE_SIZE, PAGE_SIZE) })?;
        let unmapped = {
            let guard = mm.mmap_read_lock();
            m.make_exclusive(&guard, addr + PAGE_SIZE).err()
        };

        assert!(content);
        assert!(after_take >= 1);
        assert!(after_cpu > before_cpu);
        assert!(back[..] == data[..]);
        assert_eq!(unmapped, Some(EFAULT));
        Ok(())
    }

    #[test]
    fn faulting_an_unmapped_range_fails() -> Result {
        let (addr, _) = user_pages(1, 0)?;
        let task = crate::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        // SAFETY: The range is the test's own mapping.
        to_result(unsafe { bindings::vm_munmap(addr, PAGE_SIZE) })?;
        let m = KBox::pin_init(
            Mirror::new(mm, addr, PAGE_SIZE, None, Table::default()),
            GFP_KERNEL,
        )?;
        let mut req = RangeRequest::new(addr, 1, false)?;
        assert_eq!(m.fault(&mut req, DEFAULT_TIMEOUT_MS).err(), Some(EFAULT));
        Ok(())
    }
}
