// SPDX-License-Identifier: GPL-2.0

//! DMA-buf export of PCI BAR memory to peer-to-peer importers.
//!
//! A device whose memory BAR holds buffers (a GPU's VRAM) hands them to
//! other devices as dma-bufs: an importer (an RDMA NIC registering a
//! dma-buf MR, another accelerator) attaches to the buffer and maps it for
//! its own DMA, which then goes straight to the BAR, peer to peer.
//!
//! [`BarExporter`] does the dma-buf side for ranges of one BAR, through the
//! BAR's P2P provider (`pci::Device::p2pdma_provider`), with no struct
//! pages for the BAR:
//!
//! - it accepts only importers that can take memory without `struct page`
//!   (`allow_peer2peer`) and whose mappings can be revoked
//!   (`invalidate_mappings`); others are refused at attach time with
//!   `EOPNOTSUPP` and a log line (each cause once per exporter, since any
//!   holder of a buffer's file descriptor can ask again and again);
//! - it maps an attachment with `dma_buf_phys_vec_to_sgt()`, for the
//!   importer's device (PCI bus addresses, or an IOMMU mapping through the
//!   host bridge), only when the PCI topology lets that device reach the
//!   BAR: otherwise the map fails with `EREMOTEIO` ("not reachable peer to
//!   peer") and a log line (once), never bounced through system memory. The
//!   check is made when mapping, as VFIO's exporter does, so that an
//!   importer that only needs a kernel mapping may attach;
//! - `vmap()` maps the buffer into the kernel (`ioremap()`, I/O memory in
//!   the returned `iosys_map`), for importers that access it with the CPU,
//!   such as a software RDMA device;
//! - `mmap()` of the dma-buf maps the buffer's BAR pages into user space, a
//!   page at a time as they are touched (`VM_PFNMAP`), for CPU access to
//!   device memory. Only shared mappings: a private one fails with
//!   `EINVAL`, since the pages cannot be copied on write. It asks for
//!   write-combining (`pgprot_writecombine()`); with x86 PAT the pages
//!   keep the memory type an existing kernel mapping of the BAR reserved
//!   (uncached for a driver that maps it with `ioremap()`);
//! - when the driver unbinds, dropping the exporter revokes every buffer:
//!   user mappings are zapped, importers are told
//!   (`dma_buf_invalidate_mappings()`), the exporter waits for their fences
//!   and for every DMA and kernel mapping to be undone, and further
//!   attaches, maps and mmaps fail with `ENODEV`, CPU accesses through an
//!   existing user mapping with `SIGBUS`. An importer learns of the
//!   revocation from `invalidate_mappings`, where it drops its mappings
//!   (a `vmap()` after that fails, and the dma-buf core warns). Buffers
//!   outlive the binding (user space may hold their file descriptors),
//!   but nothing reaches the BAR through them any more.
//!
//! The driver's data for a buffer (what backs it, such as a reservation of
//! device memory) is dropped when the last reference to the dma-buf goes.
//! A driver module that exports imports the `DMA_BUF` symbol namespace
//! (`imports_ns: ["DMA_BUF"]` in `module!`), as C exporters do.
//!
//! C headers: [`include/linux/dma-buf.h`](srctree/include/linux/dma-buf.h),
//! [`include/linux/dma-buf-mapping.h`](srctree/include/linux/dma-buf-mapping.h)

use crate::ffi::c_int;
use crate::{
    bindings,
    device,
    error::{
        from_err_ptr,
        Result, //
    },
    fs::{
        file,
        File, //
    },
    list::{
        impl_list_arc_safe,
        impl_list_item,
        List,
        ListArc,
        ListLinks, //
    },
    new_condvar,
    new_mutex,
    pci,
    prelude::*,
    str::CStr,
    sync::{
        aref::ARef,
        atomic::{
            Acquire,
            Atomic,
            Relaxed,
            Release, //
        },
        Arc,
        CondVar,
        Mutex, //
    },
    ThisModule, //
};
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

/// Exports ranges of one PCI memory BAR as dma-bufs, for as long as the
/// device is bound; dropping it revokes every buffer it exported.
///
/// # Examples
///
/// ```
/// # use kernel::{device::Bound, pci::{self, BarExporter}, prelude::*};
/// fn export_first_page(pdev: &pci::Device<Bound>, module: &'static ThisModule) -> Result {
///     let exporter = BarExporter::new(pdev, 2, c"example", module)?;
///     // What backs the buffer: dropped with the dma-buf's last reference.
///     let buf = exporter.handle().export(0, 4096, ())?;
///     assert_eq!(buf.size(), 4096);
///     Ok(())
/// }
/// ```
pub struct BarExporter<'a> {
    handle: ExportHandle,
    _pdev: PhantomData<&'a pci::Device<device::Bound>>,
}

/// Exports buffers of a [`BarExporter`]; it can be kept where the bound
/// device's lifetime cannot (for example by an open file), and fails with
/// `ENODEV` once the exporter is gone.
#[derive(Clone)]
pub struct ExportHandle(Arc<Shared>);

/// What the exporter and its buffers share.
///
/// # Invariants
///
/// `provider` and `dev` are the P2PDMA provider of BAR `bar` of a bound
/// PCI device and that device: valid while `state.dead` is false, and
/// never used after it became true (it does not become false again).
/// `state.bufs` holds the [`Buffer`] of every dma-buf exported from here
/// whose `release` has not run, and no other.
#[pin_data]
struct Shared {
    provider: *mut bindings::p2pdma_provider,
    dev: *mut bindings::device,
    bar: u32,
    bar_start: u64,
    bar_len: u64,
    name: &'static CStr,
    module: &'static ThisModule,
    /// Whether each [`Refusal`] was logged: once per exporter.
    logged: [Atomic<bool>; Refusal::COUNT],
    #[pin]
    state: Mutex<State>,
}

/// Why an importer was refused. Any process holding a buffer's file
/// descriptor can ask again and again: each cause is logged once per
/// exporter, later refusals only at debug level (the errno says it all).
#[derive(Clone, Copy)]
enum Refusal {
    NotPeerToPeer,
    NotRevocable,
    Unreachable,
}

impl Refusal {
    const COUNT: usize = 3;

    fn why(self) -> &'static str {
        match self {
            Refusal::NotPeerToPeer => "importer does not take peer-to-peer memory",
            Refusal::NotRevocable => "importer cannot be revoked",
            Refusal::Unreachable => "not reachable peer to peer",
        }
    }
}

impl Shared {
    /// Logs that `importer` was refused for `why`: a warning the first
    /// time, debug output after that.
    ///
    /// # Safety
    ///
    /// The exporter must not be dead (`dev` is used).
    unsafe fn refused(&self, importer: &device::Device, why: Refusal) {
        // SAFETY: `dev` is valid while not dead (type invariant and
        // requirement).
        let exporter: &device::Device = unsafe { device::Device::from_raw(self.dev) };
        if !self.logged[why as usize].xchg(true, Relaxed) {
            dev_warn!(
                importer,
                "{}: dma-buf of BAR{} of {}: {}\n",
                self.name,
                self.bar,
                exporter.name(),
                why.why()
            );
        } else {
            dev_dbg!(
                importer,
                "{}: dma-buf of BAR{} of {}: {}\n",
                self.name,
                self.bar,
                exporter.name(),
                why.why()
            );
        }
    }
}

// SAFETY: The raw pointers are only used under the rules of the type
// invariant, from any thread.
unsafe impl Send for Shared {}
// SAFETY: As above; mutable state is behind `state`.
unsafe impl Sync for Shared {}

struct State {
    dead: bool,
    /// Linked through the buffers themselves: exporting allocates nothing
    /// but the buffer, charged to the caller's memory cgroup, and
    /// `release` unlinks its buffer in O(1), however many there are.
    bufs: List<Buffer>,
}

impl<'a> BarExporter<'a> {
    /// Sets up exports from memory BAR `bar` of `pdev` (else `EINVAL`),
    /// through its P2P provider. `name` names
    /// the exporter in `/sys/kernel/debug/dma_buf/bufinfo`; `module` is the
    /// driver's, kept loaded while any buffer lives.
    pub fn new(
        pdev: &'a pci::Device<device::Bound>,
        bar: u32,
        name: &'static CStr,
        module: &'static ThisModule,
    ) -> Result<Self> {
        let bar_start = pdev.resource_start(bar)?;
        let bar_len = pdev.resource_len(bar)?;
        // Device-managed, valid while `pdev` is bound, which it is for `'a`.
        let provider = pdev.p2pdma_provider(bar)?.as_raw().as_ptr();
        let dev = AsRef::<device::Device<device::Bound>>::as_ref(pdev).as_raw();
        // INVARIANT: `provider` belongs to `bar` of `pdev`, which stays bound
        // for `'a`; the exporter's drop sets `dead` before that ends.
        let shared = Arc::pin_init(
            pin_init!(Shared {
                provider,
                dev,
                bar,
                bar_start,
                bar_len,
                name,
                module,
                logged: [const { Atomic::new(false) }; Refusal::COUNT],
                state <- new_mutex!(State {
                    dead: false,
                    bufs: List::new(),
                }),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self {
            handle: ExportHandle(shared),
            _pdev: PhantomData,
        })
    }

    /// A handle that exports buffers of this exporter.
    pub fn handle(&self) -> ExportHandle {
        self.handle.clone()
    }
}

impl Drop for BarExporter<'_> {
    fn drop(&mut self) {
        let sh = &self.handle.0;
        let mut state = sh.state.lock();
        // INVARIANT: From now on nothing uses `provider` or `dev`: attach
        // checks `dead` under this lock, and map checks its buffer's
        // `revoked`, set below under the reservation lock that map holds.
        state.dead = true;
        for buf in state.bufs.iter() {
            let d = buf.dmabuf.load(Relaxed);
            // SAFETY: `d` is the dma-buf of a buffer in `bufs`, whose
            // `release` has not run (type invariant of `Shared`; `release`
            // waits for this lock to unlink it), so its memory is valid. A
            // file whose last reference is gone has no importer left to
            // revoke.
            let file = unsafe { bindings::get_file_active(&raw mut (*d).file) };
            if file.is_null() {
                continue;
            }
            // SAFETY: `d` is alive: we hold a reference to its file.
            unsafe { Buffer::revoke(d) };
            // SAFETY: Drops the reference taken above; the last `fput` of a
            // dma-buf file runs `release` later, not under this lock.
            unsafe { bindings::fput(file) };
        }
    }
}

impl ExportHandle {
    /// Exports `size` bytes of the BAR from `offset` as a dma-buf, with
    /// `data` as what backs it (dropped with the dma-buf's last reference).
    ///
    /// `offset` and `size` must be page aligned, `size` non-zero and the
    /// range inside the BAR: otherwise `EINVAL`. `ENODEV` once the
    /// exporter was dropped (the device is unbound).
    pub fn export<T: Send + Sync + 'static>(
        &self,
        offset: u64,
        size: usize,
        data: T,
    ) -> Result<DmaBuf> {
        let sh = &self.0;
        let page = crate::page::PAGE_SIZE as u64;
        let len = u64::try_from(size)?;
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if size == 0 || offset % page != 0 || len % page != 0 || end > sh.bar_len {
            return Err(EINVAL);
        }
        // Both are charged to the caller's memory cgroup: any user who can
        // export may make as many buffers as its file descriptors allow.
        let data: KBox<dyn Send + Sync> = KBox::new(data, GFP_KERNEL_ACCOUNT)?;
        let buf = ListArc::pin_init(
            try_pin_init!(Buffer {
                shared: sh.clone(),
                dmabuf: Atomic::new(core::ptr::null_mut()),
                phys: bindings::phys_vec {
                    paddr: sh.bar_start + offset,
                    len: size,
                },
                size,
                revoked: Atomic::new(false),
                maps <- new_mutex!(0),
                unmapped <- new_condvar!(),
                _data: data,
                links <- ListLinks::new(),
            }),
            GFP_KERNEL_ACCOUNT,
        )?;
        let mut state = sh.state.lock();
        if state.dead {
            return Err(ENODEV);
        }
        // The dma-buf's reference, which `release` gives back (or the
        // failure below). The list takes `buf`, the only `ListArc`.
        let priv_ = Arc::into_raw(buf.clone_arc());
        let info = bindings::dma_buf_export_info {
            exp_name: sh.name.as_char_ptr(),
            owner: sh.module.as_ptr(),
            ops: &OPS,
            size,
            flags: file::flags::O_RDWR as i32,
            resv: core::ptr::null_mut(),
            priv_: priv_.cast_mut().cast(),
        };
        // SAFETY: `info` is complete; `OPS` has the mandatory callbacks.
        let d = match from_err_ptr(unsafe { bindings::dma_buf_export(&info) }) {
            Ok(d) => d,
            Err(e) => {
                drop(state);
                // SAFETY: The export failed: `priv_` is the reference
                // `into_raw` made above, which nothing else took.
                drop(unsafe { Arc::from_raw(priv_) });
                return Err(e);
            }
        };
        buf.dmabuf.store(d, Relaxed);
        // INVARIANT: Until `release` removes it again.
        state.bufs.push_back(buf);
        // INVARIANT: `dma_buf_export()` returned a dma-buf with one
        // reference (on its file), ours now.
        Ok(DmaBuf {
            // SAFETY: `from_err_ptr` rejected error pointers; `d` is not NULL.
            dmabuf: unsafe { NonNull::new_unchecked(d) },
        })
    }
}

/// An exported dma-buf, with one reference to it.
///
/// # Invariants
///
/// `dmabuf` is a dma-buf exported by [`ExportHandle::export`] on which
/// this object owns one reference.
pub struct DmaBuf {
    dmabuf: NonNull<bindings::dma_buf>,
}

// SAFETY: dma-buf references may be dropped on any thread.
unsafe impl Send for DmaBuf {}
// SAFETY: `DmaBuf` only reads immutable fields.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// The size in bytes.
    pub fn size(&self) -> usize {
        // SAFETY: The dma-buf is alive (type invariant); `size` is immutable.
        unsafe { (*self.dmabuf.as_ptr()).size }
    }

    /// The dma-buf's file, taking over this object's reference: install it
    /// in a file descriptor (`FileDescriptorReservation::fd_install`) to
    /// give the buffer to user space.
    pub fn into_file(self) -> ARef<File> {
        // SAFETY: A dma-buf's reference is a reference on its file.
        let file = unsafe { (*self.dmabuf.as_ptr()).file };
        core::mem::forget(self);
        // SAFETY: We own one reference to `file` (type invariant), which the
        // `ARef` takes over; `File` is a transparent `struct file`.
        unsafe { ARef::from_raw(NonNull::new_unchecked(file.cast::<File>())) }
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: We own one reference (type invariant).
        unsafe { bindings::dma_buf_put(self.dmabuf.as_ptr()) };
    }
}

/// The exporter's state of one dma-buf: its `priv`, a reference made by
/// `Arc::into_raw()`.
///
/// # Invariants
///
/// `dmabuf` is the dma-buf whose `priv` this is, from before the buffer
/// is linked into its exporter's `bufs` (under `state`'s lock), and is
/// only read under that lock.
///
/// `revoked` only goes from false to true, under the dma-buf's reservation
/// lock. `maps` counts the mappings made by `map` and not yet unmapped,
/// plus one while the buffer has a kernel mapping (`vmap`).
#[pin_data]
struct Buffer {
    shared: Arc<Shared>,
    dmabuf: Atomic<*mut bindings::dma_buf>,
    phys: bindings::phys_vec,
    size: usize,
    revoked: Atomic<bool>,
    #[pin]
    maps: Mutex<usize>,
    #[pin]
    unmapped: CondVar,
    /// The exporter's data, dropped with the buffer.
    _data: KBox<dyn Send + Sync>,
    /// In its exporter's `bufs`.
    #[pin]
    links: ListLinks,
}

impl_list_arc_safe! {
    impl ListArcSafe<0> for Buffer { untracked; }
}

impl_list_item! {
    impl ListItem<0> for Buffer { using ListLinks { self.links }; }
}

impl Buffer {
    /// # Safety
    ///
    /// `d` must be a live dma-buf exported by [`ExportHandle::export`].
    unsafe fn of<'b>(d: *const bindings::dma_buf) -> &'b Buffer {
        // SAFETY: Its `priv` is a `Buffer` until `release` (requirement).
        unsafe { &*(*d).priv_.cast::<Buffer>() }
    }

    /// Revokes `d`: no new mapping, importers told to drop theirs; returns
    /// once their fences signalled and every mapping is unmapped.
    ///
    /// # Safety
    ///
    /// `d` must be a live dma-buf exported by [`ExportHandle::export`].
    unsafe fn revoke(d: *mut bindings::dma_buf) {
        // SAFETY: `d` is alive (requirement).
        let (buf, resv) = unsafe { (Self::of(d), (*d).resv) };
        // SAFETY: `resv` is the dma-buf's reservation object; no acquire
        // context.
        unsafe { bindings::dma_resv_lock(resv, core::ptr::null_mut()) };
        // INVARIANT: Set under the reservation lock.
        buf.revoked.store(true, Release);
        // SAFETY: The reservation lock is held, as required. Faults take it
        // and see `revoked`: once the user mappings of the dma-buf's file
        // are zapped, no CPU access reaches the BAR again.
        unsafe {
            bindings::unmap_mapping_range((*(*d).file).f_mapping, 0, 0, 1);
            bindings::dma_buf_invalidate_mappings(d);
            bindings::dma_resv_wait_timeout(
                resv,
                bindings::dma_resv_usage_DMA_RESV_USAGE_BOOKKEEP,
                false,
                // MAX_SCHEDULE_TIMEOUT: wait for as long as it takes.
                crate::ffi::c_long::MAX as crate::ffi::c_ulong,
            );
            bindings::dma_resv_unlock(resv);
        }
        // Importers unmap (and vunmap) from their `invalidate_mappings` or
        // soon after; their mappings point into the BAR, which is about to
        // go away.
        let mut maps = buf.maps.lock();
        while *maps != 0 {
            buf.unmapped.wait(&mut maps);
        }
    }
}

static OPS: bindings::dma_buf_ops = {
    // SAFETY: All-zeroes is a valid `dma_buf_ops` (no callbacks).
    let mut ops: bindings::dma_buf_ops = unsafe { core::mem::zeroed() };
    ops.attach = Some(attach_callback);
    ops.map_dma_buf = Some(map_callback);
    ops.unmap_dma_buf = Some(unmap_callback);
    ops.release = Some(release_callback);
    ops.mmap = Some(mmap_callback);
    ops.vmap = Some(vmap_callback);
    ops.vunmap = Some(vunmap_callback);
    ops
};

/// The VMA operations of a buffer's CPU mapping.
#[repr(transparent)]
struct VmOps(bindings::vm_operations_struct);

// SAFETY: The operations are never written after initialisation: function
// pointers and null pointers, read from any thread.
unsafe impl Sync for VmOps {}

static VM_OPS: VmOps = VmOps({
    // SAFETY: All-zeroes is a valid `vm_operations_struct` (no callbacks).
    let mut ops: bindings::vm_operations_struct = unsafe { core::mem::zeroed() };
    ops.fault = Some(fault_callback);
    ops
});

/// # Safety
///
/// Only called by the dma-buf core, as `dma_buf_ops::mmap`, for a VMA being
/// set up over `d`'s file whose range lies inside the buffer (checked by
/// `dma_buf_mmap_internal()`).
unsafe extern "C" fn mmap_callback(
    d: *mut bindings::dma_buf,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    // SAFETY: `d` is alive while its file is mapped.
    let buf = unsafe { Buffer::of(d) };
    if buf.revoked.load(Acquire) {
        return ENODEV.to_errno();
    }
    // SAFETY: The VMA is being set up; its flags are readable.
    let flags = unsafe { (*vma).__bindgen_anon_2.vm_flags };
    // A private mapping of a file opened for writing is a COW mapping, and
    // a COW mapping of PFNs without `struct page` is a kernel BUG at the
    // first fault (`vmf_insert_pfn_prot()`): the buffer's pages are shared
    // device memory, never copied. Refuse private mappings, as udmabuf and
    // the dma-buf heaps do. `VM_MAYSHARE` stays set for a shared mapping of
    // a file opened read-only, which drops `VM_SHARED`.
    if flags & (bindings::VM_SHARED | bindings::VM_MAYSHARE) == 0 {
        return EINVAL.to_errno();
    }
    let set =
        bindings::VM_IO | bindings::VM_PFNMAP | bindings::VM_DONTEXPAND | bindings::VM_DONTDUMP;
    // SAFETY: The VMA is being set up and not shared yet, as in
    // `VmaNew::set_io()`; a shared PFN map of I/O memory that cannot grow
    // or be dumped is a valid combination of flags. The protection is that
    // of the flags, write-combined; faults fill it with `vmf_insert_pfn()`.
    unsafe {
        let flags = flags | set;
        (*vma).__bindgen_anon_2.vm_flags = flags;
        (*vma).vm_page_prot = bindings::pgprot_writecombine(bindings::vm_get_page_prot(flags));
        (*vma).vm_ops = &VM_OPS.0;
    }
    0
}

/// # Safety
///
/// Only called by core mm, as `vm_operations_struct::fault` of a VMA that
/// `mmap_callback` set up, with the mmap (or VMA) lock held.
unsafe extern "C" fn fault_callback(vmf: *mut bindings::vm_fault) -> bindings::vm_fault_t {
    let sigbus = bindings::vm_fault_reason_VM_FAULT_SIGBUS as bindings::vm_fault_t;
    // SAFETY: `vmf` and its VMA are valid; the VMA's file is the dma-buf's,
    // whose `private_data` is the dma-buf, alive while mapped.
    let (vma, d, pgoff, addr) = unsafe {
        let vma = (*vmf).__bindgen_anon_1.vma;
        let d = (*(*vma).vm_file).private_data.cast::<bindings::dma_buf>();
        (
            vma,
            d,
            (*vmf).__bindgen_anon_1.pgoff,
            (*vmf).__bindgen_anon_1.address,
        )
    };
    // SAFETY: As above.
    let (buf, resv) = unsafe { (Buffer::of(d), (*d).resv) };
    let page = crate::page::PAGE_SHIFT;
    if pgoff >= buf.size >> page {
        return sigbus;
    }
    let pfn = (buf.phys.paddr >> page) as usize + pgoff;
    // Revocation sets `revoked` and zaps under the reservation lock: a
    // fault that finds it clear inserts its page before the zap.
    // SAFETY: No acquire context; sleeping is allowed in a fault.
    unsafe { bindings::dma_resv_lock(resv, core::ptr::null_mut()) };
    let ret = if buf.revoked.load(Acquire) {
        sigbus
    } else {
        // SAFETY: `vma` is a `VM_PFNMAP` mapping of the buffer, whose page
        // `pgoff` is BAR page `pfn`, and the mmap lock is held.
        unsafe { bindings::vmf_insert_pfn(vma, addr, pfn) }
    };
    // SAFETY: Locked above.
    unsafe { bindings::dma_resv_unlock(resv) };
    ret
}

/// # Safety
///
/// Only called by the dma-buf core, as `dma_buf_ops::attach` of a buffer
/// with our ops.
unsafe extern "C" fn attach_callback(
    d: *mut bindings::dma_buf,
    attach: *mut bindings::dma_buf_attachment,
) -> c_int {
    // SAFETY: `d` is alive while it is being attached to.
    let buf = unsafe { Buffer::of(d) };
    let sh = &*buf.shared;
    let state = sh.state.lock();
    if state.dead {
        return ENODEV.to_errno();
    }
    // SAFETY: `attach` is a valid attachment being set up; its device is
    // the importer's, alive for the attachment.
    let (importer, p2p, revocable): (&device::Device, bool, bool) = unsafe {
        (
            device::Device::from_raw((*attach).dev),
            (*attach).peer2peer,
            bindings::dma_buf_attach_revocable(attach),
        )
    };
    let refusal = if !p2p {
        Refusal::NotPeerToPeer
    } else if !revocable {
        Refusal::NotRevocable
    } else {
        return 0;
    };
    // SAFETY: Not `dead`: we hold `state`.
    unsafe { sh.refused(importer, refusal) };
    EOPNOTSUPP.to_errno()
}

/// # Safety
///
/// Only called by the dma-buf core, as `dma_buf_ops::map_dma_buf`, with the
/// reservation lock held.
unsafe extern "C" fn map_callback(
    attach: *mut bindings::dma_buf_attachment,
    dir: bindings::dma_data_direction,
) -> *mut bindings::sg_table {
    // SAFETY: The attachment and its dma-buf are alive.
    let buf = unsafe { Buffer::of((*attach).dmabuf) };
    if buf.revoked.load(Acquire) {
        return ENODEV.to_ptr();
    }
    let sh = &*buf.shared;
    // SAFETY: Not revoked under the reservation lock, which revocation
    // takes: the exporter is not dead, so `provider` is valid; the
    // importer's device is alive while attached.
    let map = unsafe { bindings::pci_p2pdma_map_type(sh.provider, (*attach).dev) };
    if !matches!(
        map,
        bindings::pci_p2pdma_map_type_PCI_P2PDMA_MAP_BUS_ADDR
            | bindings::pci_p2pdma_map_type_PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
    ) {
        // SAFETY: As above; the importer's device is alive while attached.
        let importer: &device::Device = unsafe { device::Device::from_raw((*attach).dev) };
        // SAFETY: Not dead, as above.
        unsafe { sh.refused(importer, Refusal::Unreachable) };
        return EREMOTEIO.to_ptr();
    }
    let mut phys = buf.phys;
    // SAFETY: As above. `phys` is one range inside the BAR.
    let sgt = unsafe {
        bindings::dma_buf_phys_vec_to_sgt(attach, buf.shared.provider, &mut phys, 1, buf.size, dir)
    };
    if from_err_ptr(sgt).is_ok() {
        *buf.maps.lock() += 1;
    }
    sgt
}

/// # Safety
///
/// Only called by the dma-buf core, as `dma_buf_ops::unmap_dma_buf`, with
/// the reservation lock held, for a table `map_callback` returned.
unsafe extern "C" fn unmap_callback(
    attach: *mut bindings::dma_buf_attachment,
    sgt: *mut bindings::sg_table,
    dir: bindings::dma_data_direction,
) {
    // SAFETY: The attachment and its dma-buf are alive.
    let buf = unsafe { Buffer::of((*attach).dmabuf) };
    // SAFETY: `sgt` came from `dma_buf_phys_vec_to_sgt()` for `attach`.
    unsafe { bindings::dma_buf_free_sgt(attach, sgt, dir) };
    let mut maps = buf.maps.lock();
    *maps -= 1;
    if *maps == 0 {
        buf.unmapped.notify_all();
    }
}

/// # Safety
///
/// Only called by the dma-buf core, as `dma_buf_ops::vmap`, with the
/// reservation lock held, when the buffer has no kernel mapping.
unsafe extern "C" fn vmap_callback(
    d: *mut bindings::dma_buf,
    map: *mut bindings::iosys_map,
) -> c_int {
    // SAFETY: `d` is alive while it is being mapped.
    let buf = unsafe { Buffer::of(d) };
    if buf.revoked.load(Acquire) {
        return ENODEV.to_errno();
    }
    // SAFETY: Not revoked under the reservation lock: the BAR is still the
    // device's, and `phys` is a range inside it. `ioremap()` gives it the
    // memory type the BAR already has (uncached unless the driver mapped
    // it otherwise).
    let vaddr = unsafe { bindings::ioremap(buf.phys.paddr, buf.size) };
    if vaddr.is_null() {
        return ENOMEM.to_errno();
    }
    // SAFETY: `map` is the core's, for us to fill.
    unsafe {
        (*map).__bindgen_anon_1.vaddr_iomem = vaddr;
        (*map).is_iomem = true;
    }
    // INVARIANT: Counted until `vunmap_callback`.
    *buf.maps.lock() += 1;
    0
}

/// # Safety
///
/// Only called by the dma-buf core, as `dma_buf_ops::vunmap`, with the
/// reservation lock held, for the mapping `vmap_callback` made.
unsafe extern "C" fn vunmap_callback(d: *mut bindings::dma_buf, map: *mut bindings::iosys_map) {
    // SAFETY: `d` is alive while it is mapped.
    let buf = unsafe { Buffer::of(d) };
    // SAFETY: `map` holds the address `ioremap()` returned in `vmap`.
    unsafe { bindings::iounmap((*map).__bindgen_anon_1.vaddr_iomem) };
    let mut maps = buf.maps.lock();
    *maps -= 1;
    if *maps == 0 {
        buf.unmapped.notify_all();
    }
}

/// # Safety
///
/// Only called by the dma-buf core, as `dma_buf_ops::release`, once.
unsafe extern "C" fn release_callback(d: *mut bindings::dma_buf) {
    // SAFETY: `priv` is the reference to the `Buffer` that `export` made
    // with `Arc::into_raw()`; the dma-buf is done with it.
    let buf = unsafe { Arc::from_raw((*d).priv_.cast::<Buffer>()) };
    // INVARIANT: `d` leaves `bufs` as its `release` runs.
    // SAFETY: A buffer is only ever in the list of its own exporter.
    let linked = unsafe { buf.shared.state.lock().bufs.remove(&buf) };
    // Dropped after the lock: the buffer's reference to the exporter's
    // state may be the last.
    drop(linked);
    drop(buf);
}
