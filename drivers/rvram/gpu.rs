// SPDX-License-Identifier: GPL-2.0

//! A GPU: what outlives its binding while files are open, its state, its
//! VRAM's pagemap, and the eviction of that VRAM.

use crate::{
    pages::{
        CoherentPages,
        PrivatePages,
        VramKind, //
    },
    stats::Stats,
};
use kernel::{
    cgroup::dmem,
    device::{
        self,
        Bound, //
    },
    mm::{
        migrate::{
            Eviction, //
        },
        pagemap::{
            DeviceFolio,
            Owner,
            Pagemap,
            UsedWalk,
            MAX_FOLIO_ORDER, //
        },
    },
    page::PAGE_SIZE,
    pci,
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{
            Acquire,
            Atomic,
            Relaxed,
            Release, //
        },
        new_mutex,
        srcu::{
            self,
            new_srcu, //
        },
        Mutex,
        Srcu, //
    },
    task::might_sleep,
    time::{
        delay::fsleep,
        Delta,
        Instant,
        Monotonic, //
    },
};

/// Device names, which are also the character device names: a GPU's is
/// `NAMES[index]`.
pub(crate) const NAMES: [&CStr; 8] = [
    c"rvram0", c"rvram1", c"rvram2", c"rvram3", c"rvram4", c"rvram5", c"rvram6", c"rvram7",
];

/// A GPU's VRAM, as the pagemap of its kind.
pub(crate) enum Vram {
    /// Device-private memory, with aliases in the BAR for peers.
    Private(Pin<KBox<Pagemap<PrivatePages>>>),
    /// Device-coherent memory over the BAR.
    Coherent(Pin<KBox<Pagemap<CoherentPages>>>),
}

/// Runs `$body` with `$pm` bound to the GPU's pagemap, whatever its kind
/// (the body is compiled for each kind).
macro_rules! with_vram {
    ($vram:expr, $pm:ident => $body:expr) => {
        match $vram {
            $crate::gpu::Vram::Private(pm) => {
                let $pm = &**pm;
                $body
            }
            $crate::gpu::Vram::Coherent(pm) => {
                let $pm = &**pm;
                $body
            }
        }
    };
}
pub(crate) use with_vram;

impl Vram {
    pub(crate) fn owner(&self) -> Owner {
        with_vram!(self, pm => pm.owner())
    }

    pub(crate) fn stats(&self) -> &Stats {
        with_vram!(self, pm => pm.data().stats())
    }

    pub(crate) fn nr_pages(&self) -> usize {
        with_vram!(self, pm => pm.nr_pages())
    }

    pub(crate) fn nr_used(&self) -> usize {
        with_vram!(self, pm => pm.nr_used())
    }

    pub(crate) fn first_pfn(&self) -> usize {
        with_vram!(self, pm => pm.pfn_range().start)
    }
}

/// Keeps a GPU bound while it lives ([`Gpu::hold_bound`]): unbind waits
/// for it, and nothing else does.
pub(crate) struct BoundGuard<'a> {
    _srcu: srcu::Guard<'a>,
}

/// What outlives the binding while files are open: the pagemap.
#[pin_data]
pub(crate) struct Gpu {
    pub(crate) index: usize,
    /// The PCI device, as the client named in alias faults.
    pub(crate) dev: ARef<device::Device>,
    pub(crate) vram: Vram,
    /// Exports VRAM buffer objects (`ENODEV` once unbound); device-private
    /// VRAM only.
    pub(crate) exports: Option<pci::ExportHandle>,
    /// VRAM as a dmem cgroup region, which buffer objects and the pages
    /// migrated into VRAM are charged to; `None` once unbound.
    #[pin]
    pub(crate) dmem: Mutex<Option<dmem::Region>>,
    /// Set once by unbind: no migration into VRAM or export starts after.
    unbound: Atomic<bool>,
    /// Migrations into VRAM and buffer exports are its readers, which run
    /// side by side however long they take (a VRAM-sized one included);
    /// unbind waits for those that started before it set `unbound`, as
    /// `drm_dev_unplug()` does for `drm_dev_enter()`.
    #[pin]
    bound: Srcu,
    /// The last id handed to an open file ([`Gpu::new_file_id`]).
    pub(crate) files: Atomic<u32>,
    /// Who keeps this GPU's aliases off: they are off while anyone does.
    /// Held while a file changes its flag, and by the debugfs switch.
    #[pin]
    pub(crate) aliases_off: Mutex<AliasesOff>,
}

/// Who keeps a GPU's aliases off ([`Gpu::aliases_off`]).
#[derive(Default)]
pub(crate) struct AliasesOff {
    /// How many open files set `HMM_DMIRROR_FLAG_NO_ALIAS`.
    files: u32,
    /// Whether the administrator turned debugfs `p2p_alias` off.
    switch: bool,
}

impl AliasesOff {
    /// Whether anyone keeps the aliases off.
    fn any(&self) -> bool {
        self.files > 0 || self.switch
    }
}

impl Gpu {
    /// The state of the GPU `pdev` at `index`, whose VRAM is `vram`:
    /// registers that VRAM as a dmem cgroup region,
    /// `rvram/0000:00:05.0/vram` in the cgroup files, as DRM names its
    /// regions `drm/<device>/<region>`, which migrations into VRAM of
    /// either kind (and buffer objects) are charged to.
    pub(crate) fn new(
        index: usize,
        pdev: &pci::Device<Bound>,
        vram: Vram,
        exports: Option<pci::ExportHandle>,
    ) -> impl PinInit<Self, Error> + '_ {
        pin_init::pin_init_scope(move || {
            let dev: &device::Device<Bound> = pdev.as_ref();
            let size = (vram.nr_pages() * PAGE_SIZE) as u64;
            let region = dmem::Region::register(size, fmt!("rvram/{}/vram", dev.name()))?;
            let dev: &device::Device = AsRef::<device::Device<Bound>>::as_ref(pdev);
            Ok(try_pin_init!(Gpu {
                index,
                dev: dev.into(),
                vram,
                exports,
                dmem <- new_mutex!(Some(region)),
                unbound: Atomic::new(false),
                bound <- new_srcu!(),
                files: Atomic::new(0),
                aliases_off <- new_mutex!(AliasesOff::default()),
            }))
        })
    }

    /// Unbinds the GPU of `pdev`: no new migrations into VRAM (open files
    /// get `ENODEV` from now on), out of the cgroup files, no new aliases,
    /// and every page evicted from VRAM while the BAR is still mapped.
    /// `EBUSY` if pages users can pin ([`VramKind::PINNABLE`]) stay in use:
    /// the caller then keeps the GPU's pagemap until they are freed.
    pub(crate) fn unbind(&self, pdev: &pci::Device<Bound>) -> Result {
        let name = NAMES[self.index].to_str().unwrap_or("rvram");
        self.set_unbound();
        // Out of the cgroup files, so that limits set after a rebind apply
        // to the new region of the same name. Buffers that outlive the
        // binding are uncharged when they go.
        drop(self.dmem.lock().take());
        // No new aliases; eviction below invalidates every mirror that holds
        // one, before the P2P provider goes with the device.
        if let Vram::Private(pm) = &self.vram {
            pm.revoke_aliases();
        }
        let ev = self.evict_all(pdev.as_ref())?;
        dev_info!(
            pdev,
            "{name}: removed, {} pages evicted in {} us ({} of {} pages scanned in {} \
             pass(es), {} chunk and {} page bits walked)\n",
            ev.pages,
            ev.us,
            ev.scanned,
            self.vram.nr_pages(),
            ev.passes,
            ev.walk.chunk_bits,
            ev.walk.page_bits
        );
        Ok(())
    }

    /// Counts a file that starts (`off`) or stops keeping this GPU's aliases
    /// off in `who`, the locked [`Gpu::aliases_off`].
    pub(crate) fn count_aliases_off(&self, who: &mut AliasesOff, off: bool) -> Result {
        let files = if off {
            who.files.checked_add(1).ok_or(EOVERFLOW)?
        } else {
            who.files.saturating_sub(1)
        };
        self.set_aliases_off(who, AliasesOff { files, ..*who })
    }

    /// Turns the debugfs `p2p_alias` switch off (`off`) or on in `who`, the
    /// locked [`Gpu::aliases_off`]. The files that keep the aliases off
    /// still do when the switch turns them on.
    pub(crate) fn switch_aliases_off(&self, who: &mut AliasesOff, off: bool) -> Result {
        self.set_aliases_off(
            who,
            AliasesOff {
                switch: off,
                ..*who
            },
        )
    }

    /// Moves `who` to `new`: the aliases are revoked when the first keeps
    /// them off and restored when the last stops. `ENODEV`, and `who`
    /// unchanged, once unbound: unbind revoked them for good.
    fn set_aliases_off(&self, who: &mut AliasesOff, new: AliasesOff) -> Result {
        let _bound = self.hold_bound()?;
        if let Vram::Private(pm) = &self.vram {
            // Device-coherent VRAM has no aliases.
            match (who.any(), new.any()) {
                (false, true) => pm.revoke_aliases(),
                (true, false) => pm.restore_aliases(),
                _ => {}
            }
        }
        *who = new;
        Ok(())
    }

    /// Whether the device was unbound. Takes no lock: no ioctl waits here
    /// for another's migration.
    pub(crate) fn is_unbound(&self) -> bool {
        self.unbound.load(Acquire)
    }

    /// Holds off unbind until the guard is dropped, for a migration into
    /// VRAM or a buffer export; `ENODEV` once unbound. Waits for nothing.
    pub(crate) fn hold_bound(&self) -> Result<BoundGuard<'_>> {
        let guard = self.bound.read_lock();
        if self.unbound.load(Acquire) {
            return Err(ENODEV);
        }
        Ok(BoundGuard { _srcu: guard })
    }

    /// Marks the GPU unbound and waits for every holder of
    /// [`Gpu::hold_bound`] that saw it bound: no migration into VRAM or
    /// export runs after this returns.
    pub(crate) fn set_unbound(&self) {
        self.unbound.store(true, Release);
        self.bound.synchronize();
    }

    /// A new id for an open file, never 0 ([`Owners`]). Ids wrap after
    /// 2^32 opens; a page still in VRAM from a file that long closed could
    /// then be released by the file that reuses its id.
    ///
    /// [`Owners`]: crate::vram::Owners
    pub(crate) fn new_file_id(&self) -> u32 {
        loop {
            let id = self.files.fetch_add(1, Relaxed).wrapping_add(1);
            if id != 0 {
                return id;
            }
        }
    }

    /// Moves every page out of VRAM, retrying what cannot move yet. A
    /// device-private page's data has no other home once the BAR is
    /// unmapped, so those are retried until they move, as long as that
    /// takes (no system memory, say), with a log line after
    /// [`EVICT_PATIENCE`] and then one a minute. Pages users can pin
    /// ([`VramKind::PINNABLE`]) are retried for [`EVICT_PATIENCE`]; `EBUSY`
    /// if some are still in use then.
    pub(crate) fn evict_all(&self, dev: &device::Device) -> Result<Evicted> {
        with_vram!(&self.vram, pm => self.evict_pagemap(dev, pm))
    }

    /// Evicts round by round, each over [`EVICT_CHUNK`] pages starting at
    /// the next page in use: the cost is in the pages used, not in the
    /// size of VRAM, of which an unbind may find only a few MiB in use.
    fn evict_pagemap<T: VramKind>(&self, dev: &device::Device, pm: &Pagemap<T>) -> Result<Evicted> {
        let start = Instant::<Monotonic>::now();
        let mut done = Evicted::default();
        // Minutes of waiting already said in the log.
        let mut said = 0;
        loop {
            let pass = Instant::<Monotonic>::now();
            done.passes += 1;
            let mut next = 0;
            while let Some(used) = pm.next_used_walk(next, &mut done.walk) {
                // Rounds start on a folio boundary: none straddles two.
                let first = used - used % PMD_PAGES;
                let count = EVICT_CHUNK.min(pm.nr_pages() - first);
                // Out of memory for the round's arrays: the next try may
                // have it.
                done.pages += evict_range(pm, first, count, |_| true).map_or(0, |r| r.pages);
                done.scanned += count;
                next = first + count;
            }
            // The passes' time, without the waits between them.
            let us = u64::try_from(pass.elapsed().as_micros_ceil()).unwrap_or(u64::MAX);
            done.us = done.us.saturating_add(us);
            let used = pm.nr_used();
            if used == 0 {
                return Ok(done);
            }
            let waited = start.elapsed();
            if waited <= EVICT_PATIENCE {
                fsleep(Delta::from_millis(10));
                continue;
            }
            if T::PINNABLE {
                return Err(EBUSY);
            }
            let minutes = waited.as_millis() / 60_000;
            if said == 0 || minutes >= said {
                dev_warn!(
                    dev,
                    "{}: unbind waits for {used} VRAM pages that cannot move to system memory yet\n",
                    NAMES[self.index].to_str().unwrap_or("rvram")
                );
                said = minutes + 1;
            }
            fsleep(Delta::from_millis(100));
        }
    }
}

/// What [`evict_range`] did.
pub(crate) struct RangeEvicted {
    /// Pages moved to system memory.
    pub(crate) pages: usize,
    /// Whether a folio stayed for want of system memory.
    pub(crate) no_memory: bool,
}

/// The one eviction, for unbind and `HMM_DMIRROR_RELEASE`: moves the folios
/// of VRAM pages `first..first + count` that `pick` selects and that can
/// move now to system memory, wherever they are mapped. A folio that is
/// locked or pinned, or for which there is no system memory at the moment,
/// stays. Only the folios in the range are collected (unmapped and
/// locked): other pages' mappings are not touched.
pub(crate) fn evict_range<T: VramKind>(
    pm: &Pagemap<T>,
    first: usize,
    count: usize,
    pick: impl Fn(&DeviceFolio<T>) -> bool,
) -> Result<RangeEvicted> {
    let mut ev = Eviction::collect(pm, first, count)?;
    let mut no_memory = false;
    for i in 0..ev.len() {
        let Some((folio, _)) = ev.source(i) else {
            continue;
        };
        if !pick(folio) {
            continue;
        }
        match T::move_out(pm, folio) {
            Ok(new) => ev.set_system(i, new)?,
            Err(e) if e == ENOMEM => no_memory = true,
            // The BAR did not read back: the folio stays where its data is.
            Err(_) => {}
        }
        // VRAM may hold 64 GiB: a scheduling point per folio.
        might_sleep();
    }
    let pages = ev.finish();
    let stats = pm.data().stats();
    stats.evicted.fetch_add(pages as u64, Relaxed);
    stats.pages_to_ram.fetch_add(pages as u64, Relaxed);
    Ok(RangeEvicted { pages, no_memory })
}

/// What an eviction did.
#[derive(Default)]
pub(crate) struct Evicted {
    /// Pages moved to system memory.
    pub(crate) pages: usize,
    /// VRAM pages that the eviction rounds looked at, in all passes.
    pub(crate) scanned: usize,
    /// The bits of the allocator's bitmaps that finding the pages in use
    /// looked at, in all passes.
    pub(crate) walk: UsedWalk,
    /// Passes over the pages in use: more than one when some could not
    /// move at first.
    pub(crate) passes: usize,
    /// Time the passes took, in microseconds, without the waits between
    /// them (what is left for later passes is what could not move yet).
    pub(crate) us: u64,
}

/// VRAM pages collected per eviction round: a multiple of the largest folio
/// ([`PMD_PAGES`]), so that no folio straddles two rounds, and small
/// enough that the round's arrays stay two 64 KiB allocations whatever the
/// VRAM size.
pub(crate) const EVICT_CHUNK: usize = 8192;

/// Pages in a PMD-sized folio, the largest VRAM folio (512 with 4 KiB
/// pages, 2048 with 16 KiB ones).
pub(crate) const PMD_PAGES: usize = 1 << MAX_FOLIO_ORDER;
const _: () = assert!(EVICT_CHUNK % PMD_PAGES == 0);

/// How long unbind retries pages that users can pin before it gives up on
/// them ([`retire`]), and waits for device-private pages before it says so.
///
/// [`retire`]: crate::registry::retire
const EVICT_PATIENCE: Delta = Delta::from_secs(10);
