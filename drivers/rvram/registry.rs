// SPDX-License-Identifier: GPL-2.0

//! Module-wide state: the debugfs root, the bound GPUs by index, and the
//! unbound GPUs whose VRAM pages are still in use.

use crate::gpu::{
    Gpu,
    NAMES, //
};
use kernel::{
    debugfs,
    device::Bound,
    pci,
    prelude::*,
    sync::Arc,
    time::{
        delay::fsleep,
        Delta,
        Instant,
        Monotonic, //
    },
};

/// A debugfs directory of rvram: its files hold the module while open.
pub(crate) type Dir = debugfs::Dir<crate::LocalModule>;

/// Module-wide state: the debugfs root and the bound GPUs by index.
pub(crate) struct Registry {
    pub(crate) root: Option<Dir>,
    pub(crate) gpus: [Option<Arc<Gpu>>; NAMES.len()],
    /// Bit `i` is set while a probe holds index `i` ([`Slot`]).
    probing: u32,
    /// Unbound GPUs whose VRAM pages were still in use ([`retire`]).
    retired: KVec<Arc<Gpu>>,
}

kernel::sync::global_lock! {
    // SAFETY: `RvramModule::init` calls `REGISTRY.init()` before any other use.
    pub(crate) unsafe(uninit) static REGISTRY: Mutex<Registry> = Registry {
        root: None,
        gpus: [const { None }; NAMES.len()],
        probing: 0,
        retired: KVec::new(),
    };
}

/// A device index held by a probe until its GPU is registered, taken first
/// so that a probe past the last index fails before it sets anything up.
/// Dropped unregistered (a probe that failed), it frees the index.
pub(crate) struct Slot(pub(crate) usize);

impl Slot {
    pub(crate) fn take(pdev: &pci::Device<Bound>) -> Result<Self> {
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

    /// Registers `gpu` under this index: files can open it, peers find it.
    /// The last step of a probe, which cannot fail after it: a GPU is in
    /// the registry only while its device is bound.
    pub(crate) fn register(self, gpu: Arc<Gpu>) -> Registered {
        let index = self.0;
        let mut reg = REGISTRY.lock();
        reg.gpus[index] = Some(gpu.clone());
        reg.probing &= !(1 << index);
        core::mem::forget(self);
        Registered(gpu)
    }
}

/// Takes `gpu` out of the registry, first thing at unbind: no file opens
/// it and no peer finds it from then on.
pub(crate) fn unregister(gpu: &Gpu) {
    REGISTRY.lock().gpus[gpu.index] = None;
}

/// A GPU in the registry: takes it out when dropped (with the device's
/// data, after unbind) if unbind has not already done so.
pub(crate) struct Registered(Arc<Gpu>);

impl Drop for Registered {
    fn drop(&mut self) {
        let mut reg = REGISTRY.lock();
        let slot = &mut reg.gpus[self.0.index];
        // Another device may have the index by now.
        if slot.as_ref().is_some_and(|g| Arc::ptr_eq(g, &self.0)) {
            *slot = None;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        REGISTRY.lock().probing &= !(1 << self.0);
    }
}

/// The GPU of a character device name (`rvramN`), if bound.
pub(crate) fn gpu_by_name(name: &CStr) -> Option<Arc<Gpu>> {
    let index = NAMES.iter().position(|n| *n == name)?;
    REGISTRY.lock().gpus[index].clone()
}

/// Keeps `gpu`, whose VRAM pages are still in use after unbind (a device-
/// coherent page pinned by a pipe: only pages users can pin are given up
/// on, [`VramKind::PINNABLE`]), until they are freed: dropping its
/// pagemap now would wait for them in `memunmap_pages()`, and the unbind
/// with it, for as long as their users like. The pagemap's claim on its
/// physical range stays meanwhile, so a bind of the same device-coherent BAR
/// fails with `EBUSY`. [`reap_retired`] drops it once the pages are freed.
///
/// [`VramKind::PINNABLE`]: crate::pages::VramKind::PINNABLE
pub(crate) fn retire(pdev: &pci::Device<Bound>, gpu: &Arc<Gpu>, used: usize) {
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
pub(crate) fn reap_retired() {
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

/// Removes the debugfs root when the module goes away.
pub(crate) struct DebugfsRoot;

impl DebugfsRoot {
    pub(crate) fn new() -> Self {
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
pub(crate) struct RetiredGpus;

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
