// SPDX-License-Identifier: GPL-2.0

//! The device memory (dmem) cgroup controller.
//!
//! Memory that a device manages itself, such as a GPU's VRAM, is not system
//! memory and the memory controller does not see it. The dmem controller
//! accounts it instead: a driver registers each memory region of a device as
//! a [`Region`], with its size and a name, and charges every allocation it
//! makes in the region on behalf of user space to the cgroup of the task
//! that asks for it ([`Region::try_charge`]), for as long as the memory is
//! held ([`Charge`]). An administrator reads the regions and their sizes in
//! the root cgroup's `dmem.capacity`, and bounds what a cgroup (with its
//! descendants) holds in a region with `dmem.max`: a charge that would go
//! over the limit of the cgroup or of one of its ancestors fails, and the
//! allocation with it. The usage is in `dmem.current`. See the "DMEM"
//! section of `Documentation/admin-guide/cgroup-v2.rst`.
//!
//! DRM drivers whose memory TTM manages get this through
//! `drmm_cgroup_register_region()` and TTM's resource allocation; this
//! module is for drivers that allocate device memory themselves. Regions
//! registered here have no reclaim callback: lowering `dmem.max` below a
//! cgroup's usage frees nothing, it only makes further charges fail until
//! enough memory has been released.
//!
//! Without `CONFIG_CGROUP_DMEM` the types still exist, and do nothing:
//! regions are not registered and every charge succeeds.
//!
//! C header: [`include/linux/cgroup_dmem.h`](srctree/include/linux/cgroup_dmem.h)

use crate::{
    bindings,
    error::{
        to_result,
        Result, //
    },
    fmt,
    prelude::*,
    sync::atomic::{
        Atomic,
        Full, //
    }, //
};
use core::{
    ops::Range,
    ptr, //
};

/// A region of device memory registered with the dmem cgroup controller.
///
/// Its name addresses the region in the cgroup interface files
/// (`dmem.capacity`, `dmem.max`, `dmem.current`...). DRM names its regions
/// `drm/<device>/<region>`, for example `drm/0000:03:00.0/vram0`; other
/// drivers use their own prefix the same way. Names should be unique: the
/// limit files find a region by its name, and of two regions with the same
/// name they find the one registered first.
///
/// Dropping the region unregisters it, which may sleep. What happens to the
/// charges still held then is described at [`Charge`].
///
/// # Examples
///
/// ```
/// use kernel::{cgroup::dmem::Region, prelude::*};
///
/// // The device's 1 MiB of memory, listed in `dmem.capacity` as
/// // "rust-doctest/0/vram 1048576".
/// let vram = Region::register(1 << 20, fmt!("rust-doctest/{}/vram", 0))?;
///
/// // 4 KiB charged to the cgroup of the current task...
/// let charge = vram.try_charge(4096)?;
/// assert_eq!(charge.size(), 4096);
/// // ... and uncharged.
/// drop(charge);
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// `region` is null, or a region returned by `dmem_cgroup_register_region()`
/// that is unregistered only when the [`Region`] is dropped. It is null
/// exactly when `CONFIG_CGROUP_DMEM` is not set.
pub struct Region {
    region: *mut bindings::dmem_cgroup_region,
}

// SAFETY: The C side protects a region with its own locks and RCU: it can be
// charged, and unregistered, from any thread.
unsafe impl Send for Region {}

// SAFETY: A shared reference only allows `try_charge()`, which any number of
// threads may call concurrently.
unsafe impl Sync for Region {}

impl Region {
    /// Registers a region of `size` bytes named `name` with the dmem cgroup
    /// controller.
    ///
    /// Fails with `EINVAL` if `size` is 0, and with `ENOMEM`. May sleep.
    #[cfg_attr(not(CONFIG_CGROUP_DMEM), allow(unused_variables))]
    pub fn register(size: u64, name: fmt::Arguments<'_>) -> Result<Self> {
        if size == 0 {
            return Err(EINVAL);
        }

        // Without `CONFIG_CGROUP_DMEM`, `dmem_cgroup_register_region()` is a
        // stub that returns NULL. It is variadic, so no helper can wrap it:
        // do what it does instead.
        #[cfg(not(CONFIG_CGROUP_DMEM))]
        let region = ptr::null_mut();

        #[cfg(CONFIG_CGROUP_DMEM)]
        let region = {
            let init = bindings::dmem_cgroup_init {
                size,
                ops: ptr::null(),
                reclaim_priv: ptr::null_mut(),
            };

            // SAFETY: `init` is valid for the duration of the call, which
            // copies what it needs from it. The "%pA" format string expects
            // a pointer to `fmt::Arguments`, which is what we're passing as
            // the last argument; the name is formatted before the call
            // returns.
            let region = crate::error::from_err_ptr(unsafe {
                bindings::dmem_cgroup_register_region(
                    &init,
                    c"%pA".as_char_ptr(),
                    ptr::from_ref(&name).cast::<c_void>(),
                )
            })?;

            // NULL only for a size of 0, which was ruled out above.
            if region.is_null() {
                return Err(EINVAL);
            }
            region
        };

        // INVARIANT: `region` was just registered, or is null without
        // `CONFIG_CGROUP_DMEM`; it is unregistered in `drop()`.
        Ok(Self { region })
    }

    /// Charges `size` bytes of this region to the dmem cgroup of the current
    /// task.
    ///
    /// The charge is for the cgroup the task is in now, even if the task
    /// moves later, until the returned [`Charge`] is dropped. It fails with
    /// `ENOSPC` if it would take the cgroup, or one of its ancestors, over
    /// its `dmem.max` for this region (which is what TTM returns for an
    /// allocation it does not evict for), and with `ENOMEM`. May sleep.
    pub fn try_charge(&self, size: u64) -> Result<Charge> {
        if self.region.is_null() {
            // INVARIANT: A null pool charges nothing.
            return Ok(Charge {
                pool: ptr::null_mut(),
                size,
            });
        }

        let mut pool: *mut bindings::dmem_cgroup_pool_state = ptr::null_mut();
        let mut limit_pool: *mut bindings::dmem_cgroup_pool_state = ptr::null_mut();

        // SAFETY: By the type invariant, `self.region` is a registered
        // region, not unregistered while `self` lives. `pool` and
        // `limit_pool` are valid for writes.
        let ret = unsafe {
            bindings::dmem_cgroup_try_charge(self.region, size, &mut pool, &mut limit_pool)
        };
        match to_result(ret) {
            // INVARIANT: On success, `pool` is the pool charged with `size`
            // bytes, with references to itself and its cgroup that
            // `dmem_cgroup_uncharge()` drops.
            Ok(()) => Ok(Charge { pool, size }),
            Err(e) if e == EAGAIN => {
                // SAFETY: On `-EAGAIN`, `limit_pool` holds a reference to the
                // pool whose limit was hit (a driver that evicts would pick
                // what to evict with it). It is ours to drop, and dropped
                // once.
                unsafe { bindings::dmem_cgroup_pool_state_put(limit_pool) };
                Err(ENOSPC)
            }
            Err(e) => Err(e),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, `self.region` is null (accepted and
        // ignored) or a registered region, unregistered only here.
        unsafe { bindings::dmem_cgroup_unregister_region(self.region) };
    }
}

/// A charge of device memory to a dmem cgroup, made by
/// [`Region::try_charge`] and uncharged when dropped.
///
/// A driver keeps it with the memory it accounts for (a buffer object, for
/// example), so that the memory is uncharged when it is freed. Dropping it
/// does not sleep.
///
/// A charge may outlive its [`Region`], as an allocation may outlive the
/// binding of its device (user space can hold a buffer after the device was
/// unbound). When the region is unregistered:
///
/// - it disappears from `dmem.capacity` and from every cgroup's files: the
///   charges still held no longer show in any `dmem.current`, and limits
///   set for the region are forgotten;
/// - each charge keeps the state it was made against alive (the controller
///   counts references to its pool, and each pool to the region), so
///   dropping it later uncharges the way it would have, without touching
///   freed memory;
/// - a region registered again with the same name (the device binds again)
///   is a new region: its usage starts at zero, the old charges are not
///   counted against it, and its limits must be set again.
///
/// A charge also keeps its cgroup: when the cgroup is removed, it lingers
/// as a dying cgroup until its last charge is dropped.
///
/// # Examples
///
/// ```
/// use kernel::{
///     cgroup::dmem::{Charge, Region},
///     prelude::*,
/// };
///
/// /// Device memory handed to user space.
/// struct Buffer {
///     // ... what backs the buffer ...
///     _charge: Charge,
/// }
///
/// fn alloc_buffer(vram: &Region, size: u64) -> Result<Buffer> {
///     // `ENOSPC` when the caller's cgroup is at its `dmem.max`.
///     let charge = vram.try_charge(size)?;
///     // ... allocate `size` bytes of device memory ...
///     Ok(Buffer { _charge: charge })
/// }
/// ```
///
/// # Invariants
///
/// `pool` is null and charges nothing, or it is the pool that
/// `dmem_cgroup_try_charge()` charged `size` bytes to, and the [`Charge`]
/// owns the references to the pool and to its cgroup that it returned.
#[must_use = "the memory is uncharged when the `Charge` is dropped"]
pub struct Charge {
    pool: *mut bindings::dmem_cgroup_pool_state,
    size: u64,
}

// SAFETY: A charge can be dropped from any thread: uncharging only updates
// atomic counters and drops references.
unsafe impl Send for Charge {}

// SAFETY: A shared reference only gives the size.
unsafe impl Sync for Charge {}

impl Charge {
    /// Returns the number of bytes charged.
    pub fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        // SAFETY: By the type invariant, `self.pool` is null (ignored) or the
        // pool charged with `self.size` bytes. `dmem_cgroup_uncharge()`
        // uncharges them and drops the references to the pool and its cgroup
        // that the charge owns; nothing uses them afterwards.
        unsafe { bindings::dmem_cgroup_uncharge(self.pool, self.size) };
    }
}

/// A row of slots that each hold at most one charge of the same size, and
/// that are filled and emptied without a lock.
///
/// For memory that is charged in fixed units and given back where no lock
/// may be taken: a driver whose device pages are freed by core mm, in
/// whatever context drops the last reference to a page (process, softirq or
/// hardirq), keeps one slot per page. A slot costs a pointer, against a
/// [`Charge`] per allocation plus a structure to find it in.
///
/// # Examples
///
/// ```
/// use kernel::{
///     cgroup::dmem::{ChargeSlots, Region},
///     prelude::*,
/// };
///
/// let vram = Region::register(1 << 20, fmt!("rust-doctest/{}/slots", 0))?;
/// // One slot per 4 KiB page of the region.
/// let pages = ChargeSlots::new(256, 4096)?;
/// // Pages 8 to 11, allocated for the current task, are charged to its cgroup...
/// pages.charge(&vram, 8..12)?;
/// // ... and given back one by one as they are freed, in any context.
/// pages.release(8..10);
/// pages.release(10..12);
/// # Ok::<(), Error>(())
/// ```
///
/// # Invariants
///
/// Each slot is null, or holds a pool that `dmem_cgroup_try_charge()`
/// charged `unit` bytes to, with the references to the pool and its cgroup
/// that it returned, which the slot owns.
pub struct ChargeSlots {
    slots: KVVec<Atomic<*mut bindings::dmem_cgroup_pool_state>>,
    unit: u64,
}

impl ChargeSlots {
    /// `nr` empty slots for charges of `unit` bytes.
    pub fn new(nr: usize, unit: u64) -> Result<Self> {
        let mut slots = KVVec::with_capacity(nr, GFP_KERNEL)?;
        for _ in 0..nr {
            slots.push(Atomic::new(ptr::null_mut()), GFP_KERNEL)?;
        }
        // INVARIANT: Every slot is empty.
        Ok(Self { slots, unit })
    }

    /// The number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are no slots.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Charges `unit` bytes in `region` to the current task's cgroup for
    /// every slot in `range`, in order.
    ///
    /// A slot that already held a charge gives it back first: the memory
    /// it stands for was handed out again without being released. `ENOSPC`
    /// once a charge would take the cgroup or one of its ancestors over
    /// `dmem.max`, `EINVAL` for a range past the last slot: the slots
    /// charged so far stay charged, until [`ChargeSlots::release`]. May
    /// sleep (the controller may allocate the cgroup's pool).
    pub fn charge(&self, region: &Region, range: Range<usize>) -> Result {
        let slots = self.slots.get(range).ok_or(EINVAL)?;
        for slot in slots {
            let charge = core::mem::ManuallyDrop::new(region.try_charge(self.unit)?);
            // INVARIANT: The slot takes over what `charge` owned (a null
            // pool charges nothing); the charge it held, if any, is
            // dropped below.
            let old = slot.xchg(charge.pool, Full);
            // SAFETY: `old` came out of the slot, which owned it (type
            // invariant): null, or charged `unit` bytes.
            drop(unsafe { Self::charge_of(old, self.unit) });
        }
        Ok(())
    }

    /// Gives back the charges of the slots in `range` (empty slots and
    /// slots past the last are left alone).
    ///
    /// Takes no lock and does not sleep: it may be called in any context.
    pub fn release(&self, range: Range<usize>) {
        let start = range.start.min(self.slots.len());
        let end = range.end.clamp(start, self.slots.len());
        for slot in &self.slots[start..end] {
            let old = slot.xchg(ptr::null_mut(), Full);
            // SAFETY: As in `charge`: `old` came out of the slot.
            drop(unsafe { Self::charge_of(old, self.unit) });
        }
    }

    /// The charge a slot held.
    ///
    /// # Safety
    ///
    /// `pool` is null, or was taken out of a slot and owns a charge of
    /// `unit` bytes.
    unsafe fn charge_of(pool: *mut bindings::dmem_cgroup_pool_state, unit: u64) -> Charge {
        // INVARIANT: Null charges nothing; otherwise, the safety
        // requirement.
        Charge { pool, size: unit }
    }
}

impl Drop for ChargeSlots {
    fn drop(&mut self) {
        self.release(0..self.slots.len());
    }
}
