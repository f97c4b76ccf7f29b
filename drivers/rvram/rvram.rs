// SPDX-License-Identifier: GPL-2.0

//! rvram: device-private VRAM of a GPU-like PCI device.
//!
//! The device is QEMU's `ivshmem-plain` (PCI 1af4:1110): its BAR2, a
//! prefetchable memory BAR backed by host RAM, stands in for a GPU's VRAM.
//! Each VRAM page is two pages for the kernel: a device-private page (a
//! [`Pagemap`] over a free physical range), which is what process page
//! tables point at while data lives in VRAM, and a P2PDMA page at the BAR
//! address, the page a peer device can DMA to.
//!
//! Each bound device gets an index (`rvramN`) and a debugfs directory,
//! `/sys/kernel/debug/rvram/rvramN/`, documented in
//! `Documentation/misc-devices/rvram.rst`.

use kernel::{
    debugfs::{Dir, File},
    device::{Bound, Core},
    driver,
    io::Io,
    mm::pagemap::{DeviceFault, DeviceFolio, DevicePrivateOps, FaultError, Pagemap},
    pci,
    prelude::*,
    str::CString,
    InPlaceModule, ThisModule,
};

mod vram;

use vram::VramLayout;

/// The BAR that holds VRAM on ivshmem-plain.
const VRAM_BAR: u32 = 2;
/// PCI device id of ivshmem (vendor Red Hat / Qumranet).
const IVSHMEM_DEVICE_ID: u32 = 0x1110;
/// Devices one module instance drives; bounds the index bitmap.
const MAX_DEVICES: u32 = u64::BITS;

/// Module-wide state: the debugfs root and the device indices in use.
struct Registry {
    root: Option<Dir>,
    used: u64,
}

kernel::sync::global_lock! {
    // SAFETY: `RvramModule::init` calls `REGISTRY.init()` before any other use.
    unsafe(uninit) static REGISTRY: Mutex<Registry> = Registry { root: None, used: 0 };
}

/// A device index (`rvramN`), released when dropped.
///
/// # Invariants
///
/// Bit `self.0` is set in `REGISTRY.used` for as long as `self` lives.
struct DevIndex(u32);

impl DevIndex {
    /// Takes the lowest free index; `EBUSY` when all are taken.
    fn alloc() -> Result<Self> {
        let mut reg = REGISTRY.lock();
        let free = !reg.used;
        if free == 0 {
            return Err(EBUSY);
        }
        let index = free.trailing_zeros();
        reg.used |= 1 << index;
        // INVARIANT: bit `index` was just set.
        Ok(Self(index))
    }
}

impl Drop for DevIndex {
    fn drop(&mut self) {
        REGISTRY.lock().used &= !(1 << self.0);
    }
}

/// The owner side of rvram's device-private pages.
struct VramPages;

impl DevicePrivateOps for VramPages {
    fn folio_free(_pm: &Pagemap<Self>, _folio: &DeviceFolio<Self>) {}

    fn migrate_to_ram(
        _pm: &Pagemap<Self>,
        _fault: &DeviceFault<'_, Self>,
    ) -> core::result::Result<(), FaultError> {
        // rvram does not migrate process memory into VRAM yet: no process
        // maps one of its device-private pages, so no CPU fault gets here.
        Err(FaultError::SigBus)
    }
}

/// Per-device state.
#[pin_data(PinnedDrop)]
struct Rvram<'bound> {
    pdev: &'bound pci::Device<Bound>,
    /// Mapping of all of BAR2.
    vram: pci::Bar<'bound>,
    layout: VramLayout,
    /// The device-private pages, one per VRAM page.
    pages: Pin<KBox<Pagemap<VramPages>>>,
    /// All of BAR2 as P2PDMA memory, reserved so that the P2PDMA pool never
    /// hands VRAM to anyone else: VRAM page `i` is P2PDMA page `p2p.pfn() + i`.
    p2p: pci::P2pMem<'bound>,
    index: DevIndex,
    dir: Dir,
    #[pin]
    vram_size: File<u64>,
    #[pin]
    private_pfn: File<u64>,
    #[pin]
    p2p_pfn: File<u64>,
}

impl Rvram<'_> {
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
}

struct RvramDriver;

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
            pdev.enable_device_mem()?;
            let pdev: &'bound pci::Device<Bound> = pdev;
            let len = pdev.resource_len(VRAM_BAR)?;
            let layout = VramLayout::new(len).inspect_err(|_| {
                dev_err!(
                    pdev,
                    "BAR{VRAM_BAR} of {len} bytes cannot be VRAM (needs a non-zero multiple of 2 MiB, at most 64 GiB)\n"
                );
            })?;
            let vram = pdev.iomap_region(VRAM_BAR, c"rvram")?;
            Rvram::probe_vram(&vram, &layout).inspect_err(|e| {
                dev_err!(pdev, "VRAM read-back check failed: {e:?}\n");
            })?;
            pdev.p2pdma_add_resource(VRAM_BAR, 0, 0).inspect_err(|e| {
                dev_err!(
                    pdev,
                    "cannot publish BAR{VRAM_BAR} as P2PDMA memory: {e:?}\n"
                );
            })?;
            let p2p = pdev.alloc_p2pmem(usize::try_from(layout.size())?)?;
            if p2p.phys_addr() != pdev.resource_start(VRAM_BAR)? {
                dev_err!(pdev, "P2PDMA pool does not start at BAR{VRAM_BAR}\n");
                return Err(EIO);
            }
            let index = DevIndex::alloc().inspect_err(|_| {
                dev_err!(pdev, "more than {MAX_DEVICES} devices\n");
            })?;
            let name = CString::try_from_fmt(fmt!("rvram{}", index.0))?;
            let dir = match &REGISTRY.lock().root {
                Some(root) => root.subdir(&name),
                None => return Err(ENODEV),
            };
            dev_info!(
                pdev,
                "{}: {} MiB of VRAM in BAR{VRAM_BAR} ({} pages)\n",
                name.to_str()?,
                layout.size() >> 20,
                layout.pages()
            );
            let size = layout.size();
            let p2p_pfn = p2p.pfn() as u64;
            let pages = KBox::pin_init(
                Pagemap::new(usize::try_from(size)?, None, VramPages),
                GFP_KERNEL,
            )?;
            let private_pfn = pages.pfn_range().start as u64;
            Ok(try_pin_init!(Rvram {
                pdev,
                vram,
                layout,
                pages,
                p2p,
                index,
                dir: dir.clone(),
                vram_size <- dir.read_only_file(c"vram_size", size),
                private_pfn <- dir.read_only_file(c"device_private_pfn", private_pfn),
                p2p_pfn <- dir.read_only_file(c"p2pdma_pfn", p2p_pfn),
            }))
        })
    }
}

#[pinned_drop]
impl PinnedDrop for Rvram<'_> {
    fn drop(self: Pin<&mut Self>) {
        dev_info!(self.pdev, "rvram{}: removed\n", self.index.0);
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

#[pin_data]
struct RvramModule {
    _debugfs: DebugfsRoot,
    #[pin]
    _driver: driver::Registration<pci::Adapter<RvramDriver>>,
}

impl InPlaceModule for RvramModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        // SAFETY: Called exactly once, before any other use of `REGISTRY`.
        unsafe { REGISTRY.init() };
        try_pin_init!(Self {
            _debugfs: DebugfsRoot::new(),
            _driver <- driver::Registration::new(c"rvram", module),
        })
    }
}

module! {
    type: RvramModule,
    name: "rvram",
    authors: ["rvram developers"],
    description: "Device-private VRAM of an ivshmem-backed GPU model",
    license: "GPL v2",
}
