// SPDX-License-Identifier: GPL-2.0

//! The PCI driver: binds `ivshmem-plain` devices as GPUs, and unbinds them.

use crate::{
    debugfs::GpuFiles,
    dmirror::DmirrorFile,
    gpu::{
        Gpu,
        Vram,
        NAMES, //
    },
    pages::{
        Books,
        CoherentPages,
        PrivatePages,
        VramKind, //
    },
    registry::{
        self,
        Registered,
        Slot, //
    },
    vram::VramLayout,
};
use core::marker::PhantomData;
use kernel::{
    device::{
        Bound,
        Core, //
    },
    io::Io,
    miscdevice::{
        MiscDeviceOptions,
        MiscDeviceRegistration, //
    },
    mm::pagemap::{
        LinearAlias,
        Pagemap, //
    },
    page::PAGE_SIZE,
    pci,
    prelude::*,
    sync::Arc,
};

/// The BAR that holds VRAM on ivshmem-plain.
const VRAM_BAR: u32 = 2;
/// PCI device id of ivshmem (vendor Red Hat / Qumranet).
const IVSHMEM_DEVICE_ID: u32 = 0x1110;

/// Per-device state.
#[pin_data]
pub(crate) struct Rvram<'bound> {
    gpu: Arc<Gpu>,
    /// Exports VRAM buffer objects as dma-bufs; dropped (which revokes
    /// them) before the device's P2P provider goes. Device-private VRAM
    /// only.
    exporter: Option<pci::BarExporter<'bound>>,
    #[pin]
    misc: MiscDeviceRegistration<DmirrorFile>,
    #[pin]
    files: GpuFiles,
    /// The GPU's place in the registry, taken last.
    registered: Registered,
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
    let mut back = KVec::from_elem(0u8, PAGE_SIZE, GFP_KERNEL)?;
    page.read_page(0, &mut back)?;
    let ok = back
        .chunks(8)
        .enumerate()
        .all(|(i, c)| c[0] == pattern[0] ^ i as u8 && c[1..] == pattern[1..]);
    page.with_page_mut(0, |b| b.fill(0))?;
    if ok {
        Ok(())
    } else {
        Err(EIO)
    }
}

/// The VRAM of a bound device, as [`BindVram::bind`] sets it up.
pub(crate) struct BoundVram<'bound> {
    vram: Vram,
    /// The dma-buf exporter of device-private VRAM.
    exporter: Option<pci::BarExporter<'bound>>,
    /// Where peers reach VRAM page 0: device-private VRAM only.
    alias_phys: Option<u64>,
}

/// A kind of VRAM, as a driver binds it.
pub(crate) trait BindVram: VramKind {
    /// The kind, as the kernel log names it.
    const NAME: &'static str;

    /// Maps BAR2 of `pdev` as VRAM of this kind, laid out as `layout`, and
    /// checks that it holds data.
    fn bind<'bound>(
        pdev: &'bound pci::Device<Bound>,
        layout: &VramLayout,
    ) -> Result<BoundVram<'bound>>;
}

impl BindVram for PrivatePages {
    const NAME: &'static str = "private";

    /// Maps BAR2 and creates the device-private pagemap whose pages stand
    /// for it, with BAR2 as their alias for peers.
    fn bind<'bound>(
        pdev: &'bound pci::Device<Bound>,
        layout: &VramLayout,
    ) -> Result<BoundVram<'bound>> {
        let vram = pdev.iomap_region(VRAM_BAR, c"rvram")?;
        probe_vram(&vram, layout).inspect_err(|e| {
            dev_err!(pdev, "VRAM read-back check failed: {e:?}\n");
        })?;
        let exporter = pci::BarExporter::new(
            pdev,
            VRAM_BAR,
            c"rvram",
            kernel::module::this_module::<crate::RvramModule>(),
        )?;
        let size = usize::try_from(layout.size())?;
        let provider = pdev.p2pdma_provider(VRAM_BAR)?;
        let phys = pdev.resource_start(VRAM_BAR)?;
        // SAFETY: `provider` is BAR2's, which holds VRAM from its start,
        // `phys`, for `size` bytes. Unbind revokes the aliases and evicts
        // every page of the pagemap before the provider goes (after
        // `unbind`): nothing pins a device-private page, so the eviction
        // ends with every page moved, and it invalidates every mirror that
        // holds an alias.
        let alias = unsafe { LinearAlias::new(provider.as_raw(), phys, size) };
        let pages = KBox::pin_init(
            Pagemap::new_with_alias(
                size,
                None,
                alias,
                Ok::<_, Error>(PrivatePages {
                    vram: vram.into_devres()?,
                    books: Books::new(layout.pages())?,
                }),
            ),
            GFP_KERNEL,
        )?;
        Ok(BoundVram {
            vram: Vram::Private(pages),
            exporter: Some(exporter),
            alias_phys: Some(phys),
        })
    }
}

impl BindVram for CoherentPages {
    const NAME: &'static str = "coherent";

    /// Maps BAR2 as a device-coherent pagemap, which the CPU maps
    /// cacheably.
    fn bind<'bound>(
        pdev: &'bound pci::Device<Bound>,
        layout: &VramLayout,
    ) -> Result<BoundVram<'bound>> {
        let pages = KBox::pin_init(
            Pagemap::new_coherent(
                pdev,
                VRAM_BAR,
                None,
                Ok::<_, Error>(CoherentPages {
                    books: Books::new(layout.pages())?,
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
        Ok(BoundVram {
            vram: Vram::Coherent(pages),
            exporter: None,
            alias_phys: None,
        })
    }
}

/// The PCI driver, once for each kind of VRAM: `rvram` binds a GPU with
/// device-private VRAM, `rvram-coherent` one with device-coherent VRAM.
/// Which of the two a device gets is the administrator's choice, made per
/// device with `driver_override`.
pub(crate) struct RvramDriver<K>(PhantomData<K>);

/// The driver of device-private VRAM.
pub(crate) type PrivateDriver = RvramDriver<PrivatePages>;
/// The driver of device-coherent VRAM.
pub(crate) type CoherentDriver = RvramDriver<CoherentPages>;

/// Checks that `pdev` is an ivshmem-plain device with a VRAM BAR, and
/// enables it.
fn vram_layout(pdev: &pci::Device<Core<'_>>) -> Result<VramLayout> {
    let (vendor, device) = (pdev.vendor_id(), pdev.device_id());
    if vendor != pci::Vendor::REDHAT_QUMRANET || u32::from(device) != IVSHMEM_DEVICE_ID {
        dev_err!(
            pdev,
            "not an ivshmem-plain device ({:04x}:{device:04x})\n",
            vendor.as_raw()
        );
        return Err(ENODEV);
    }
    pdev.enable_device_mem()?;
    let len = pdev.resource_len(VRAM_BAR)?;
    VramLayout::new(len).inspect_err(|_| {
        dev_err!(
            pdev,
            "BAR{VRAM_BAR}: {len} bytes is not a VRAM size (2 MiB multiple, <= 64 GiB)\n"
        );
    })
}

// Empty: rvram binds only the devices an administrator assigns to it with
// `driver_override` (the PCI core then matches `pci_device_id_any`), as
// pci-stub does. ivshmem devices are VM shared memory that other software
// uses too; a driver that claimed them all would take them away from it.
kernel::pci_device_table!(PCI_TABLE, (), []);

impl<K: BindVram> pci::Driver for RvramDriver<K> {
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
            registry::reap_retired();
            let layout = vram_layout(pdev)?;
            let pdev: &'bound pci::Device<Bound> = pdev;
            let slot = Slot::take(pdev)?;
            let index = slot.0;
            let bound = K::bind(pdev, &layout)?;
            let exports = bound.exporter.as_ref().map(|e| e.handle());
            let gpu = Arc::pin_init(Gpu::new(index, pdev, bound.vram, exports), GFP_KERNEL)?;
            dev_info!(
                pdev,
                "{}: {} MiB of VRAM in BAR{VRAM_BAR} ({} pages, device-{})\n",
                NAMES[index].to_str()?,
                layout.size() >> 20,
                layout.pages(),
                K::NAME
            );
            Ok(try_pin_init!(Rvram {
                gpu: gpu.clone(),
                exporter: bound.exporter,
                misc <- MiscDeviceRegistration::register(MiscDeviceOptions { name: NAMES[index] }),
                files <- GpuFiles::new(gpu, layout.size(), bound.alias_phys),
                // Last: nothing after it can fail, and a probe that fails
                // before leaves nothing in the registry (the slot frees its
                // index), whatever it set up going with its fields.
                registered: slot.register(gpu.clone()),
            }))
        })
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        let gpu = &this.gpu;
        // First: no file opens it and no peer finds it from now on.
        registry::unregister(gpu);
        if gpu.unbind(pdev).is_err() {
            registry::retire(pdev, gpu, gpu.vram.nr_used());
        }
    }
}
