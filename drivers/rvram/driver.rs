// SPDX-License-Identifier: GPL-2.0

//! The PCI driver: binds `ivshmem-plain` devices as GPUs, and unbinds them.

use crate::{
    dmirror::DmirrorFile,
    gpu::{
        Gpu,
        Vram, //
    },
    pages::{
        Books,
        CoherentPages,
        PrivatePages, //
    },
    registry::{
        self,
        Dir,
        Registered,
        Slot,
        NAMES,
        REGISTRY, //
    },
    scale::{
        self,
        ScaleBench, //
    },
    stats,
    vram::VramLayout,
};
use kernel::{
    cgroup::dmem,
    debugfs::File,
    device::{
        self,
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
    sync::{
        aref::ARef,
        Arc, //
    },
    uaccess::UserSliceReader,
};

/// The BAR that holds VRAM on ivshmem-plain.
const VRAM_BAR: u32 = 2;
/// PCI device id of ivshmem (vendor Red Hat / Qumranet).
const IVSHMEM_DEVICE_ID: u32 = 0x1110;

/// A debugfs file of the scale benchmark.
type ScaleFile = Pin<KBox<File<Arc<ScaleBench>>>>;

/// Per-device state.
#[pin_data]
pub(crate) struct Rvram<'bound> {
    pdev: &'bound pci::Device<Bound>,
    gpu: Arc<Gpu>,
    /// Exports VRAM buffer objects as dma-bufs; dropped (which revokes
    /// them) before the device's P2P provider goes. Device-private VRAM
    /// only.
    exporter: Option<pci::BarExporter<'bound>>,
    #[pin]
    misc: MiscDeviceRegistration<DmirrorFile>,
    dir: Dir,
    #[pin]
    vram_size: File<u64>,
    /// `device_private_pfn` or `device_coherent_pfn`.
    #[pin]
    first_pfn: File<u64>,
    /// `alias_phys`: where peers reach VRAM page 0, BAR2's physical
    /// address. Device-private VRAM only.
    alias_phys: Option<Pin<KBox<File<u64>>>>,
    /// Whether peers get aliases of VRAM pages ([`Pagemap::revoke_aliases`]
    /// and [`Pagemap::restore_aliases`]), which benchmarks and tests turn
    /// off to measure what a peer's access costs when it migrates the
    /// pages instead. Device-private VRAM only.
    p2p_alias: Option<Pin<KBox<File<Arc<Gpu>>>>>,
    /// The scale benchmark's `fill` and `alloc_bench`. Device-private VRAM
    /// only.
    scale: Option<[ScaleFile; 2]>,
    #[pin]
    stats: File<Arc<Gpu>>,
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

/// Shows `p2p_alias` as debugfs shows a bool: `Y` or `N`.
fn show_p2p_alias(gpu: &Arc<Gpu>, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let on = match &gpu.vram {
        Vram::Private(pm) => !pm.aliases_revoked(),
        Vram::Coherent(_) => false,
    };
    writeln!(f, "{}", if on { "Y" } else { "N" })
}

/// Sets `p2p_alias` from what `kstrtobool()` accepts; `EINVAL` otherwise.
/// Peers keep the aliases they hold until their next invalidation: the
/// switch decides what the next fault gets.
fn store_p2p_alias(gpu: &Arc<Gpu>, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 8];
    let n = reader.len();
    if n == 0 || n > buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    let on = kernel::str::kstrtobool_bytes(&buf[..n])?;
    // The aliases come back only when no file keeps them off either.
    gpu.switch_aliases_off(&mut gpu.aliases_off.lock(), !on)
}

/// The device that names this GPU as an alias client.
fn client_dev(pdev: &pci::Device<Bound>) -> ARef<device::Device> {
    let dev: &device::Device = AsRef::<device::Device<Bound>>::as_ref(pdev);
    dev.into()
}

/// The PCI driver, once for each kind of VRAM: `rvram` binds a GPU with
/// device-private VRAM, `rvram-coherent` one with device-coherent VRAM.
/// Which of the two a device gets is the administrator's choice, made per
/// device with `driver_override`.
pub(crate) struct RvramDriver<const COHERENT: bool>;

/// The driver of device-private VRAM.
pub(crate) type PrivateDriver = RvramDriver<false>;
/// The driver of device-coherent VRAM.
pub(crate) type CoherentDriver = RvramDriver<true>;

/// Device-private VRAM with its dma-buf exporter.
type PrivateVram<'bound> = (Pin<KBox<Pagemap<PrivatePages>>>, pci::BarExporter<'bound>);

impl<const COHERENT: bool> RvramDriver<COHERENT> {
    /// Maps BAR2 and creates the device-private pagemap whose pages stand
    /// for it, with BAR2 as their alias for peers.
    fn probe_private<'bound>(
        pdev: &'bound pci::Device<Bound>,
        layout: &VramLayout,
    ) -> Result<PrivateVram<'bound>> {
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
        // SAFETY: `provider` is BAR2's, which holds VRAM from its start for
        // `size` bytes. Unbind revokes the aliases and evicts every page of
        // the pagemap before the provider goes (after `unbind`); when some
        // page cannot be evicted, the pagemap is retired, its aliases
        // revoked, and every mirror of the pages that could be moved was
        // invalidated by the eviction.
        let alias =
            unsafe { LinearAlias::new(provider.as_raw(), pdev.resource_start(VRAM_BAR)?, size) };
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
        Ok((pages, exporter))
    }
}

// Empty: rvram binds only the devices an administrator assigns to it with
// `driver_override` (the PCI core then matches `pci_device_id_any`), as
// pci-stub does. ivshmem devices are VM shared memory that other software
// uses too; a driver that claimed them all would take them away from it.
kernel::pci_device_table!(PCI_TABLE, (), []);

impl<const COHERENT: bool> pci::Driver for RvramDriver<COHERENT> {
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
            let pdev: &'bound pci::Device<Bound> = pdev;
            let len = pdev.resource_len(VRAM_BAR)?;
            let layout = VramLayout::new(len).inspect_err(|_| {
                dev_err!(
                    pdev,
                    "BAR{VRAM_BAR}: {len} bytes is not a VRAM size (2 MiB multiple, <= 64 GiB)\n"
                );
            })?;
            let slot = Slot::take(pdev)?;
            let coherent = COHERENT;
            let (vram, exporter) = if coherent {
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
                (Vram::Coherent(pages), None)
            } else {
                let (pages, exporter) = Self::probe_private(pdev, &layout)?;
                (Vram::Private(pages), Some(exporter))
            };
            let first_pfn = vram.first_pfn() as u64;
            let alias_phys = match &vram {
                Vram::Private(_) => Some(pdev.resource_start(VRAM_BAR)?),
                Vram::Coherent(_) => None,
            };
            let exports = exporter.as_ref().map(|e| e.handle());
            // "rvram/0000:00:05.0/vram" in the dmem cgroup files, as DRM
            // names its regions "drm/<device>/<region>": VRAM of either kind,
            // which migrations into it (and buffer objects) are charged to.
            let region = {
                let dev: &device::Device<Bound> = pdev.as_ref();
                Some(dmem::Region::register(
                    layout.size(),
                    fmt!("rvram/{}/vram", dev.name()),
                )?)
            };
            let index = slot.0;

            let (gpu, dir) = {
                let reg = REGISTRY.lock();
                let gpu = Arc::pin_init(
                    Gpu::new(index, client_dev(pdev), vram, exports, region),
                    GFP_KERNEL,
                )?;
                let dir = reg.root.as_ref().ok_or(ENODEV)?.subdir(NAMES[index]);
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
            let alias_phys = match alias_phys {
                Some(phys) => Some(KBox::pin_init(
                    dir.read_only_file(c"alias_phys", phys),
                    GFP_KERNEL,
                )?),
                None => None,
            };
            let p2p_alias = match &gpu.vram {
                Vram::Private(_) => Some(KBox::pin_init(
                    dir.read_write_callback_file(
                        c"p2p_alias",
                        gpu.clone(),
                        &show_p2p_alias,
                        &store_p2p_alias,
                    ),
                    GFP_KERNEL,
                )?),
                Vram::Coherent(_) => None,
            };
            let scale = match &gpu.vram {
                Vram::Private(_) => {
                    let bench = ScaleBench::new(gpu.clone())?;
                    Some([
                        KBox::pin_init(
                            dir.read_write_callback_file(
                                c"fill",
                                bench.clone(),
                                &scale::show_fill,
                                &scale::store_fill,
                            ),
                            GFP_KERNEL,
                        )?,
                        KBox::pin_init(
                            dir.read_write_callback_file(
                                c"alloc_bench",
                                bench,
                                &scale::show_alloc_bench,
                                &scale::store_alloc_bench,
                            ),
                            GFP_KERNEL,
                        )?,
                    ])
                }
                Vram::Coherent(_) => None,
            };
            let stats_gpu = gpu.clone();
            Ok(try_pin_init!(Rvram {
                pdev,
                gpu,
                exporter,
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
                alias_phys,
                p2p_alias,
                scale,
                stats <- dir.read_callback_file(c"stats", stats_gpu, &stats::show),
                // Last: nothing after it can fail, and a probe that fails
                // before leaves nothing in the registry (the slot frees its
                // index), whatever it set up going with its fields.
                registered: slot.register(gpu.clone()),
            }))
        })
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, this: Pin<&Self::Data<'bound>>) {
        let gpu = &this.gpu;
        let name = NAMES[gpu.index].to_str().unwrap_or("rvram");
        REGISTRY.lock().gpus[gpu.index] = None;
        // No new migrations into VRAM; open files get ENODEV from now on.
        gpu.set_unbound();
        // Out of the cgroup files, so that limits set after a rebind apply
        // to the new region of the same name. Buffers that outlive the
        // binding are uncharged when they go.
        drop(gpu.dmem.lock().take());
        // No new aliases; eviction below invalidates every mirror that holds
        // one, before the P2P provider goes after `unbind`.
        if let Vram::Private(pm) = &gpu.vram {
            pm.revoke_aliases();
        }
        // Data in VRAM goes back to system memory while the BAR is mapped.
        match gpu.evict_all(pdev.as_ref()) {
            Ok(ev) => dev_info!(
                pdev,
                "{name}: removed, {} pages evicted in {} us ({} of {} pages scanned in {} \
                 pass(es), {} chunk and {} page bits walked)\n",
                ev.pages,
                ev.us,
                ev.scanned,
                gpu.vram.nr_pages(),
                ev.passes,
                ev.walk.chunk_bits,
                ev.walk.page_bits
            ),
            Err(_) => registry::retire(pdev, gpu, gpu.vram.nr_used()),
        }
    }
}
