// SPDX-License-Identifier: GPL-2.0

//! The event counters of a GPU, shown in `/sys/kernel/debug/rvram/rvramN/stats`.

use kernel::sync::atomic::{
    Atomic,
    Relaxed, //
};

/// Defines [`Stats`] from one list: each counter's field, its name in the
/// debugfs file, and what it counts.
macro_rules! counters {
    ($($(#[doc = $doc:expr])+ $field:ident => $name:literal,)+) => {
        /// Event counters of a GPU, shown in debugfs in this order.
        pub(crate) struct Stats {
            $($(#[doc = $doc])+ pub(crate) $field: Atomic<u64>,)+
        }

        impl Stats {
            pub(crate) fn new() -> Self {
                Self {
                    $($field: Atomic::new(0),)+
                }
            }

            /// One `name value` line per counter.
            pub(crate) fn show(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                $(writeln!(f, concat!($name, " {}"), self.$field.load(Relaxed))?;)+
                Ok(())
            }
        }
    };
}

counters! {
    /// Folios migrated into VRAM.
    to_dev => "migrated_to_vram",
    /// Folios migrated out of VRAM (CPU faults, `HMM_DMIRROR_MIGRATE_TO_SYS`).
    to_sys => "migrated_to_ram",
    /// CPU faults on device-private VRAM pages.
    cpu_faults => "cpu_faults",
    /// VRAM or system memory allocations that failed.
    alloc_fail => "alloc_failures",
    /// Pages evicted by unbind or `HMM_DMIRROR_RELEASE`.
    evicted => "evicted",
    /// Device reads and writes of another GPU's VRAM through an alias.
    alias_access => "alias_accesses",
    /// Pages copied into VRAM by migration.
    pages_to_vram => "pages_to_vram",
    /// Pages copied out of VRAM into system memory: by CPU (or non-alias
    /// device) faults, `HMM_DMIRROR_MIGRATE_TO_SYS` and eviction.
    pages_to_ram => "pages_to_ram",
    /// Time spent serving faults on VRAM pages by migration, in ns.
    fault_ns => "fault_ns",
    /// VRAM buffer objects exported as dma-bufs.
    dmabufs => "dmabufs_exported",
    /// VRAM buffer objects released.
    dmabufs_freed => "dmabufs_released",
}
