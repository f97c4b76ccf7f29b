// SPDX-License-Identifier: GPL-2.0

//! Device memory in process address spaces: `MEMORY_DEVICE_PRIVATE` and
//! `MEMORY_DEVICE_COHERENT` ZONE_DEVICE pagemaps.
//!
//! A device with memory the CPU cannot address coherently (a GPU's VRAM) can
//! still hold pages of a process: [`Pagemap::new`] reserves an unused
//! physical range, creates a `struct page` for every page of it with
//! `memremap_pages()`, and the driver migrates anonymous memory into those
//! *device-private* pages (see [`crate::mm::migrate`]). The CPU page tables
//! then hold special swap entries; a CPU access faults into
//! [`DevicePrivateOps::migrate_to_ram`].
//!
//! Device memory the CPU can map cacheably (CXL-attached memory, or a GPU
//! whose interconnect is coherent) is *device-coherent*:
//! [`Pagemap::new_coherent`] creates the pages over the device's own BAR and
//! the kernel maps them in its linear map. Processes map such pages like
//! system memory, and a CPU access does not migrate them; only long-term
//! pins (`FOLL_LONGTERM`) move them out. Which kind a pagemap is, is part
//! of its driver type ([`PagemapOps::Kind`]): the operations that only make
//! sense for one kind exist only for it.
//!
//! The pagemap also allocates its pages: every page is free until
//! [`Pagemap::alloc_folio`] hands it out, and free again once core mm drops
//! its last reference and [`PagemapOps::folio_free`] has run. Keeping
//! the allocator here is what makes allocation safe: only free pages are
//! ever initialised. It is the GPU buddy allocator that GPU drivers use for
//! their VRAM ([`crate::gpu::buddy`]), with single pages sub-allocated from
//! PMD-sized blocks, and frees without sleeping, as `folio_free` may be
//! called from any context where a page reference is dropped.
//!
//! C header: [`include/linux/memremap.h`](srctree/include/linux/memremap.h)

use crate::ffi::c_ulong;
use crate::{
    bindings,
    error::{
        Error,
        Result, //
    },
    prelude::*,
    sync::Arc,
    types::Opaque, //
};
use core::{
    any::TypeId,
    ffi::c_void,
    marker::PhantomData,
    ops::Range,
    ptr::NonNull, //
};

mod allocator;
use allocator::Alloc;
pub use allocator::{
    Reservation,
    UsedWalk, //
};

/// The owner cookie of device-private pages.
///
/// HMM reports device-private pages whose pagemap owner matches the range's
/// owner instead of faulting them back to system memory, and `migrate_vma`
/// selects device-private pages by owner. Drivers that share device memory
/// through an interconnect can share an owner; otherwise each pagemap is its
/// own owner.
///
/// The cookie is only ever compared, never dereferenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner(*mut c_void);

// SAFETY: `Owner` is an opaque value that is never dereferenced.
unsafe impl Send for Owner {}
// SAFETY: `Owner` is an opaque value that is never dereferenced.
unsafe impl Sync for Owner {}

impl Owner {
    /// An owner cookie as found in a C structure (e.g. the `owner` of an
    /// MMU notifier range). Safe: the cookie is only ever compared.
    pub fn from_raw(ptr: *mut c_void) -> Self {
        Owner(ptr)
    }

    /// The raw cookie, for the C structures that carry it.
    pub fn as_ptr(self) -> *mut c_void {
        self.0
    }
}

/// The largest folio order a [`Pagemap`] hands out (a PMD on x86-64).
pub const MAX_FOLIO_ORDER: u32 = bindings::PMD_ORDER;

/// Whether folios above order 0 can be migrated (`thp_migration_supported()`):
/// without it, [`Pagemap::alloc_folio`] only hands out single pages and the
/// core splits large folios before they migrate.
///
/// # Examples
///
/// ```
/// use kernel::mm::pagemap::{thp_migration_supported, MAX_FOLIO_ORDER};
///
/// // The order a driver allocates for a PMD-sized source.
/// let order = if thp_migration_supported() { MAX_FOLIO_ORDER } else { 0 };
/// assert!(order <= MAX_FOLIO_ORDER);
/// ```
pub fn thp_migration_supported() -> bool {
    // SAFETY: No preconditions.
    unsafe { bindings::thp_migration_supported() }
}

/// Why a CPU fault on a device-private page could not be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// Out of memory: the faulting task gets the OOM treatment.
    Oom,
    /// The data is gone: the faulting task gets `SIGBUS`.
    SigBus,
}

impl FaultError {
    fn to_vm_fault(self) -> bindings::vm_fault_t {
        match self {
            FaultError::Oom => bindings::vm_fault_reason_VM_FAULT_OOM as bindings::vm_fault_t,
            FaultError::SigBus => bindings::vm_fault_reason_VM_FAULT_SIGBUS as bindings::vm_fault_t,
        }
    }
}

mod private {
    pub trait Sealed {}
}

/// The kind of device memory of a [`Pagemap`]: [`Private`] or [`Coherent`].
pub trait Kind: private::Sealed + 'static {
    /// The `memory_type` of the `dev_pagemap`.
    #[doc(hidden)]
    const TYPE: bindings::memory_type;

    /// The ops of every Rust pagemap of this kind.
    #[doc(hidden)]
    fn ops() -> &'static bindings::dev_pagemap_ops;
}

/// Device-private memory (`MEMORY_DEVICE_PRIVATE`): the CPU cannot map it,
/// and a CPU access migrates the page back ([`DevicePrivateOps`]).
pub enum Private {}

/// Device-coherent memory (`MEMORY_DEVICE_COHERENT`): the CPU maps it
/// cacheably, like system memory ([`Pagemap::new_coherent`]).
pub enum Coherent {}

impl private::Sealed for Private {}
impl private::Sealed for Coherent {}

impl Kind for Private {
    const TYPE: bindings::memory_type = bindings::memory_type_MEMORY_DEVICE_PRIVATE;

    fn ops() -> &'static bindings::dev_pagemap_ops {
        &PRIVATE_OPS
    }
}

impl Kind for Coherent {
    const TYPE: bindings::memory_type = bindings::memory_type_MEMORY_DEVICE_COHERENT;

    fn ops() -> &'static bindings::dev_pagemap_ops {
        &COHERENT_OPS
    }
}

/// Callbacks of the driver that owns a [`Pagemap`], for either kind of
/// device memory.
pub trait PagemapOps: Send + Sync + Sized + 'static {
    /// [`Private`] or [`Coherent`]. A device-private pagemap's driver also
    /// implements [`DevicePrivateOps`].
    type Kind: Kind;

    /// The last reference to `folio` is gone.
    ///
    /// Called in any context that can drop a page reference: process,
    /// softirq (a network stack freeing a zero-copy skb) or hardirq (a
    /// bio completion). It must not sleep, and a lock it takes must be one
    /// that is never held with interrupts enabled ([`SpinLockIrq`]), or
    /// lockless (atomics). Release what the driver associates with the
    /// folio (its device page-table entries, statistics); the pagemap
    /// returns the pages to its allocator after this returns.
    ///
    /// [`SpinLockIrq`]: crate::sync::SpinLockIrq
    fn folio_free(pagemap: &Pagemap<Self>, folio: &DeviceFolio<Self>);
}

/// Callbacks that only device-private memory has.
pub trait DevicePrivateOps: PagemapOps<Kind = Private> {
    /// A CPU touched a device-private page of this pagemap.
    ///
    /// Called with the mmap lock held for read and a reference on
    /// `fault.page()`. Migrate the page (at least) back to system memory,
    /// typically with [`crate::mm::migrate::MigrateVma::for_fault`].
    fn migrate_to_ram(
        pagemap: &Pagemap<Self>,
        fault: &DeviceFault<'_, Self>,
    ) -> core::result::Result<(), FaultError>;
}

/// Where the memory of a device-private pagemap can be reached for DMA: a
/// range of a PCI BAR, page `i` of the pagemap at `i` pages from its start.
/// The pagemap reports its pages to the mirrors that can reach the BAR as
/// aliases, which they access in place instead of migrating them
/// (`PGMAP_ALIAS_LINEAR`, see `Documentation/mm/hmm.rst`), and maps the
/// range in the kernel for mirrors that copy with the CPU.
///
/// # Invariants
///
/// `provider` is the P2P provider of the BAR that holds `phys..phys + len`.
pub struct LinearAlias {
    provider: NonNull<bindings::p2pdma_provider>,
    phys: u64,
    len: usize,
}

impl LinearAlias {
    /// The alias of a pagemap of `len` bytes at `phys`, in the BAR of
    /// `provider`.
    ///
    /// # Safety
    ///
    /// `provider` is the P2P provider of the BAR that holds
    /// `phys..phys + len`, and it and the BAR stay valid until
    /// [`Pagemap::revoke_aliases`] has returned and every page of the
    /// pagemap has been migrated or freed.
    pub unsafe fn new(provider: NonNull<bindings::p2pdma_provider>, phys: u64, len: usize) -> Self {
        // INVARIANT: Safety requirement.
        Self {
            provider,
            phys,
            len,
        }
    }
}

/// The kernel mapping of a [`LinearAlias`], for mirrors that copy with the
/// CPU.
///
/// # Invariants
///
/// `addr` is an `ioremap()` of the alias, unmapped on drop.
struct AliasMapping {
    addr: NonNull<c_void>,
}

// SAFETY: The mapping is only handed to core mm, from any thread.
unsafe impl Send for AliasMapping {}
// SAFETY: As above; `&AliasMapping` gives nothing access to it.
unsafe impl Sync for AliasMapping {}

impl Drop for AliasMapping {
    fn drop(&mut self) {
        // SAFETY: `addr` came from `ioremap()` (type invariant).
        unsafe { bindings::iounmap(self.addr.as_ptr()) };
    }
}

/// The part of every [`Pagemap`] that the C callbacks reach without knowing
/// its driver type: the `dev_pagemap`, the type of the pagemap it heads, and
/// that type's callbacks.
///
/// All Rust pagemaps of a kind share one `dev_pagemap_ops`, [`PRIVATE_OPS`]
/// or [`COHERENT_OPS`], a `static` with a unique address, so that
/// `pgmap->ops == K::ops()` tells a Rust pagemap from any other; `type_id`
/// then tells which `Pagemap<T>` it is.
///
/// # Invariants
///
/// `pgmap` is a `MEMORY_DEVICE_PRIVATE` or `MEMORY_DEVICE_COHERENT` pagemap
/// registered with `memremap_pages()`, `nr_range == 1`, over a range reserved
/// in `iomem_resource` (with `request_free_mem_region()` for private memory,
/// the device's BAR for coherent memory) that the header releases on drop,
/// with `ops == K::ops()` for its kind `K` and `owner` pointing at `pgmap`
/// itself, until drop. The header is the first field of a `Pagemap<T>` with
/// `TypeId::of::<T>() == type_id` whose callbacks are `folio_free`,
/// `migrate_to_ram`, `Some` exactly for device-private pagemaps. A pagemap
/// with `PGMAP_ALIAS_LINEAR` has its `alias` in `alias_mapping`'s mapping of
/// it.
#[repr(C)]
#[pin_data(PinnedDrop)]
struct Header {
    #[pin]
    pgmap: Opaque<bindings::dev_pagemap>,
    type_id: TypeId,
    folio_free: unsafe fn(*const Header, *mut bindings::folio),
    migrate_to_ram:
        Option<unsafe fn(*const Header, *mut bindings::vm_fault) -> bindings::vm_fault_t>,
    /// Unmapped after the pagemap, when no page is left to alias.
    alias_mapping: Option<AliasMapping>,
}

/// The callbacks of device-private pagemaps.
static PRIVATE_OPS: bindings::dev_pagemap_ops = bindings::dev_pagemap_ops {
    folio_free: Some(folio_free_trampoline),
    migrate_to_ram: Some(migrate_to_ram_trampoline),
    memory_failure: None,
    folio_split: None,
    dma_alias: None,
};

/// The callbacks of device-coherent pagemaps: the CPU maps their pages, so
/// there is nothing to migrate on a CPU access, and no alias to hand out.
static COHERENT_OPS: bindings::dev_pagemap_ops = bindings::dev_pagemap_ops {
    folio_free: Some(folio_free_trampoline),
    migrate_to_ram: None,
    memory_failure: None,
    folio_split: None,
    dma_alias: None,
};

/// Where a pagemap's physical range comes from.
enum Region {
    /// A free range of this many bytes (device-private memory).
    Free(usize),
    /// This range of device memory, which nothing else claims.
    Device(Range<u64>),
}

/// # Safety
///
/// Only called by core mm, as `dev_pagemap_ops::folio_free` of a pagemap
/// whose ops are [`PRIVATE_OPS`] or [`COHERENT_OPS`].
unsafe extern "C" fn folio_free_trampoline(folio: *mut bindings::folio) {
    // SAFETY: `folio` is a valid folio of a pagemap with our ops, which is
    // the `pgmap` of a live `Header` (type invariant).
    let h = unsafe { Header::of_pgmap(bindings::page_pgmap(folio.cast())) };
    // SAFETY: As above; `folio_free` is the callback of the header's type.
    unsafe { ((*h).folio_free)(h, folio) }
}

/// # Safety
///
/// Only called by core mm, as `dev_pagemap_ops::migrate_to_ram`, with a
/// valid `vmf` whose page belongs to a pagemap whose ops are [`PRIVATE_OPS`].
unsafe extern "C" fn migrate_to_ram_trampoline(
    vmf: *mut bindings::vm_fault,
) -> bindings::vm_fault_t {
    // SAFETY: As above.
    let h = unsafe { Header::of_pgmap(bindings::page_pgmap((*vmf).page)) };
    // SAFETY: As above; a device-private header has the callback (type
    // invariant), which is the one of the header's type.
    match unsafe { (*h).migrate_to_ram } {
        // SAFETY: As above.
        Some(f) => unsafe { f(h, vmf) },
        None => FaultError::SigBus.to_vm_fault(),
    }
}

impl Header {
    /// # Safety
    ///
    /// `pgmap` must be the `pgmap` of a live `Header`.
    #[inline]
    unsafe fn of_pgmap(pgmap: *const bindings::dev_pagemap) -> *const Header {
        // SAFETY: `pgmap` is the first field of a `Header` (safety requirement).
        unsafe {
            crate::container_of!(
                pgmap.cast::<Opaque<bindings::dev_pagemap>>().cast_mut(),
                Header,
                pgmap
            )
        }
    }

    /// The header of a `Pagemap<T>` over `region`, with the callbacks of
    /// `T` that its kind has (`None` for coherent pagemaps).
    #[allow(clippy::type_complexity)]
    fn new<T: PagemapOps>(
        region: Region,
        nid: Option<i32>,
        migrate_to_ram: Option<
            unsafe fn(*const Header, *mut bindings::vm_fault) -> bindings::vm_fault_t,
        >,
        alias: Option<(LinearAlias, AliasMapping)>,
    ) -> impl PinInit<Self, Error> {
        let alias_desc = alias.as_ref().map(|(a, m)| bindings::dev_pagemap_alias {
            provider: a.provider.as_ptr(),
            phys: a.phys,
            vaddr: core::ptr::null_mut(),
            ioaddr: m.addr.as_ptr(),
        });
        let alias_mapping = alias.map(|(_, m)| m);
        try_pin_init!(Self {
            pgmap <- Opaque::try_ffi_init(move |pgmap: *mut bindings::dev_pagemap| {
                let (start, end) = match region {
                    Region::Free(size) => {
                        // SAFETY: `iomem_resource` is the root of the iomem
                        // tree; the name is static.
                        let res = unsafe {
                            bindings::request_free_mem_region(
                                &raw mut bindings::iomem_resource,
                                size,
                                c"device-private".as_char_ptr(),
                            )
                        };
                        let res = crate::error::from_err_ptr(res)?;
                        // SAFETY: `res` is a valid resource just reserved for us.
                        unsafe { ((*res).start, (*res).end) }
                    }
                    Region::Device(r) => {
                        let len = r.end - r.start;
                        // SAFETY: `iomem_resource` is the root of the iomem
                        // tree; the name is static. This claims the range
                        // (`request_mem_region()`): it fails if any driver,
                        // or RAM, holds a part of it.
                        let res = unsafe {
                            bindings::__request_region(
                                &raw mut bindings::iomem_resource,
                                r.start,
                                len,
                                c"device-coherent".as_char_ptr(),
                                0,
                            )
                        };
                        if res.is_null() {
                            return Err(EBUSY);
                        }
                        (r.start, r.end - 1)
                    }
                };

                // SAFETY: `pgmap` is valid for writes; all-zeroes is a valid
                // `dev_pagemap` to start from (`memremap_pages()` initialises
                // the reference count and completion).
                unsafe {
                    pgmap.write(core::mem::zeroed());
                    (*pgmap).type_ = T::Kind::TYPE;
                    *(*pgmap).__bindgen_anon_1.range.as_mut() = bindings::range { start, end };
                    (*pgmap).nr_range = 1;
                    (*pgmap).ops = T::Kind::ops();
                    (*pgmap).owner = pgmap.cast();
                    if let Some(alias) = alias_desc {
                        (*pgmap).flags = bindings::PGMAP_ALIAS_LINEAR;
                        (*pgmap).alias = alias;
                    }
                }
                let nid = nid.unwrap_or(bindings::NUMA_NO_NODE);
                // SAFETY: `pgmap` is initialised as `memremap_pages()` requires
                // and, being pinned, stays at this address until `drop`
                // unregisters it.
                let ret = unsafe { bindings::memremap_pages(pgmap, nid) };
                if let Err(e) = crate::error::from_err_ptr(ret) {
                    // SAFETY: The region was reserved above and is not used.
                    unsafe { bindings::release_mem_region(start, end - start + 1) };
                    return Err(e);
                }
                Ok(())
            }),
            type_id: TypeId::of::<T>(),
            folio_free: Pagemap::<T>::folio_free_callback,
            migrate_to_ram,
            alias_mapping,
        })
    }

    #[inline]
    fn range(&self) -> Range<u64> {
        // SAFETY: The range is immutable while registered (type invariant).
        let r = unsafe { *(*self.pgmap.get()).__bindgen_anon_1.range.as_ref() };
        r.start..r.end + 1
    }
}

#[pinned_drop]
impl PinnedDrop for Header {
    fn drop(self: Pin<&mut Self>) {
        let range = self.range();
        // SAFETY: The pagemap is registered (type invariant). This waits until
        // every page is freed: pages still mapped by processes keep it
        // waiting, which is why drivers evict first
        // (`crate::mm::migrate::Eviction`). The rest of the `Pagemap`, which
        // the callbacks use meanwhile, is dropped after its header.
        unsafe { bindings::memunmap_pages(self.pgmap.get()) };
        // SAFETY: The region was reserved in `new` and nothing uses it now.
        unsafe { bindings::release_mem_region(range.start, range.end - range.start) };
    }
}

/// A device-private or device-coherent pagemap with its page allocator.
///
/// # Invariants
///
/// - `header` is registered as its type invariant says, for `T`.
/// - A page that `alloc` counts as used by a folio was initialised by
///   [`Pagemap::alloc_folio`] and core mm has not freed it yet. Only pages
///   `alloc` has just handed out are passed to `zone_device_folio_init()`.
#[repr(C)]
#[pin_data]
pub struct Pagemap<T: PagemapOps> {
    // Must stay first (see `Header`) and be dropped first: its drop waits
    // for callbacks that use the other fields.
    #[pin]
    header: Header,
    /// Pages handed out: `size / PAGE_SIZE`. The reserved range can be
    /// larger (`request_free_mem_region()` rounds up to a memory section).
    nr: usize,
    alloc: Arc<Alloc>,
    #[pin]
    data: T,
}

// SAFETY: The C pagemap may be used from any thread; `T` is `Send + Sync`.
unsafe impl<T: PagemapOps> Send for Pagemap<T> {}
// SAFETY: All mutable state is behind `alloc`'s locks or owned by C.
unsafe impl<T: PagemapOps> Sync for Pagemap<T> {}

impl<T: DevicePrivateOps> Pagemap<T> {
    /// Creates a device-private pagemap of `size` bytes on NUMA node `nid`
    /// (`None`: no preference).
    ///
    /// `size` must be a non-zero multiple of the PMD size so that every page
    /// can be part of a PMD-sized folio; otherwise `EINVAL`.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::pagemap::{
    ///     DeviceFault, DeviceFolio, DevicePrivateOps, FaultError, PagemapOps, Pagemap, Private,
    /// };
    /// use kernel::prelude::*;
    ///
    /// struct Vram;
    ///
    /// impl PagemapOps for Vram {
    ///     type Kind = Private;
    ///     fn folio_free(_pm: &Pagemap<Self>, _folio: &DeviceFolio<Self>) {}
    /// }
    ///
    /// impl DevicePrivateOps for Vram {
    ///     fn migrate_to_ram(
    ///         _pm: &Pagemap<Self>,
    ///         _fault: &DeviceFault<'_, Self>,
    ///     ) -> core::result::Result<(), FaultError> {
    ///         Err(FaultError::SigBus)
    ///     }
    /// }
    ///
    /// let pm = KBox::pin_init(Pagemap::new(4 << 20, None, Vram), GFP_KERNEL)?;
    /// assert_eq!(pm.nr_pages(), (4 << 20) / kernel::page::PAGE_SIZE);
    /// let folio = pm.alloc_folio(0)?;
    /// let index = folio.index();
    /// drop(folio); // The page is free again, and the next one handed out.
    /// assert_eq!(pm.alloc_folio(0)?.index(), index);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn new<E>(
        size: usize,
        nid: Option<i32>,
        data: impl PinInit<T, E>,
    ) -> impl PinInit<Self, Error>
    where
        Error: From<E>,
    {
        Self::init(
            Region::Free(size),
            size,
            nid,
            Some(Self::migrate_to_ram_callback),
            None,
            data,
        )
    }

    /// As [`Pagemap::new`], for device memory that can also be reached at
    /// `alias` ([`LinearAlias`]): mirrors that name themselves as alias
    /// clients in `hmm_range_fault()` and can reach it, peer to peer or
    /// with the CPU through the kernel mapping the pagemap keeps, access
    /// the pages in place rather than migrate them. Core decides who can
    /// reach it; the driver takes the aliases back with
    /// [`Pagemap::revoke_aliases`] and by migrating the pages.
    ///
    /// `EINVAL` if `alias` is not `size` bytes; `ENOMEM` if it cannot be
    /// mapped.
    pub fn new_with_alias<E>(
        size: usize,
        nid: Option<i32>,
        alias: LinearAlias,
        data: impl PinInit<T, E>,
    ) -> impl PinInit<Self, Error>
    where
        Error: From<E>,
    {
        let mapping = if alias.len != size {
            Err(EINVAL)
        } else {
            // SAFETY: `phys..phys + len` is BAR memory (type invariant of
            // `alias`), which `ioremap()` may map.
            let addr = unsafe { bindings::ioremap(alias.phys, alias.len) };
            // INVARIANT: Just mapped; unmapped on drop.
            NonNull::new(addr)
                .map(|addr| AliasMapping { addr })
                .ok_or(ENOMEM)
        };
        pin_init::pin_init_scope(move || {
            let mapping = mapping?;
            Ok(Self::init(
                Region::Free(size),
                size,
                nid,
                Some(Self::migrate_to_ram_callback),
                Some((alias, mapping)),
                data,
            ))
        })
    }

    /// # Safety
    ///
    /// `h` is the header of a `Pagemap<T>`, `vmf` a valid fault on a
    /// referenced page of it, with the mmap or VMA lock held.
    unsafe fn migrate_to_ram_callback(
        h: *const Header,
        vmf: *mut bindings::vm_fault,
    ) -> bindings::vm_fault_t {
        // SAFETY: `h` heads a live `Pagemap<T>` (safety requirement).
        let pm = unsafe { &*h.cast::<Self>() };
        // INVARIANT: `vmf` is valid for the duration of the call, its page is ours.
        let fault = DeviceFault {
            vmf,
            _p: PhantomData,
        };
        match T::migrate_to_ram(pm, &fault) {
            Ok(()) => 0,
            Err(e) => e.to_vm_fault(),
        }
    }

    /// Stops reporting this pagemap's pages as aliases to mirrors
    /// (`dev_pagemap_revoke_aliases()`), and waits until no
    /// `hmm_range_fault()` still decides with the aliases on.
    ///
    /// This is the first step of removing the memory behind the aliases:
    /// then evict every page ([`crate::mm::migrate::Eviction`]), which
    /// invalidates every mirror that holds an alias. Faults after this call
    /// migrate instead. Mirrors keep the aliases they hold until their next
    /// invalidation. Sleeps (an RCU grace period).
    pub fn revoke_aliases(&self) {
        // SAFETY: The pagemap is registered (type invariant of `Header`).
        unsafe { bindings::dev_pagemap_revoke_aliases(self.raw()) };
    }

    /// Reports the pagemap's pages as aliases again, after
    /// [`Pagemap::revoke_aliases`]; for a driver that turns its aliases off
    /// and on, not for one whose alias memory is going away.
    pub fn restore_aliases(&self) {
        // SAFETY: The pagemap is registered (type invariant of `Header`).
        unsafe { bindings::dev_pagemap_restore_aliases(self.raw()) };
    }

    /// Whether the aliases are revoked ([`Pagemap::revoke_aliases`]).
    pub fn aliases_revoked(&self) -> bool {
        // SAFETY: The field is written with `WRITE_ONCE()` by the C helpers.
        unsafe { core::ptr::read_volatile(&raw const (*self.raw()).alias_revoked) }
    }

    /// How many of this pagemap's pages `hmm_range_fault()` reported to
    /// mirrors as aliases (`pgmap->alias_reported`).
    pub fn aliases_reported(&self) -> u64 {
        // SAFETY: The counter is an `atomic_long_t` of the registered pagemap,
        // which core updates atomically; an aligned volatile read sees one
        // of its values.
        let n =
            unsafe { core::ptr::read_volatile(&raw const (*self.raw()).alias_reported.counter) };
        n as u64
    }
}

#[cfg(CONFIG_PCI)]
impl<T: PagemapOps<Kind = Coherent>> Pagemap<T> {
    /// Creates a device-coherent pagemap over memory BAR `bar` of `pdev`,
    /// on NUMA node `nid` (`None`: no preference).
    ///
    /// The pagemap claims the whole BAR in the iomem tree for as long as it
    /// lives, so the driver must not also request or map the BAR: `EBUSY`
    /// if anyone holds a part of it. The kernel then maps the BAR
    /// write-back in its linear map; an earlier uncached mapping of it
    /// would make `memremap_pages()` fail or downgrade the linear map, as
    /// x86 PAT keeps one memory type per physical range. The BAR's length
    /// must be a non-zero multiple of the PMD size; otherwise `EINVAL`.
    ///
    /// Only for memory the CPU can access coherently and cacheably through
    /// the BAR, as with CXL type 2/3 memory or an emulated device whose BAR
    /// is host memory. The pages are the BAR's own pfns: a peer can
    /// DMA-map them like system memory.
    ///
    /// The pagemap stays valid after the driver unbinds (it may be kept
    /// alive by open files); the driver should evict its pages first
    /// ([`crate::mm::migrate::Eviction`]), and drop it as soon as it can:
    /// until then the BAR stays claimed, and a new binding of the device
    /// gets `EBUSY`.
    pub fn new_coherent<E>(
        pdev: &crate::pci::Device<crate::device::Bound>,
        bar: u32,
        nid: Option<i32>,
        data: impl PinInit<T, E>,
    ) -> impl PinInit<Self, Error>
    where
        Error: From<E>,
    {
        let range = pdev.resource_start(bar).and_then(|start| {
            let len = pdev.resource_len(bar)?;
            let end = start.checked_add(len).ok_or(EINVAL)?;
            Ok(start..end)
        });
        pin_init::pin_init_scope(move || {
            let range = range?;
            let size = usize::try_from(range.end - range.start)?;
            Ok(Self::init(
                Region::Device(range),
                size,
                nid,
                None,
                None,
                data,
            ))
        })
    }
}

impl<T: PagemapOps> Pagemap<T> {
    /// The pagemap of `size` bytes over `region`, with the callbacks of its
    /// kind.
    #[allow(clippy::type_complexity)]
    fn init<E>(
        region: Region,
        size: usize,
        nid: Option<i32>,
        migrate_to_ram: Option<
            unsafe fn(*const Header, *mut bindings::vm_fault) -> bindings::vm_fault_t,
        >,
        alias: Option<(LinearAlias, AliasMapping)>,
        data: impl PinInit<T, E>,
    ) -> impl PinInit<Self, Error>
    where
        Error: From<E>,
    {
        let pmd = crate::page::PAGE_SIZE << MAX_FOLIO_ORDER;
        let nr_pages = size / crate::page::PAGE_SIZE;
        // SAFETY: `data`'s initializer is called exactly as the closure is;
        // only its error is converted.
        let data = unsafe {
            pin_init::pin_init_from_closure(move |slot: *mut T| {
                data.__init(slot).map_err(Error::from)
            })
        };
        pin_init::pin_init_scope(move || {
            if size == 0 || size % pmd != 0 {
                return Err(EINVAL);
            }
            let alloc = Alloc::new(nr_pages)?;
            Ok(try_pin_init!(Self {
                header <- Header::new::<T>(region, nid, migrate_to_ram, alias),
                nr: nr_pages,
                alloc,
                data <- data,
            }))
        })
    }

    fn raw(&self) -> *mut bindings::dev_pagemap {
        self.header.pgmap.get()
    }

    /// The driver data.
    #[inline]
    pub fn data(&self) -> &T {
        &self.data
    }

    /// The owner cookie of this pagemap's pages.
    pub fn owner(&self) -> Owner {
        // SAFETY: `owner` is written once before registration.
        Owner(unsafe { (*self.raw()).owner })
    }

    /// The physical address range the pages stand for (not addressable
    /// memory; the reservation behind it may extend further).
    pub fn phys_range(&self) -> Range<u64> {
        let start = self.header.range().start;
        start..start + (self.nr * crate::page::PAGE_SIZE) as u64
    }

    /// The page frame numbers of this pagemap's pages.
    #[inline]
    pub fn pfn_range(&self) -> Range<usize> {
        let start = (self.header.range().start >> crate::page::PAGE_SHIFT) as usize;
        start..start + self.nr
    }

    /// The number of pages.
    #[inline]
    pub fn nr_pages(&self) -> usize {
        self.nr
    }

    /// The number of pages currently allocated as device-private folios
    /// (not counting reserved pages).
    pub fn nr_used(&self) -> usize {
        self.alloc.pages.lock().allocated
    }

    /// The index of the first page at or after `from` that is in a folio,
    /// if any: where the folios of a mostly empty pagemap are, so that a
    /// walk over them (an eviction, say) costs what is used, not the size
    /// of the device. The answer may be stale by the time it is used, as
    /// folios come and go meanwhile.
    pub fn next_used(&self, from: usize) -> Option<usize> {
        self.next_used_walk(from, &mut UsedWalk::default())
    }

    /// [`Pagemap::next_used`], adding to `walk` the bits it looked at: how
    /// a caller shows that its walk costs what is used.
    pub fn next_used_walk(&self, from: usize, walk: &mut UsedWalk) -> Option<usize> {
        self.alloc.pages.lock().next_used(from, walk)
    }

    /// The number of pages currently reserved ([`Pagemap::reserve`]).
    pub fn nr_reserved(&self) -> usize {
        self.alloc.pages.lock().reserved
    }

    /// Sets aside a run of `nr` contiguous free pages, at any alignment,
    /// for the driver's own use, such as a buffer object that the device
    /// exports: the allocator hands none of them out as folios until the
    /// [`Reservation`] is dropped, which may outlive the pagemap. Might
    /// sleep.
    ///
    /// Reserved pages have no folio: core mm never maps, migrates or frees
    /// them, and [`crate::mm::migrate::Eviction`] skips them, so their
    /// content is the driver's to manage (and to clear before user space
    /// sees it). `EINVAL` for `nr == 0`, `ENOMEM` when no such run is free.
    ///
    /// # Examples
    ///
    /// ```
    /// use kernel::mm::pagemap::{
    ///     DeviceFault, DeviceFolio, DevicePrivateOps, FaultError, PagemapOps, Pagemap, Private,
    /// };
    /// use kernel::prelude::*;
    ///
    /// struct Vram;
    ///
    /// impl PagemapOps for Vram {
    ///     type Kind = Private;
    ///     fn folio_free(_pm: &Pagemap<Self>, _folio: &DeviceFolio<Self>) {}
    /// }
    ///
    /// impl DevicePrivateOps for Vram {
    ///     fn migrate_to_ram(
    ///         _pm: &Pagemap<Self>,
    ///         _fault: &DeviceFault<'_, Self>,
    ///     ) -> core::result::Result<(), FaultError> {
    ///         Err(FaultError::SigBus)
    ///     }
    /// }
    ///
    /// let pm = KBox::pin_init(Pagemap::new(4 << 20, None, Vram), GFP_KERNEL)?;
    /// let folio = pm.alloc_folio(0)?;
    /// let bo = pm.reserve(3)?;
    /// assert_eq!(bo.nr_pages(), 3);
    /// assert!(!(bo.index()..bo.index() + 3).contains(&folio.index()));
    /// assert_eq!((pm.nr_used(), pm.nr_reserved()), (1, 3));
    /// // Single pages come from the PMD-sized block of the first one.
    /// assert_eq!(pm.alloc_folio(0)?.index(), folio.index() + 1);
    /// drop(bo);
    /// assert_eq!(pm.nr_reserved(), 0);
    /// # drop(folio);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn reserve(&self, nr: usize) -> Result<Reservation> {
        if nr == 0 {
            return Err(EINVAL);
        }
        if nr > self.nr {
            return Err(ENOMEM);
        }
        self.alloc.reserve(nr)
    }

    /// Allocates a folio of `2^order` pages, naturally aligned: a single
    /// page (order 0) or a PMD-sized folio ([`MAX_FOLIO_ORDER`]). Might
    /// sleep.
    ///
    /// The folio is locked and holds one reference, as a destination of
    /// migration expects; dropping it unused frees it. Returns `EINVAL` for
    /// another order, or a PMD-sized one without THP migration, and
    /// `ENOMEM` when no such run of free pages is left.
    ///
    /// Single pages are handed out lowest free page first from the
    /// PMD-sized chunks already in use, so that they do not break up the
    /// runs that PMD-sized folios and reservations need.
    pub fn alloc_folio(&self, order: u32) -> Result<NewFolio<'_, T>> {
        if !(order == 0 || (order == MAX_FOLIO_ORDER && thp_migration_supported())) {
            return Err(EINVAL);
        }
        let index = self.alloc.alloc(order)?;
        let page = self.page_ptr(index);
        // SAFETY: The pages `index..index + 2^order` were just handed out by
        // the allocator, so nothing else initialises or uses them; the
        // pagemap is registered. `index` is aligned to `2^order`.
        unsafe { bindings::zone_device_folio_init(page.cast(), self.raw(), order) };
        // INVARIANT: The folio was just initialised, locked with one reference.
        Ok(NewFolio {
            // SAFETY: `page` is a page of this pagemap.
            folio: unsafe { DeviceFolio::from_raw(page.cast()) },
        })
    }

    /// The `struct page` of page `index`; `index < nr_pages()`.
    fn page_ptr(&self, index: usize) -> *mut bindings::page {
        debug_assert!(index < self.nr_pages());
        // SAFETY: `memremap_pages()` created a `struct page` for every pfn of the range.
        unsafe { bindings::pfn_to_page(self.pfn_range().start + index) }
    }

    /// Returns the pagemap of a device page, if it is one of a `Pagemap<T>`.
    ///
    /// # Safety
    ///
    /// `page` must point to a valid `struct page` on which the caller holds a
    /// reference (or which the caller otherwise keeps from being freed).
    pub unsafe fn of_page<'a>(page: *const bindings::page) -> Option<&'a Self> {
        // SAFETY: `page` is valid (safety requirement).
        if !unsafe { bindings::is_zone_device_page(page) } {
            return None;
        }
        // SAFETY: A ZONE_DEVICE page has a pagemap, alive while the page is.
        let pgmap = unsafe { bindings::page_pgmap(page) };
        // SAFETY: Reading the type and ops pointer of a live pagemap.
        let (ty, ops) = unsafe { ((*pgmap).type_, (*pgmap).ops) };
        if ty != T::Kind::TYPE || !core::ptr::eq(ops, T::Kind::ops()) {
            return None;
        }
        // SAFETY: Only `Header`s use the ops of a kind (type invariant), and
        // they outlive their pages.
        let h = unsafe { Header::of_pgmap(pgmap) };
        // SAFETY: As above.
        if unsafe { (*h).type_id } != TypeId::of::<T>() {
            return None;
        }
        // SAFETY: The header is the first field of a `Pagemap<T>` (`repr(C)`)
        // of this type (type invariant of `Header`).
        Some(unsafe { &*h.cast::<Self>() })
    }

    /// # Safety
    ///
    /// `h` is the header of a `Pagemap<T>` and `folio` a folio of it whose
    /// last reference is gone.
    unsafe fn folio_free_callback(h: *const Header, folio: *mut bindings::folio) {
        // SAFETY: `h` heads a live `Pagemap<T>` (safety requirement).
        let pm = unsafe { &*h.cast::<Self>() };
        // SAFETY: `folio` belongs to `pm`.
        let f = unsafe { DeviceFolio::<T>::from_raw(folio) };
        T::folio_free(pm, f);
        let (index, order) = (f.index(), f.order());
        // INVARIANT: The folio was allocated by `alloc_folio` (type
        // invariant of `Pagemap`) and is freed now. Only an IRQ-safe
        // spinlock: this may run in any context.
        pm.alloc.pages.lock().free(index, order);
    }
}

/// A folio of device pages of a [`Pagemap<T>`].
///
/// # Invariants
///
/// The folio belongs to a `Pagemap<T>`, which outlives every reference to it.
#[repr(transparent)]
pub struct DeviceFolio<T: PagemapOps>(Opaque<bindings::folio>, PhantomData<T>);

impl<T: PagemapOps> DeviceFolio<T> {
    /// # Safety
    ///
    /// `folio` must be a folio of a `Pagemap<T>` that stays allocated for `'a`.
    pub(crate) unsafe fn from_raw<'a>(folio: *mut bindings::folio) -> &'a Self {
        // SAFETY: `DeviceFolio` is a transparent wrapper of `folio`.
        unsafe { &*folio.cast() }
    }

    /// The raw `struct folio`.
    #[inline]
    pub fn as_raw(&self) -> *mut bindings::folio {
        self.0.get()
    }

    /// The pagemap of this folio.
    #[inline]
    pub fn pagemap(&self) -> &Pagemap<T> {
        // SAFETY: The folio is alive (type invariant), and so its pagemap.
        let pgmap = unsafe { bindings::page_pgmap(self.as_raw().cast()) };
        // SAFETY: By the type invariant, `pgmap` is the one of the header of
        // a `Pagemap<T>` that outlives `self`; the header is the first field
        // of that `repr(C)` struct. No check as in `Pagemap::of_page()`: this
        // is on the path of every alias lookup.
        unsafe { &*Header::of_pgmap(pgmap).cast::<Pagemap<T>>() }
    }

    /// The pfn of the first page.
    #[inline]
    pub fn pfn(&self) -> usize {
        // SAFETY: The folio is valid.
        unsafe { bindings::folio_pfn(self.as_raw()) as usize }
    }

    /// The index of the first page in its pagemap.
    #[inline]
    pub fn index(&self) -> usize {
        self.pfn() - self.pagemap().pfn_range().start
    }

    /// The folio order (0 for a single page, [`MAX_FOLIO_ORDER`] for a PMD).
    #[inline]
    pub fn order(&self) -> u32 {
        // SAFETY: The folio is valid.
        unsafe { bindings::folio_order(self.as_raw()) }
    }

    /// The number of pages.
    #[inline]
    pub fn nr_pages(&self) -> usize {
        1 << self.order()
    }
}

/// A freshly allocated, locked device folio with one reference.
///
/// It becomes a process's memory when handed to a migration as destination;
/// dropped unused, it is unlocked and freed.
///
/// # Invariants
///
/// `folio` is locked and this object owns one reference to it.
pub struct NewFolio<'a, T: PagemapOps> {
    folio: &'a DeviceFolio<T>,
}

impl<'a, T: PagemapOps> NewFolio<'a, T> {
    /// Gives up ownership of the lock and the reference, e.g. to a
    /// migration that takes them over; returns the folio. The caller must
    /// eventually unlock and put it, or the folio leaks.
    pub fn into_raw(self) -> *mut bindings::folio {
        let f = self.folio.as_raw();
        core::mem::forget(self);
        f
    }
}

/// Calls `f` with page `i` of `folio`, a device-coherent folio, mapped
/// through the kernel's linear map.
fn with_coherent_page<R>(
    folio: *mut bindings::folio,
    i: usize,
    f: impl FnOnce(*mut u8) -> R,
) -> Result<R> {
    // SAFETY: `folio` is a valid folio (caller).
    if i >= 1usize << unsafe { bindings::folio_order(folio) } {
        return Err(EINVAL);
    }
    // SAFETY: `i` is in range. Device-coherent memory is in the linear map
    // (`memremap_pages()` adds it with `arch_add_memory()`), which
    // `kmap_local_page()` returns.
    let addr = unsafe {
        bindings::kmap_local_page(bindings::pfn_to_page(
            bindings::folio_pfn(folio) + i as c_ulong,
        ))
    };
    let r = f(addr.cast());
    // SAFETY: `addr` was returned by `kmap_local_page()` just above.
    unsafe { bindings::kunmap_local(addr) };
    Ok(r)
}

impl<T: PagemapOps<Kind = Coherent>> DeviceFolio<T> {
    /// Copies the start of page `i` of the folio into `dst` (at most a
    /// page), read by the CPU through the kernel's linear map; `EINVAL` if
    /// `i` is out of range or `dst` larger than a page.
    ///
    /// The folio may be mapped by processes that write it meanwhile, as
    /// with a device's read of system memory: the copy is the C `memcpy()`,
    /// with no Rust reference to the page. While the folio is collected by
    /// a migration (locked and unmapped), its content is stable.
    pub fn read_page(&self, i: usize, dst: &mut [u8]) -> Result {
        if dst.len() > crate::page::PAGE_SIZE {
            return Err(EINVAL);
        }
        with_coherent_page(self.as_raw(), i, |addr| {
            // SAFETY: `addr` maps the `PAGE_SIZE` bytes of a page of the
            // folio, which stays allocated while `self` is borrowed; `dst`
            // is valid for `dst.len() <= PAGE_SIZE` bytes and is not the
            // page.
            unsafe { bindings::memcpy(dst.as_mut_ptr().cast(), addr.cast(), dst.len()) };
        })
    }
}

impl<T: PagemapOps<Kind = Coherent>> NewFolio<'_, T> {
    /// Calls `f` to fill page `i` of the new folio through the kernel's
    /// linear map, before it is handed to a migration; `EINVAL` if out of
    /// range.
    pub fn with_page_mut<R>(&mut self, i: usize, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        with_coherent_page(self.folio.as_raw(), i, |addr| {
            // SAFETY: `addr` maps the `PAGE_SIZE` bytes of a page of the
            // folio, which this object owns, locked and not yet mapped by
            // anyone (type invariant): nothing else accesses it.
            f(unsafe { core::slice::from_raw_parts_mut(addr, crate::page::PAGE_SIZE) })
        })
    }
}

impl<T: PagemapOps> core::ops::Deref for NewFolio<'_, T> {
    type Target = DeviceFolio<T>;

    fn deref(&self) -> &DeviceFolio<T> {
        self.folio
    }
}

impl<T: PagemapOps> Drop for NewFolio<'_, T> {
    fn drop(&mut self) {
        // SAFETY: We own the lock and one reference (type invariant); putting
        // the last one frees the folio through `folio_free`.
        unsafe {
            bindings::folio_unlock(self.folio.as_raw());
            bindings::folio_put(self.folio.as_raw());
        }
    }
}

/// A CPU fault on a device-private page, in [`DevicePrivateOps::migrate_to_ram`].
///
/// # Invariants
///
/// `vmf` is a valid `struct vm_fault` for the lifetime `'a`, the mmap lock
/// (or the VMA lock) is held, and `vmf->page` is a referenced page of a
/// `Pagemap<T>`.
pub struct DeviceFault<'a, T: DevicePrivateOps> {
    vmf: *mut bindings::vm_fault,
    _p: PhantomData<(&'a bindings::vm_fault, T)>,
}

impl<T: DevicePrivateOps> DeviceFault<'_, T> {
    /// The raw `struct vm_fault`.
    pub fn as_raw(&self) -> *mut bindings::vm_fault {
        self.vmf
    }

    /// The faulting address, page aligned.
    pub fn address(&self) -> usize {
        // SAFETY: `vmf` is valid (type invariant).
        unsafe { (*self.vmf).__bindgen_anon_1.address }
    }

    /// The device-private folio that was touched.
    pub fn folio(&self) -> &DeviceFolio<T> {
        // SAFETY: `vmf->page` is a referenced page of a `Pagemap<T>` (type invariant).
        unsafe { DeviceFolio::from_raw(bindings::page_folio((*self.vmf).page)) }
    }

    /// The VMA of the fault.
    pub fn vma(&self) -> &crate::mm::virt::VmaRef {
        // SAFETY: The VMA is valid and its mm's lock is held for `'a` (type invariant).
        unsafe { crate::mm::virt::VmaRef::from_raw((*self.vmf).__bindgen_anon_1.vma) }
    }
}

#[kunit_tests(rust_kernel_mm_pagemap)]
mod tests {
    use super::allocator::{
        Pages,
        CHUNK_PAGES, //
    };
    use super::*;
    use crate::bitmap::BitmapVec;
    use crate::sync::atomic::{
        Atomic,
        Relaxed, //
    };

    struct Counting {
        freed: Atomic<usize>,
    }

    impl PagemapOps for Counting {
        type Kind = Private;

        fn folio_free(_pm: &Pagemap<Self>, folio: &DeviceFolio<Self>) {
            _pm.data().freed.fetch_add(folio.nr_pages(), Relaxed);
        }
    }

    impl DevicePrivateOps for Counting {
        fn migrate_to_ram(
            _pm: &Pagemap<Self>,
            _fault: &DeviceFault<'_, Self>,
        ) -> core::result::Result<(), FaultError> {
            Err(FaultError::SigBus)
        }
    }

    const PMD: usize = crate::page::PAGE_SIZE << MAX_FOLIO_ORDER;

    /// Aliases at `pfn + index`, in runs of `run` pages.
    fn new_pm(size: usize) -> Result<Pin<KBox<Pagemap<Counting>>>> {
        KBox::pin_init(
            Pagemap::new(
                size,
                None,
                Counting {
                    freed: Atomic::new(0),
                },
            ),
            GFP_KERNEL,
        )
    }

    #[test]
    fn rejects_bad_sizes() {
        assert_eq!(new_pm(0).err(), Some(EINVAL));
        assert_eq!(new_pm(PMD + crate::page::PAGE_SIZE).err(), Some(EINVAL));
    }

    #[test]
    fn pages_belong_to_their_pagemap() -> Result {
        let a = new_pm(PMD)?;
        let b = new_pm(PMD)?;
        assert_ne!(a.owner(), b.owner());
        assert_eq!(a.nr_pages(), PMD / crate::page::PAGE_SIZE);
        assert!(
            a.phys_range().start >= b.phys_range().end
                || b.phys_range().start >= a.phys_range().end
        );
        let f = a.alloc_folio(0)?;
        assert!(a.pfn_range().contains(&f.pfn()));
        assert!(core::ptr::eq(f.pagemap(), &*a));
        // SAFETY: `f` holds a reference.
        assert!(unsafe { Pagemap::<Counting>::of_page(f.as_raw().cast()) }.is_some());
        Ok(())
    }

    #[test]
    fn allocates_until_full_and_frees_through_folio_free() -> Result {
        let pm = new_pm(2 * PMD)?;
        let n = pm.nr_pages();
        let mut seen = BitmapVec::new(n, GFP_KERNEL)?;
        let mut v = KVec::new();
        for _ in 0..n {
            let f = pm.alloc_folio(0)?;
            // Every page once.
            assert!(f.index() < n && seen.next_bit(f.index()) != Some(f.index()));
            seen.set_bit(f.index());
            v.push(f, GFP_KERNEL)?;
        }
        assert_eq!(pm.nr_used(), n);
        assert_eq!(pm.alloc_folio(0).err(), Some(ENOMEM));
        let last = v[n - 1].index();
        v.truncate(n - 1);
        assert_eq!(pm.data().freed.load(Relaxed), 1);
        assert_eq!(pm.alloc_folio(0)?.index(), last);
        drop(v);
        assert_eq!(pm.nr_used(), 0);
        assert_eq!(pm.data().freed.load(Relaxed), n + 1);
        Ok(())
    }

    #[test]
    fn next_used_finds_folios_not_reservations() -> Result {
        let pm = new_pm(4 * PMD)?;
        assert_eq!(pm.next_used(0), None);
        let bo = pm.reserve(CHUNK_PAGES)?;
        assert_eq!(pm.next_used(0), None);
        let a = pm.alloc_folio(0)?;
        let b = pm.alloc_folio(0)?;
        assert_eq!(pm.next_used(0), Some(a.index().min(b.index())));
        let last = a.index().max(b.index());
        assert_eq!(pm.next_used(a.index().min(b.index()) + 1), Some(last));
        // The rest of the chunk is free, and no other chunk is in use.
        assert_eq!(pm.next_used(last + 1), None);
        // That walk looked at a bit for each chunk from the one of `last`
        // on, and at the page bits of that chunk only after `last`.
        let mut walk = UsedWalk::default();
        assert_eq!(pm.next_used_walk(last + 1, &mut walk), None);
        let chunk = last / CHUNK_PAGES;
        assert_eq!(
            walk,
            UsedWalk {
                chunk_bits: 4 - chunk,
                page_bits: (chunk + 1) * CHUNK_PAGES - (last + 1),
            }
        );
        drop(a);
        assert_eq!(pm.next_used(0), Some(b.index()));
        if thp_migration_supported() {
            let pmd = pm.alloc_folio(MAX_FOLIO_ORDER)?;
            // Every page of a PMD folio is in use.
            assert_eq!(pm.next_used(pmd.index() + 7), Some(pmd.index() + 7));
            // Past the single page's chunk or the PMD folio, the other.
            if pmd.index() > b.index() {
                assert_eq!(pm.next_used(b.index() + 1), Some(pmd.index()));
            } else {
                assert_eq!(pm.next_used(pmd.index() + CHUNK_PAGES), Some(b.index()));
            }
        }
        assert_eq!(pm.next_used(pm.nr_pages()), None);
        drop(b);
        assert_eq!(pm.next_used(0), None);
        drop(bo);
        Ok(())
    }

    #[test]
    fn split_pmd_folio_comes_back_page_by_page() -> Result {
        // A PMD folio split in place (a device THP split while mapped) is
        // freed page by page: its chunk is then partly used, and single
        // pages come from the pages already freed, never from those still
        // in the folio's remains.
        let mut p = Pages::new(CHUNK_PAGES)?;
        // The one chunk, idle (its buddy block does not matter here).
        p.set_idle(0);
        assert_eq!(p.take(MAX_FOLIO_ORDER), Some(0));
        p.free(3, 0);
        p.free(1, 0);
        let mut walk = UsedWalk::default();
        assert_eq!(p.next_used(1, &mut walk), Some(2));
        // One chunk bit, the page bits 1 and 2.
        assert_eq!(
            walk,
            UsedWalk {
                chunk_bits: 1,
                page_bits: 2
            }
        );
        assert_eq!(p.next_used(3, &mut walk), Some(4));
        assert_eq!(p.allocated, CHUNK_PAGES - 2);
        assert_eq!(p.take(0), Some(1));
        assert_eq!(p.take(0), Some(3));
        assert_eq!(p.take(0), None);
        for i in 0..CHUNK_PAGES {
            p.free(i, 0);
        }
        assert_eq!(p.allocated, 0);
        let mut walk = UsedWalk::default();
        assert_eq!(p.next_used(0, &mut walk), None);
        // The chunk is not in use: its page bits are not looked at.
        assert_eq!(
            walk,
            UsedWalk {
                chunk_bits: 1,
                page_bits: 0
            }
        );
        assert_eq!(p.idle.next_bit(0), Some(0));
        assert_eq!(p.take(MAX_FOLIO_ORDER), Some(0));
        p.free(0, MAX_FOLIO_ORDER);
        assert_eq!(p.take(0), Some(0));
        Ok(())
    }

    #[test]
    fn pmd_folios_skip_partly_used_chunks() -> Result {
        let pm = new_pm(2 * PMD)?;
        let n = pm.nr_pages();
        let mut v = KVec::new();
        for _ in 0..n {
            v.push(Some(pm.alloc_folio(0)?), GFP_KERNEL)?;
        }
        // Free pages 5 and 7 and the whole second chunk.
        for f in &mut v {
            let i = f.as_ref().map_or(0, |f| f.index());
            if i == 5 || i == 7 || i >= CHUNK_PAGES {
                *f = None;
            }
        }
        assert_eq!(pm.nr_used(), CHUNK_PAGES - 2);
        // A single page takes the first hole of the partly used chunk; a
        // PMD folio needs a whole free chunk.
        assert_eq!(pm.alloc_folio(0)?.index(), 5);
        if thp_migration_supported() {
            assert_eq!(pm.alloc_folio(MAX_FOLIO_ORDER)?.index(), CHUNK_PAGES);
        }
        v.clear();
        assert_eq!(pm.nr_used(), 0);
        Ok(())
    }

    #[test]
    fn searches_start_at_the_lowest_chunk_held() -> Result {
        // Chunks held at the top of a large pagemap, as the buddy
        // allocator hands them out, are found from where the lowest is,
        // and a lower one held later is found first.
        let mut p = Pages::new(64 * CHUNK_PAGES)?;
        assert_eq!(p.take(0), None);
        assert_eq!((p.partial_from, p.idle_from), (64, 64));
        p.set_idle(63);
        p.set_idle(40);
        assert_eq!(p.idle_from, 40);
        assert_eq!(p.take(0), Some(40 * CHUNK_PAGES));
        assert_eq!(p.partial_from, 40);
        assert_eq!(p.take(MAX_FOLIO_ORDER), Some(63 * CHUNK_PAGES));
        assert_eq!(p.take(MAX_FOLIO_ORDER), None);
        assert_eq!(p.idle_from, 64);
        p.free(40 * CHUNK_PAGES, 0);
        assert_eq!(p.idle_from, 40);
        assert_eq!(p.take(0), Some(40 * CHUNK_PAGES));
        p.set_idle(5);
        assert_eq!(p.take(MAX_FOLIO_ORDER), Some(5 * CHUNK_PAGES));
        assert_eq!(p.take(0), Some(40 * CHUNK_PAGES + 1));
        Ok(())
    }

    #[test]
    fn the_lowest_free_page_goes_first() -> Result {
        let pm = new_pm(2 * PMD)?;
        let mut v = KVec::new();
        let base = pm.alloc_folio(0)?.index();
        assert_eq!(base % CHUNK_PAGES, 0);
        for i in 0..8 {
            let f = pm.alloc_folio(0)?;
            assert_eq!(f.index(), base + i);
            v.push(Some(f), GFP_KERNEL)?;
        }
        // Freed pages are handed out again lowest first, before any page
        // that was never used.
        v[6] = None;
        v[2] = None;
        assert_eq!(pm.alloc_folio(0)?.index(), base + 2);
        let again = pm.alloc_folio(0)?;
        assert_eq!(again.index(), base + 2);
        assert_eq!(pm.alloc_folio(0)?.index(), base + 6);
        // A PMD folio takes the other chunk, and single pages then go on
        // in the first.
        if thp_migration_supported() {
            let big = pm.alloc_folio(MAX_FOLIO_ORDER)?;
            assert_eq!(big.index(), CHUNK_PAGES - base);
            assert_eq!(pm.alloc_folio(0)?.index(), base + 6);
            drop(big);
            let big = pm.alloc_folio(MAX_FOLIO_ORDER)?;
            assert_eq!(big.index(), CHUNK_PAGES - base);
        }
        drop((again, v));
        assert_eq!(pm.nr_used(), 0);
        assert_eq!(pm.alloc_folio(0)?.index() % CHUNK_PAGES, 0);
        Ok(())
    }

    #[test]
    fn reserved_pages_are_not_handed_out() -> Result {
        let pm = new_pm(2 * PMD)?;
        let n = pm.nr_pages();
        let a = pm.alloc_folio(0)?;
        let b = pm.alloc_folio(0)?;
        let chunk = a.index() / CHUNK_PAGES;
        drop(a);
        // The other chunk: the first one is held for single pages.
        let r = pm.reserve(5)?;
        assert_eq!(r.nr_pages(), 5);
        assert_ne!(r.index() / CHUNK_PAGES, chunk);
        assert_eq!((r.index() + 4) / CHUNK_PAGES, r.index() / CHUNK_PAGES);
        assert_eq!((pm.nr_used(), pm.nr_reserved()), (1, 5));
        let z = pm.alloc_folio(0)?;
        assert_eq!(z.index(), chunk * CHUNK_PAGES);
        let c = pm.alloc_folio(0)?;
        assert_eq!(c.index(), chunk * CHUNK_PAGES + 2);
        assert_eq!(pm.reserve(0).err(), Some(EINVAL));
        assert_eq!(pm.reserve(n).err(), Some(ENOMEM));
        assert_eq!(pm.reserve(n + 1).err(), Some(ENOMEM));
        if thp_migration_supported() {
            // No chunk is free: one has single pages, one the reservation.
            assert_eq!(pm.alloc_folio(MAX_FOLIO_ORDER).err(), Some(ENOMEM));
        }
        let index = r.index();
        drop(r);
        assert_eq!(pm.nr_reserved(), 0);
        if thp_migration_supported() {
            let big = pm.alloc_folio(MAX_FOLIO_ORDER)?;
            assert_eq!(big.index(), index / CHUNK_PAGES * CHUNK_PAGES);
        }
        // Freeing folios does not release reserved pages, and the whole
        // free space can be reserved again: the chunks held for folios go
        // back to the buddy allocator.
        drop((b, c, z));
        let all = pm.reserve(n)?;
        assert_eq!((all.index(), pm.nr_used(), pm.nr_reserved()), (0, 0, n));
        // Nothing is left, and asking again is an error.
        assert_eq!(pm.reserve(1).err(), Some(ENOMEM));
        assert_eq!(pm.alloc_folio(0).err(), Some(ENOMEM));
        drop(all);
        // Runs of any length, not only powers of two.
        let odd = pm.reserve(CHUNK_PAGES + 3)?;
        assert_eq!(odd.nr_pages(), CHUNK_PAGES + 3);
        let one = pm.reserve(1)?;
        assert!(one.index() >= odd.index() + CHUNK_PAGES + 3 || one.index() < odd.index());
        drop((odd, one));
        assert_eq!(pm.nr_reserved(), 0);
        // A reservation may outlive its pagemap (a buffer object exported
        // before the device went away): its pages go back to the buddy
        // allocator, which lives until then.
        let other = new_pm(PMD)?;
        let r = other.reserve(1)?;
        assert_eq!(other.nr_reserved(), 1);
        drop(other);
        assert_eq!(r.nr_pages(), 1);
        drop(r);
        Ok(())
    }

    #[test]
    fn aliases_are_revoked_and_restored() -> Result {
        let pm = new_pm(PMD)?;
        assert!(!pm.aliases_revoked());
        pm.revoke_aliases();
        assert!(pm.aliases_revoked());
        pm.restore_aliases();
        assert!(!pm.aliases_revoked());
        // A pagemap without an alias reports none.
        assert_eq!(pm.aliases_reported(), 0);
        Ok(())
    }

    #[test]
    fn pmd_folios_are_aligned() -> Result {
        let pm = new_pm(2 * PMD)?;
        if !thp_migration_supported() {
            assert_eq!(pm.alloc_folio(MAX_FOLIO_ORDER).err(), Some(EINVAL));
            return Ok(());
        }
        let small = pm.alloc_folio(0)?;
        let big = pm.alloc_folio(MAX_FOLIO_ORDER)?;
        assert_eq!(big.index() % CHUNK_PAGES, 0);
        assert_ne!(big.index() / CHUNK_PAGES, small.index() / CHUNK_PAGES);
        assert_eq!(big.order(), MAX_FOLIO_ORDER);
        assert_eq!(pm.alloc_folio(MAX_FOLIO_ORDER).err(), Some(ENOMEM));
        assert_eq!(pm.alloc_folio(MAX_FOLIO_ORDER + 1).err(), Some(EINVAL));
        assert_eq!(pm.alloc_folio(1).err(), Some(EINVAL));
        drop(big);
        assert_eq!(pm.data().freed.load(Relaxed), 1 << MAX_FOLIO_ORDER);
        drop(small);
        assert_eq!(pm.nr_used(), 0);
        Ok(())
    }
}
