// SPDX-License-Identifier: GPL-2.0

//! PCI peer-to-peer DMA (P2PDMA) providers.
//!
//! A memory BAR of a device can be reached by other devices' DMA directly,
//! when the PCI topology allows it. The core describes such a BAR with a
//! provider (`struct p2pdma_provider`), which importers and core mm use to
//! decide, for each client device, whether and how it can reach the BAR
//! (`pci_p2pdma_map_type()`), without struct pages for the BAR.
//!
//! The providers are device-managed: they exist from the first
//! [`Device::p2pdma_provider`] call until after the driver's `unbind`.
//! [`P2pProvider`] borrows the bound device, so safe code cannot keep one
//! longer.
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
use core::{
    marker::PhantomData,
    ptr::NonNull, //
};

impl Device<device::Bound> {
    /// The P2P provider of memory BAR `bar` (`pcim_p2pdma_init()`,
    /// `pcim_p2pdma_provider()`).
    ///
    /// `EINVAL` if `bar` is not a memory BAR of the device; `EOPNOTSUPP`
    /// without `CONFIG_PCI_P2PDMA` or if the device's BARs cannot be mapped.
    ///
    /// # Examples
    ///
    /// ```
    /// # use kernel::{device::Bound, pci, prelude::*};
    /// fn provider(pdev: &pci::Device<Bound>) -> Result {
    ///     let p = pdev.p2pdma_provider(2)?;
    ///     let _ = p.as_raw();
    ///     Ok(())
    /// }
    /// ```
    pub fn p2pdma_provider(&self, bar: u32) -> Result<P2pProvider<'_>> {
        if bar >= bindings::PCI_STD_NUM_BARS {
            return Err(EINVAL);
        }
        // SAFETY: `self` is a bound PCI device. What this sets up is
        // device-managed; a second call finds it done.
        to_result(unsafe { bindings::pcim_p2pdma_init(self.as_raw()) })?;
        // SAFETY: As above, and `pcim_p2pdma_init()` succeeded; `bar` is a
        // valid BAR index.
        let provider = unsafe { bindings::pcim_p2pdma_provider(self.as_raw(), bar as i32) };
        // INVARIANT: The provider of `bar` of `self`, device-managed.
        Ok(P2pProvider {
            ptr: NonNull::new(provider).ok_or(EINVAL)?,
            _dev: PhantomData,
        })
    }
}

/// The P2P provider of a memory BAR of a bound PCI device.
///
/// # Invariants
///
/// `ptr` is the provider of a BAR of a device that stays bound for `'a`.
pub struct P2pProvider<'a> {
    ptr: NonNull<bindings::p2pdma_provider>,
    _dev: PhantomData<&'a Device<device::Bound>>,
}

impl P2pProvider<'_> {
    /// The C provider, valid while the device is bound.
    pub fn as_raw(&self) -> NonNull<bindings::p2pdma_provider> {
        self.ptr
    }
}
