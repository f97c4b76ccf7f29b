// SPDX-License-Identifier: GPL-2.0

//! PCI peer-to-peer DMA (P2PDMA) providers.
//!
//! A device can publish (part of) a memory BAR as P2PDMA memory: the core
//! creates `MEMORY_DEVICE_PCI_P2PDMA` ZONE_DEVICE pages for it, mapped in
//! the kernel direct map (uncached), which other devices' DMA mappings can
//! target directly when the PCI topology allows it.
//!
//! Everything `pci_p2pdma_add_resource()` sets up is device-managed and
//! torn down after the driver's `unbind`; that teardown waits for every
//! allocation from the pool to be freed. [`P2pMem`] borrows the bound
//! device, so an allocation cannot outlive the binding in safe code.
//!
//! C header: [`include/linux/pci-p2pdma.h`](srctree/include/linux/pci-p2pdma.h)

use super::Device;
use crate::{
    bindings,
    device,
    error::{
        to_result,
        Result, //
    },
    prelude::*, //
};
use core::ptr::NonNull;

impl Device<device::Bound> {
    /// Publishes `size` bytes of `bar` at `offset` as P2PDMA memory
    /// (`size == 0`: the rest of the BAR).
    ///
    /// The range must be 2 MiB aligned (a memory-hotplug subsection) and
    /// within the BAR: otherwise `EINVAL`; `EOPNOTSUPP` without
    /// `CONFIG_PCI_P2PDMA`. The pool is not published for other drivers to
    /// find; [`Self::alloc_p2pmem`] allocates from it. Undone automatically
    /// when the device is unbound.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::{device::Bound, pci, prelude::*};
    /// fn publish(pdev: &pci::Device<Bound>) -> Result {
    ///     pdev.p2pdma_add_resource(2, 0, 0)?;
    ///     let mem = pdev.alloc_p2pmem(4096)?;
    ///     assert!(mem.phys_addr() >= pdev.resource_start(2)?);
    ///     Ok(())
    /// }
    /// ```
    pub fn p2pdma_add_resource(&self, bar: u32, size: usize, offset: u64) -> Result {
        if !Self::bar_is_valid(bar) {
            return Err(EINVAL);
        }
        // SAFETY: `self` is a bound PCI device; `bar` is a valid index. The
        // state this creates is device-managed.
        to_result(unsafe {
            bindings::pci_p2pdma_add_resource(self.as_raw(), bar as i32, size, offset)
        })
    }

    fn bar_is_valid(bar: u32) -> bool {
        bar < bindings::PCI_STD_NUM_BARS
    }

    /// Allocates `size` bytes of this device's P2PDMA memory.
    ///
    /// `ENOMEM` when the pool (see [`Self::p2pdma_add_resource`]) has no
    /// such run free, or the device has none.
    pub fn alloc_p2pmem(&self, size: usize) -> Result<P2pMem<'_>> {
        if size == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `self` is a bound PCI device.
        let addr = unsafe { bindings::pci_alloc_p2pmem(self.as_raw(), size) };
        let addr = NonNull::new(addr.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: Just allocated from `self`'s pool, `size` bytes.
        Ok(P2pMem {
            pdev: self,
            addr,
            size,
        })
    }

    /// The P2PDMA distance from this provider to `client`: `None` when DMA
    /// between them cannot go peer to peer, otherwise the number of PCI
    /// hops (0 when `client` is this device).
    pub fn p2pdma_distance(&self, client: &device::Device) -> Option<u32> {
        // SAFETY: Both devices are valid.
        let d = unsafe { bindings::pci_p2pdma_distance(self.as_raw(), client.as_raw(), false) };
        u32::try_from(d).ok()
    }
}

/// An allocation of P2PDMA memory.
///
/// # Invariants
///
/// `addr` is a direct-map address returned by `pci_alloc_p2pmem(pdev, size)`
/// and not freed yet.
pub struct P2pMem<'a> {
    pdev: &'a Device<device::Bound>,
    addr: NonNull<u8>,
    size: usize,
}

// SAFETY: The allocation may be freed from any thread.
unsafe impl Send for P2pMem<'_> {}
// SAFETY: `P2pMem` offers no interior mutability.
unsafe impl Sync for P2pMem<'_> {}

impl P2pMem<'_> {
    /// The size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The CPU physical address (the BAR address).
    pub fn phys_addr(&self) -> u64 {
        // SAFETY: `addr` is a direct-map address (type invariant).
        unsafe { bindings::pci_p2pmem_virt_to_phys(self.addr.as_ptr().cast()) }
    }

    /// The page frame number of the first page.
    pub fn pfn(&self) -> usize {
        (self.phys_addr() >> crate::page::PAGE_SHIFT) as usize
    }
}

impl Drop for P2pMem<'_> {
    fn drop(&mut self) {
        // SAFETY: Allocated from `pdev`'s pool with this size (type invariant).
        unsafe {
            bindings::pci_free_p2pmem(self.pdev.as_raw(), self.addr.as_ptr().cast(), self.size)
        };
    }
}
