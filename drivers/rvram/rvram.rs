// SPDX-License-Identifier: GPL-2.0

//! rvram: VRAM of a GPU-like PCI device in process address spaces.
//!
//! The device is QEMU's `ivshmem-plain` (PCI 1af4:1110): its BAR2, a
//! prefetchable memory BAR backed by host RAM, stands in for a GPU's VRAM.
//! rvram binds only the devices assigned to it with `driver_override`, and
//! registers two PCI drivers, one for each kind of VRAM; the driver a device
//! is assigned to chooses the kind:
//!
//! - device-private (driver `rvram`): each VRAM page is a device-private
//!   page (a [`Pagemap`] over a free physical range), which is what process
//!   page tables point at while data lives in VRAM; a peer device that can
//!   reach the BAR is handed the page's address in the BAR, its alias;
//! - device-coherent (driver `rvram-coherent`): the BAR itself is a
//!   device-coherent [`Pagemap`], which the CPU maps cacheably, as a GPU
//!   with a coherent interconnect (or CXL memory) would be. A CPU access
//!   does not migrate, and peers DMA-map the pages like system memory, so
//!   there are no P2P aliases and no dma-buf export.
//!
//! Each bound device gets an index `N`, a character device `/dev/rvramN`
//! speaking the `lib/test_hmm` dmirror ioctl ABI, and a debugfs directory
//! `/sys/kernel/debug/rvram/rvramN/`, documented in
//! `Documentation/misc-devices/rvram.rst`.
//!
//! The pieces, one concept per file:
//!
//! - [`driver`]: the PCI driver: which devices it binds, and how VRAM of
//!   each kind is mapped (with its aliases and dma-buf exporter);
//! - [`gpu`]: what outlives a binding while files are open: the GPU, its
//!   state and its VRAM's pagemap, its cgroup region, and unbind
//!   (eviction, revocation);
//! - [`pages`]: the owner side of VRAM pages of each kind (copies in and out
//!   of the BAR, CPU faults), generic over the kind; a peer's alias of a
//!   page is core's, from the pagemap's description that [`driver`] gives;
//! - [`registry`]: module-wide state: GPUs by index, retired GPUs;
//! - [`debugfs`]: every file of a GPU's debugfs directory;
//! - [`stats`]: the event counters;
//! - `scale`: the scale benchmark behind two debugfs files (VRAM fill,
//!   allocation latency), with `CONFIG_RVRAM_SCALE_BENCH`;
//! - [`vram`]: VRAM geometry, which file owns a page, cgroup charges;
//! - [`dmirror`]: the `lib/test_hmm` ioctl ABI of `/dev/rvramN`;
//! - [`bo`]: VRAM buffer objects exported as dma-bufs.
//!
//! [`Pagemap`]: kernel::mm::pagemap::Pagemap

use kernel::{
    pci,
    prelude::*,
    InPlaceModule,
    ThisModule, //
};

mod bo;
mod debugfs;
mod dmirror;
mod driver;
mod gpu;
mod pages;
mod registry;
#[cfg(CONFIG_RVRAM_SCALE_BENCH)]
mod scale;
mod stats;
mod vram;

/// The module: the debugfs root, the PCI drivers, and the GPUs that outlive
/// their binding.
#[pin_data]
struct RvramModule {
    _debugfs: registry::DebugfsRoot,
    #[pin]
    _private: kernel::driver::Registration<pci::Adapter<driver::PrivateDriver>>,
    #[pin]
    _coherent: kernel::driver::Registration<pci::Adapter<driver::CoherentDriver>>,
    /// Dropped after the drivers, which unbind every GPU.
    _retired: registry::RetiredGpus,
}

impl InPlaceModule for RvramModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        // SAFETY: Called exactly once, before any other use of `REGISTRY`.
        unsafe { registry::REGISTRY.init() };
        try_pin_init!(Self {
            _debugfs: registry::DebugfsRoot::new(),
            _private <- kernel::driver::Registration::new(c"rvram", module),
            _coherent <- kernel::driver::Registration::new(c"rvram-coherent", module),
            _retired: registry::RetiredGpus,
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
}
