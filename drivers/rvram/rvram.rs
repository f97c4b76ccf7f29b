// SPDX-License-Identifier: GPL-2.0

//! rvram: VRAM of a GPU-like PCI device in process address spaces.
//!
//! The device is QEMU's `ivshmem-plain` (PCI 1af4:1110): its BAR2, a
//! prefetchable memory BAR backed by host RAM, stands in for a GPU's VRAM.
//! Each GPU's VRAM is one of two kinds, chosen when it binds (the
//! `coherent` module parameter):
//!
//! - device-private (the default): each VRAM page is two pages for the
//!   kernel: a device-private page (a [`Pagemap`] over a free physical
//!   range), which is what process page tables point at while data lives in
//!   VRAM, and a P2PDMA page at the BAR address, the page a peer device can
//!   DMA to;
//! - device-coherent: the BAR itself is a device-coherent [`Pagemap`], which
//!   the CPU maps cacheably, as a GPU with a coherent interconnect (or CXL
//!   memory) would be. A CPU access does not migrate, and peers DMA-map the
//!   pages like system memory, so there are no P2P aliases and no dma-buf
//!   export.
//!
//! Each bound device gets an index `N`, a character device `/dev/rvramN`
//! speaking the `lib/test_hmm` dmirror ioctl ABI, and a debugfs directory
//! `/sys/kernel/debug/rvram/rvramN/`, documented in
//! `Documentation/misc-devices/rvram.rst`.

use kernel::{
    cgroup::dmem,
    debugfs::{Dir, File},
    device::{self, Bound, Core},
    driver,
    io::Io,
    miscdevice::{MiscDeviceOptions, MiscDeviceRegistration},
    mm::{
        migrate::{Eviction, MigrateVma, NewSystemFolio, Select, Source},
        pagemap::{
            Coherent, DeviceFault, DeviceFolio, DevicePrivateOps, FaultError, NewFolio, Owner,
            Pagemap, PagemapOps, Private,
        },
    },
    page::PAGE_SIZE,
    pci,
    prelude::*,
    sizes::SZ_2M,
    sync::{
        aref::ARef,
        atomic::{Atomic, Relaxed},
        new_mutex, Arc, Mutex,
    },
    task::might_sleep,
    time::{delay::fsleep, Delta, Instant, Monotonic},
    InPlaceModule, ThisModule,
};

mod bo;
mod dmirror;
mod vram;

use dmirror::DmirrorFile;
use vram::{Charges, Owners, VramLayout};

/// The BAR that holds VRAM on ivshmem-plain.
const VRAM_BAR: u32 = 2;
/// PCI device id of ivshmem (vendor Red Hat / Qumranet).
const IVSHMEM_DEVICE_ID: u32 = 0x1110;
/// Device names, which are also the character device names.
const NAMES: [&CStr; 8] = [
    c"rvram0", c"rvram1", c"rvram2", c"rvram3", c"rvram4", c"rvram5", c"rvram6", c"rvram7",
];

/// Module-wide state: the debugfs root and the bound GPUs by index.
struct Registry {
    root: Option<Dir>,
    gpus: [Option<Arc<Gpu>>; NAMES.len()],
    /// Bit `i` is set while a probe holds index `i` ([`Slot`]).
    probing: u32,
    /// Unbound GPUs whose VRAM pages were still in use ([`retire`]).
    retired: KVec<Arc<Gpu>>,
}

kernel::sync::global_lock! {
    // SAFETY: `RvramModule::init` calls `REGISTRY.init()` before any other use.
    unsafe(uninit) static REGISTRY: Mutex<Registry> = Registry {
        root: None,
        gpus: [const { None }; NAMES.len()],
        probing: 0,
        retired: KVec::new(),
    };
}

/// A device index held by a probe until its GPU is registered: the index
/// decides the GPU's memory kind (the `coherent` parameter), so it is taken
/// before the VRAM is set up.
struct Slot(usize);

impl Slot {
    fn take(pdev: &pci::Device<Bound>) -> Result<Self> {
        let mut reg = REGISTRY.lock();
        let probing = reg.probing;
        let index = (0..NAMES.len())
            .find(|&i| reg.gpus[i].is_none() && probing & (1 << i) == 0)
            .ok_or_else(|| {
                dev_err!(pdev, "more than {} devices\n", NAMES.len());
                EBUSY
            })?;
        reg.probing |= 1 << index;
        Ok(Slot(index))
    }

    /// Whether the `coherent` module parameter makes this GPU's VRAM
    /// device-coherent.
    fn coherent(&self) -> bool {
        module_parameters::coherent.value() & (1 << self.0) != 0
    }

    /// Registers `gpu` under this index.
    fn register(self, reg: &mut Registry, gpu: Arc<Gpu>) {
        reg.gpus[self.0] = Some(gpu);
        reg.probing &= !(1 << self.0);
        core::mem::forget(self);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        REGISTRY.lock().probing &= !(1 << self.0);
    }
}

/// The GPU of a character device name (`rvramN`), if bound.
fn gpu_by_name(name: &CStr) -> Option<Arc<Gpu>> {
    let index = NAMES.iter().position(|n| *n == name)?;
    REGISTRY.lock().gpus[index].clone()
}

/// Event counters of a GPU, shown in debugfs.
struct Stats {
    to_dev: Atomic<u64>,
    to_sys: Atomic<u64>,
    cpu_faults: Atomic<u64>,
    alloc_fail: Atomic<u64>,
    evicted: Atomic<u64>,
    alias_grants: Atomic<u64>,
    alias_access: Atomic<u64>,
    /// Pages copied into VRAM by migration.
    pages_to_vram: Atomic<u64>,
    /// Pages copied out of VRAM into system memory: by CPU (or non-alias
    /// device) faults, `HMM_DMIRROR_MIGRATE_TO_SYS` and eviction.
    pages_to_ram: Atomic<u64>,
    /// Time spent serving faults on VRAM pages by migration, in ns.
    fault_ns: Atomic<u64>,
    /// VRAM buffer objects exported as dma-bufs, and those released.
    dmabufs: Atomic<u64>,
    dmabufs_freed: Atomic<u64>,
}

impl Stats {
    fn new() -> Self {
        Self {
            to_dev: Atomic::new(0),
            to_sys: Atomic::new(0),
            cpu_faults: Atomic::new(0),
            alloc_fail: Atomic::new(0),
            evicted: Atomic::new(0),
            alias_grants: Atomic::new(0),
            alias_access: Atomic::new(0),
            pages_to_vram: Atomic::new(0),
            pages_to_ram: Atomic::new(0),
            fault_ns: Atomic::new(0),
            dmabufs: Atomic::new(0),
            dmabufs_freed: Atomic::new(0),
        }
    }
}

/// The owner side of rvram's device-private pages: VRAM access and counters.
struct VramPages {
    vram: pci::DevresBar,
    /// VRAM page `i` is P2PDMA page `p2p_pfn + i` (see [`Rvram::p2p`]).
    p2p_pfn: usize,
    stats: Stats,
    owners: Owners,
    charges: Charges,
}

impl VramPages {
    fn offset(index: usize) -> Result<usize> {
        index.checked_mul(PAGE_SIZE).ok_or(EINVAL)
    }

    /// Copies VRAM page `index` into `dst` (one page).
    fn read_page(&self, index: usize, dst: &mut [u8]) -> Result {
        if dst.len() != PAGE_SIZE {
            return Err(EINVAL);
        }
        let bar = self.vram.try_access().ok_or(ENODEV)?;
        copy_from_vram(&bar, Self::offset(index)?, dst)
    }

    /// Copies `src` (one page) into VRAM page `index`.
    fn write_page(&self, index: usize, src: &[u8]) -> Result {
        if src.len() != PAGE_SIZE {
            return Err(EINVAL);
        }
        let bar = self.vram.try_access().ok_or(ENODEV)?;
        copy_to_vram(&bar, Self::offset(index)?, src)
    }

    /// Copies the VRAM pages from `index` on into every page of `dst`.
    fn read_pages(&self, index: usize, dst: &mut NewSystemFolio) -> Result {
        let bar = self.vram.try_access().ok_or(ENODEV)?;
        for p in 0..dst.nr_pages() {
            let offset = Self::offset(index.checked_add(p).ok_or(EINVAL)?)?;
            dst.with_page_mut(p, |b| copy_from_vram(&bar, offset, b))??;
        }
        Ok(())
    }

    /// Zeroes VRAM page `index`.
    fn zero_page(&self, index: usize) -> Result {
        /// A page of zeroes, aligned for 64-bit copies.
        #[repr(C, align(8))]
        struct Zeroes([u8; PAGE_SIZE]);
        static ZERO: Zeroes = Zeroes([0; PAGE_SIZE]);
        self.write_page(index, &ZERO.0)
    }
}

impl PagemapOps for VramPages {
    type Kind = Private;

    fn folio_free(pm: &Pagemap<Self>, folio: &DeviceFolio<Self>) {
        pm.data().owners.set(folio.index(), folio.nr_pages(), 0);
        pm.data().charges.release(folio.index(), folio.nr_pages());
    }
}

impl DevicePrivateOps for VramPages {
    fn dma_alias(pm: &Pagemap<Self>, folio: &DeviceFolio<Self>) -> Result<usize> {
        let data = pm.data();
        let pfn = vram::alias_pfn(data.p2p_pfn, pm.nr_pages(), folio.index(), folio.nr_pages())?;
        // One grant per page-table entry HMM resolves: a page, or a PMD.
        data.stats.alias_grants.fetch_add(1, Relaxed);
        Ok(pfn)
    }

    fn migrate_to_ram(
        pm: &Pagemap<Self>,
        fault: &DeviceFault<'_, Self>,
    ) -> core::result::Result<(), FaultError> {
        let data = pm.data();
        let start = Instant::<Monotonic>::now();
        data.stats.cpu_faults.fetch_add(1, Relaxed);
        let r = Self::fault_to_ram(pm, fault);
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(0);
        data.stats.fault_ns.fetch_add(ns, Relaxed);
        r
    }
}

impl VramPages {
    /// Migrates the folio of a faulting address to system memory.
    fn fault_to_ram(
        pm: &Pagemap<Self>,
        fault: &DeviceFault<'_, Self>,
    ) -> core::result::Result<(), FaultError> {
        let data = pm.data();
        let mut mig = MigrateVma::for_fault(fault, pm.owner()).map_err(|_| FaultError::SigBus)?;
        for i in 0..mig.len() {
            let (index, order) = match mig.source(i) {
                Source::Device { folio, .. } => (folio.index(), folio.order()),
                _ => continue,
            };
            let mut new = NewSystemFolio::alloc(order).map_err(|_| {
                data.stats.alloc_fail.fetch_add(1, Relaxed);
                FaultError::Oom
            })?;
            data.read_pages(index, &mut new)
                .map_err(|_| FaultError::SigBus)?;
            mig.set_system(i, new).map_err(|_| FaultError::SigBus)?;
        }
        let moved = mig.migrate();
        data.stats.to_sys.fetch_add(moved.count() as u64, Relaxed);
        data.stats
            .pages_to_ram
            .fetch_add(moved.pages() as u64, Relaxed);
        Ok(())
    }
}

/// The owner side of rvram's device-coherent pages: the CPU reaches them
/// through the kernel's linear map, so only counters are left.
struct CoherentPages {
    stats: Stats,
    owners: Owners,
    charges: Charges,
}

impl PagemapOps for CoherentPages {
    type Kind = Coherent;

    fn folio_free(pm: &Pagemap<Self>, folio: &DeviceFolio<Self>) {
        pm.data().owners.set(folio.index(), folio.nr_pages(), 0);
        pm.data().charges.release(folio.index(), folio.nr_pages());
    }
}

/// What rvram does with VRAM pages of either kind: migrations and device
/// accesses are written once against this trait.
pub(crate) trait VramKind: PagemapOps {
    /// The device pages of this kind a migration to system memory collects.
    const SELECT: Select;

    /// The GPU's event counters.
    fn stats(&self) -> &Stats;

    /// Which file moved each page in.
    fn owners(&self) -> &Owners;

    /// The dmem cgroup charges of the pages migrated in.
    fn charges(&self) -> &Charges;

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

    /// Copies the VRAM folio `src` into `dst`, a system folio of its order.
    fn copy_out(pm: &Pagemap<Self>, src: &DeviceFolio<Self>, dst: &mut NewSystemFolio) -> Result {
        for p in 0..dst.nr_pages() {
            dst.with_page_mut(p, |b| Self::read(pm, src, p, b))??;
        }
        Ok(())
    }
}

impl VramKind for VramPages {
    const SELECT: Select = Select::DEVICE_PRIVATE;

    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn owners(&self) -> &Owners {
        &self.owners
    }

    fn charges(&self) -> &Charges {
        &self.charges
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

    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn owners(&self) -> &Owners {
        &self.owners
    }

    fn charges(&self) -> &Charges {
        &self.charges
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
        src.with_page(p, |b| dst.copy_from_slice(b))
    }
}

/// A GPU's VRAM, as the pagemap of its kind.
pub(crate) enum Vram {
    /// Device-private memory with P2PDMA aliases.
    Private(Pin<KBox<Pagemap<VramPages>>>),
    /// Device-coherent memory over the BAR.
    Coherent(Pin<KBox<Pagemap<CoherentPages>>>),
}

/// Runs `$body` with `$pm` bound to the GPU's pagemap, whatever its kind
/// (the body is compiled for each kind).
macro_rules! with_vram {
    ($vram:expr, $pm:ident => $body:expr) => {
        match $vram {
            $crate::Vram::Private(pm) => {
                let $pm = &**pm;
                $body
            }
            $crate::Vram::Coherent(pm) => {
                let $pm = &**pm;
                $body
            }
        }
    };
}
pub(crate) use with_vram;

impl Vram {
    fn owner(&self) -> Owner {
        with_vram!(self, pm => pm.owner())
    }

    fn stats(&self) -> &Stats {
        with_vram!(self, pm => pm.data().stats())
    }

    fn nr_pages(&self) -> usize {
        with_vram!(self, pm => pm.nr_pages())
    }

    fn nr_used(&self) -> usize {
        with_vram!(self, pm => pm.nr_used())
    }

    fn first_pfn(&self) -> usize {
        with_vram!(self, pm => pm.pfn_range().start)
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

/// What outlives the binding while files are open: the pagemap.
#[pin_data]
struct Gpu {
    index: usize,
    /// The PCI device, as the client named in alias faults.
    dev: ARef<device::Device>,
    vram: Vram,
    /// Exports VRAM buffer objects (`ENODEV` once unbound); device-private
    /// VRAM only.
    exports: Option<pci::ExportHandle>,
    /// VRAM as a dmem cgroup region, which buffer objects are charged to;
    /// device-private VRAM only, `None` once unbound.
    #[pin]
    dmem: Mutex<Option<dmem::Region>>,
    /// Serialises migrations into VRAM against unbind; `true` once unbound.
    #[pin]
    ops: Mutex<bool>,
    /// The last id handed to an open file ([`Gpu::new_file_id`]).
    files: Atomic<u32>,
}

impl Gpu {
    fn is_dead(&self) -> bool {
        *self.ops.lock()
    }

    /// A new id for an open file, never 0 ([`Owners`]). Ids wrap after
    /// 2^32 opens; a page still in VRAM from a file that long closed could
    /// then be released by the file that reuses its id.
    fn new_file_id(&self) -> u32 {
        loop {
            let id = self.files.fetch_add(1, Relaxed).wrapping_add(1);
            if id != 0 {
                return id;
            }
        }
    }

    /// Moves every page out of VRAM, retrying what cannot move for up to
    /// [`EVICT_PATIENCE`]; `EBUSY` if some pages are still in use then.
    fn evict_all(&self) -> Result<usize> {
        with_vram!(&self.vram, pm => Self::evict_pagemap(pm))
    }

    fn evict_pagemap<T: VramKind>(pm: &Pagemap<T>) -> Result<usize> {
        let start = Instant::<Monotonic>::now();
        let mut total = 0;
        loop {
            for first in (0..pm.nr_pages()).step_by(EVICT_CHUNK) {
                if pm.nr_used() == 0 {
                    return Ok(total);
                }
                let count = EVICT_CHUNK.min(pm.nr_pages() - first);
                // Out of memory for the round's arrays: the next try may
                // have it.
                total += Self::evict_range(pm, first, count).unwrap_or(0);
            }
            if pm.nr_used() == 0 {
                return Ok(total);
            }
            if start.elapsed() > EVICT_PATIENCE {
                return Err(EBUSY);
            }
            fsleep(Delta::from_millis(10));
        }
    }

    /// Moves the folios of VRAM pages `first..first + count` that can move
    /// now; returns how many pages moved. A folio that is locked or pinned,
    /// or for which there is no system memory at the moment, stays.
    fn evict_range<T: VramKind>(pm: &Pagemap<T>, first: usize, count: usize) -> Result<usize> {
        let stats = pm.data().stats();
        let mut ev = Eviction::collect(pm, first, count)?;
        for i in 0..ev.len() {
            let Some((folio, _)) = ev.source(i) else {
                continue;
            };
            let Ok(mut new) = NewSystemFolio::alloc(folio.order()) else {
                stats.alloc_fail.fetch_add(1, Relaxed);
                continue;
            };
            if T::copy_out(pm, folio, &mut new).is_ok() {
                ev.set_system(i, new)?;
            }
            // VRAM may hold 64 GiB: a scheduling point per folio.
            might_sleep();
        }
        let n = ev.finish();
        stats.evicted.fetch_add(n as u64, Relaxed);
        stats.pages_to_ram.fetch_add(n as u64, Relaxed);
        Ok(n)
    }
}

/// VRAM pages collected per eviction round: a multiple of the largest folio
/// ([`PMD_PAGES`]), so that no folio straddles two rounds, and small
/// enough that the round's arrays stay two 64 KiB allocations whatever the
/// VRAM size.
pub(crate) const EVICT_CHUNK: usize = 8192;

/// Pages in a PMD-sized folio, the largest VRAM folio.
pub(crate) const PMD_PAGES: usize = SZ_2M / PAGE_SIZE;
const _: () = assert!(EVICT_CHUNK % PMD_PAGES == 0);

/// How long unbind retries pages that cannot move out of VRAM (locked by a
/// migration in flight, or short of system memory) before it gives up on
/// them ([`retire`]).
const EVICT_PATIENCE: Delta = Delta::from_secs(10);

/// Keeps `gpu`, whose VRAM pages are still in use after unbind (a device-
/// coherent page pinned by a pipe, say), until they are freed: dropping its
/// pagemap now would wait for them in `memunmap_pages()`, and the unbind
/// with it, for as long as their users like. The pagemap's claim on its
/// physical range stays meanwhile, so a bind of the same device-coherent BAR
/// fails with `EBUSY`. [`reap_retired`] drops it once the pages are freed.
fn retire(pdev: &pci::Device<Bound>, gpu: &Arc<Gpu>, used: usize) {
    let name = NAMES[gpu.index].to_str().unwrap_or("rvram");
    let mut reg = REGISTRY.lock();
    if reg.retired.push(gpu.clone(), GFP_KERNEL).is_err() {
        // The last reference then goes with the device or its last file,
        // and that waits for the pages.
        dev_err!(
            pdev,
            "{name}: cannot keep the VRAM aside; unbind waits for its {used} pages\n"
        );
        return;
    }
    dev_warn!(
        pdev,
        "{name}: {used} VRAM pages still in use after unbind; VRAM stays reserved until they are freed\n"
    );
}

/// Drops the retired GPUs whose pages have all been freed.
fn reap_retired() {
    let mut done = KVec::new();
    {
        let mut reg = REGISTRY.lock();
        let mut i = 0;
        while i < reg.retired.len() {
            if reg.retired[i].vram.nr_used() == 0 {
                if let Ok(gpu) = reg.retired.remove(i) {
                    // Should the push fail, `gpu` drops here, under the
                    // lock: its pages are freed, so that does not wait.
                    let _ = done.push(gpu, GFP_KERNEL);
                }
            } else {
                i += 1;
            }
        }
    }
    for gpu in done.drain_all() {
        pr_info!(
            "{}: VRAM of the unbound GPU released\n",
            NAMES[gpu.index].to_str().unwrap_or("rvram")
        );
        // Unless an open file still holds it, the pagemap goes here.
        drop(gpu);
    }
}

/// Per-device state.
#[pin_data]
struct Rvram<'bound> {
    pdev: &'bound pci::Device<Bound>,
    gpu: Arc<Gpu>,
    /// Exports VRAM buffer objects as dma-bufs; dropped (which revokes
    /// them) before the P2PDMA memory below is freed. Device-private VRAM
    /// only.
    exporter: Option<pci::BarExporter<'bound>>,
    /// All of BAR2 as P2PDMA memory, reserved so that the P2PDMA pool never
    /// hands VRAM to anyone else: VRAM page `i` is P2PDMA page `p2p.pfn() + i`.
    /// Device-private VRAM only: the BAR cannot be both.
    p2p: Option<pci::P2pMem<'bound>>,
    #[pin]
    misc: MiscDeviceRegistration<DmirrorFile>,
    dir: Dir,
    #[pin]
    vram_size: File<u64>,
    /// `device_private_pfn` or `device_coherent_pfn`.
    #[pin]
    first_pfn: File<u64>,
    p2p_pfn: Option<Pin<KBox<File<u64>>>>,
    #[pin]
    stats: File<Arc<Gpu>>,
}

/// Checks that VRAM holds what is written to it, at both ends of the BAR,
/// and leaves it zeroed there.
fn probe_vram(vram: &pci::Bar<'_>, layout: &VramLayout) -> Result {
    let last = usize::try_from(layout.size())? - core::mem::size_of::<u64>();
    for (offset, pattern) in [
        (0, 0x5256_5241_4d30_a55a_u64),
        (last, !0x5256_5241_4d30_a55a),
    ] {
        vram.try_write64(pattern, offset)?;
        if vram.try_read64(offset)? != pattern {
            return Err(EIO);
        }
        vram.try_write64(0, offset)?;
    }
    Ok(())
}

/// Checks that the first page of device-coherent VRAM holds what the CPU
/// writes to it through the linear map, and leaves it zeroed.
fn probe_coherent(pm: &Pagemap<CoherentPages>) -> Result {
    let mut page = pm.alloc_folio(0)?;
    let pattern = 0x5256_5241_4d30_a55a_u64.to_ne_bytes();
    page.with_page_mut(0, |b| {
        for (i, c) in b.chunks_mut(8).enumerate() {
            c.copy_from_slice(&pattern);
            c[0] ^= i as u8;
        }
    })?;
    let ok = page.with_page(0, |b| {
        b.chunks(8)
            .enumerate()
            .all(|(i, c)| c[0] == pattern[0] ^ i as u8 && c[1..] == pattern[1..])
    })?;
    page.with_page_mut(0, |b| b.fill(0))?;
    if ok {
        Ok(())
    } else {
        Err(EIO)
    }
}

fn show_stats(gpu: &Arc<Gpu>, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let v = &gpu.vram;
    let s = v.stats();
    let reserved = match v {
        Vram::Private(pm) => pm.nr_reserved(),
        Vram::Coherent(_) => 0,
    };
    writeln!(f, "pages_total {}", v.nr_pages())?;
    writeln!(f, "pages_resident {}", v.nr_used())?;
    writeln!(f, "migrated_to_vram {}", s.to_dev.load(Relaxed))?;
    writeln!(f, "migrated_to_ram {}", s.to_sys.load(Relaxed))?;
    writeln!(f, "cpu_faults {}", s.cpu_faults.load(Relaxed))?;
    writeln!(f, "alloc_failures {}", s.alloc_fail.load(Relaxed))?;
    writeln!(f, "evicted {}", s.evicted.load(Relaxed))?;
    writeln!(f, "alias_grants {}", s.alias_grants.load(Relaxed))?;
    writeln!(f, "alias_accesses {}", s.alias_access.load(Relaxed))?;
    writeln!(f, "pages_to_vram {}", s.pages_to_vram.load(Relaxed))?;
    writeln!(f, "pages_to_ram {}", s.pages_to_ram.load(Relaxed))?;
    writeln!(f, "fault_ns {}", s.fault_ns.load(Relaxed))?;
    writeln!(f, "dmabufs_exported {}", s.dmabufs.load(Relaxed))?;
    writeln!(f, "dmabufs_released {}", s.dmabufs_freed.load(Relaxed))?;
    writeln!(f, "dmabuf_pages {}", reserved)
}

/// The device that names this GPU as an alias client.
fn client_dev(pdev: &pci::Device<Bound>) -> ARef<device::Device> {
    let dev: &device::Device = AsRef::<device::Device<Bound>>::as_ref(pdev);
    dev.into()
}

struct RvramDriver;

/// Device-private VRAM with its P2PDMA alias pages and dma-buf exporter.
type PrivateVram<'bound> = (
    Pin<KBox<Pagemap<VramPages>>>,
    pci::BarExporter<'bound>,
    pci::P2pMem<'bound>,
);

impl RvramDriver {
    /// Maps BAR2, publishes it as P2PDMA memory and creates the
    /// device-private pagemap whose pages stand for it.
    fn probe_private<'bound>(
        pdev: &'bound pci::Device<Bound>,
        layout: &VramLayout,
    ) -> Result<PrivateVram<'bound>> {
        let vram = pdev.iomap_region(VRAM_BAR, c"rvram")?;
        probe_vram(&vram, layout).inspect_err(|e| {
            dev_err!(pdev, "VRAM read-back check failed: {e:?}\n");
        })?;
        pdev.p2pdma_add_resource(VRAM_BAR, 0, 0).inspect_err(|e| {
            dev_err!(
                pdev,
                "cannot publish BAR{VRAM_BAR} as P2PDMA memory: {e:?}\n"
            );
        })?;
        let exporter = pci::BarExporter::new(
            pdev,
            VRAM_BAR,
            c"rvram",
            kernel::module::this_module::<RvramModule>(),
        )?;
        let size = usize::try_from(layout.size())?;
        let p2p = pdev.alloc_p2pmem(size)?;
        if p2p.phys_addr() != pdev.resource_start(VRAM_BAR)? {
            dev_err!(pdev, "P2PDMA pool does not start at BAR{VRAM_BAR}\n");
            return Err(EIO);
        }
        let pages = KBox::pin_init(
            Pagemap::new(
                size,
                None,
                Ok::<_, Error>(VramPages {
                    vram: vram.into_devres()?,
                    p2p_pfn: p2p.pfn(),
                    stats: Stats::new(),
                    owners: Owners::new(layout.pages())?,
                    charges: Charges::new()?,
                }),
            ),
            GFP_KERNEL,
        )?;
        Ok((pages, exporter, p2p))
    }
}

kernel::pci_device_table!(
    PCI_TABLE,
    <RvramDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_id(pci::Vendor::REDHAT_QUMRANET, IVSHMEM_DEVICE_ID),
        ()
    )]
);

impl pci::Driver for RvramDriver {
    type IdInfo = ();
    type Data<'bound> = Rvram<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        pin_init::pin_init_scope(move || {
            // A retired pagemap of this BAR would make a device-coherent
            // bind fail: drop those whose pages are gone by now.
            reap_retired();
            pdev.enable_device_mem()?;
            let pdev: &'bound pci::Device<Bound> = pdev;
            let len = pdev.resource_len(VRAM_BAR)?;
            let layout = VramLayout::new(len).inspect_err(|_| {
                dev_err!(
                    pdev,
                    "BAR{VRAM_BAR}: {len} bytes is not a VRAM size (2 MiB multiple, <= 64 GiB)\n"
                );
            })?;
            let slot = Slot::take(pdev)?;
            let coherent = slot.coherent();
            let (vram, exporter, p2p) = if coherent {
                let pages = KBox::pin_init(
                    Pagemap::new_coherent(
                        pdev,
                        VRAM_BAR,
                        None,
                        Ok::<_, Error>(CoherentPages {
                            stats: Stats::new(),
                            owners: Owners::new(layout.pages())?,
                            charges: Charges::new()?,
                        }),
                    ),
                    GFP_KERNEL,
                )
                .inspect_err(|e| {
                    dev_err!(
                        pdev,
                        "cannot map BAR{VRAM_BAR} as device-coherent memory: {e:?}\n"
                    );
                })?;
                probe_coherent(&pages).inspect_err(|e| {
                    dev_err!(pdev, "VRAM read-back check failed: {e:?}\n");
                })?;
                (Vram::Coherent(pages), None, None)
            } else {
                let (pages, exporter, p2p) = Self::probe_private(pdev, &layout)?;
                (Vram::Private(pages), Some(exporter), Some(p2p))
            };
            let first_pfn = vram.first_pfn() as u64;
            let p2p_pfn = p2p.as_ref().map(|p| p.pfn() as u64);
            let exports = exporter.as_ref().map(|e| e.handle());
            // "rvram/0000:00:05.0/vram" in the dmem cgroup files, as DRM
            // names its regions "drm/<device>/<region>".
            let region = if coherent {
                None
            } else {
                let dev: &device::Device<Bound> = pdev.as_ref();
                Some(dmem::Region::register(
                    layout.size(),
                    fmt!("rvram/{}/vram", dev.name()),
                )?)
            };
            let index = slot.0;

            let (gpu, dir) = {
                let mut reg = REGISTRY.lock();
                let gpu = Arc::pin_init(
                    try_pin_init!(Gpu {
                        index,
                        dev: client_dev(pdev),
                        vram,
                        exports,
                        dmem <- new_mutex!(region),
                        ops <- new_mutex!(false),
                        files: Atomic::new(0),
                    }),
                    GFP_KERNEL,
                )?;
                let dir = reg.root.as_ref().ok_or(ENODEV)?.subdir(NAMES[index]);
                slot.register(&mut reg, gpu.clone());
                (gpu, dir)
            };
            dev_info!(
                pdev,
                "{}: {} MiB of VRAM in BAR{VRAM_BAR} ({} pages, device-{})\n",
                NAMES[index].to_str()?,
                layout.size() >> 20,
                layout.pages(),
                if coherent { "coherent" } else { "private" }
            );
            let p2p_file = match p2p_pfn {
                Some(pfn) => Some(KBox::pin_init(
                    dir.read_only_file(c"p2pdma_pfn", pfn),
                    GFP_KERNEL,
                )?),
                None => None,
            };
            let stats_gpu = gpu.clone();
            Ok(try_pin_init!(Rvram {
                pdev,
                gpu,
                exporter,
                p2p,
                misc <- MiscDeviceRegistration::register(MiscDeviceOptions { name: NAMES[index] }),
                dir: dir.clone(),
                vram_size <- dir.read_only_file(c"vram_size", layout.size()),
                first_pfn <- dir.read_only_file(
                    if coherent {
                        c"device_coherent_pfn"
                    } else {
                        c"device_private_pfn"
                    },
                    first_pfn
                ),
                p2p_pfn: p2p_file,
                stats <- dir.read_callback_file(c"stats", stats_gpu, &show_stats),
            }))
        })
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        let gpu = &this.gpu;
        let name = NAMES[gpu.index].to_str().unwrap_or("rvram");
        REGISTRY.lock().gpus[gpu.index] = None;
        // No new migrations into VRAM; open files get ENODEV from now on.
        *gpu.ops.lock() = true;
        // Out of the cgroup files, so that limits set after a rebind apply
        // to the new region of the same name. Buffers that outlive the
        // binding are uncharged when they go.
        drop(gpu.dmem.lock().take());
        // No new P2P aliases; eviction below invalidates every mirror that
        // holds one, before `p2p` (dropped after this) frees the BAR pages.
        if let Vram::Private(pm) = &gpu.vram {
            pm.revoke_aliases();
        }
        // Data in VRAM goes back to system memory while the BAR is mapped.
        match gpu.evict_all() {
            Ok(n) => dev_info!(pdev, "{name}: removed, {n} pages evicted\n"),
            Err(_) => retire(pdev, gpu, gpu.vram.nr_used()),
        }
    }
}

/// Removes the debugfs root when the module goes away.
struct DebugfsRoot;

impl DebugfsRoot {
    fn new() -> Self {
        REGISTRY.lock().root = Some(Dir::new(c"rvram"));
        Self
    }
}

impl Drop for DebugfsRoot {
    fn drop(&mut self) {
        // Per-device directories hold a reference on the root: it goes away
        // with the last of them.
        REGISTRY.lock().root = None;
    }
}

/// Waits, when the module goes away, for the pages of retired GPUs: their
/// pagemaps call into this module until the last page is freed.
struct RetiredGpus;

impl Drop for RetiredGpus {
    fn drop(&mut self) {
        let start = Instant::<Monotonic>::now();
        let mut said = 0;
        loop {
            reap_retired();
            let (gpus, pages) = {
                let reg = REGISTRY.lock();
                let pages = reg.retired.iter().map(|g| g.vram.nr_used()).sum::<usize>();
                (reg.retired.len(), pages)
            };
            if gpus == 0 {
                // The registry is a static, which nothing drops: free the
                // list's buffer here, or it outlives the module.
                drop(core::mem::take(&mut REGISTRY.lock().retired));
                return;
            }
            // One line when the wait begins, then one a minute.
            let minutes = start.elapsed().as_millis() / 60_000;
            if said == 0 || minutes >= said {
                pr_warn!("unload waits for {pages} VRAM pages of {gpus} unbound GPUs\n");
                said = minutes + 1;
            }
            fsleep(Delta::from_millis(100));
        }
    }
}

#[pin_data]
struct RvramModule {
    _debugfs: DebugfsRoot,
    #[pin]
    _driver: driver::Registration<pci::Adapter<RvramDriver>>,
    /// Dropped after `_driver`, which unbinds every GPU.
    _retired: RetiredGpus,
}

impl InPlaceModule for RvramModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        // SAFETY: Called exactly once, before any other use of `REGISTRY`.
        unsafe { REGISTRY.init() };
        try_pin_init!(Self {
            _debugfs: DebugfsRoot::new(),
            _driver <- driver::Registration::new(c"rvram", module),
            _retired: RetiredGpus,
        })
    }
}

module! {
    type: RvramModule,
    name: "rvram",
    authors: ["rvram developers"],
    description: "Device-private VRAM of an ivshmem-backed GPU model",
    license: "GPL v2",
    imports_ns: ["DMA_BUF"],
    params: {
        coherent: u32 {
            default: 0,
            description: "Bitmask: bit N makes rvramN's VRAM device-coherent memory",
        },
    },
}
