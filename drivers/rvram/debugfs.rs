// SPDX-License-Identifier: GPL-2.0

//! A GPU's debugfs files, `/sys/kernel/debug/rvram/rvramN/`: one field here
//! for each file of `Documentation/misc-devices/rvram.rst`'s table.

#[cfg(CONFIG_RVRAM_SCALE_BENCH)]
use crate::scale::{
    self,
    ScaleBench, //
};
use crate::{
    gpu::{
        Gpu,
        Vram,
        NAMES, //
    },
    registry::{
        Dir,
        REGISTRY, //
    },
};
use kernel::{
    debugfs::File,
    prelude::*,
    sync::Arc,
    uaccess::UserSliceReader, //
};

/// The files of a bound GPU, removed with it.
#[pin_data]
pub(crate) struct GpuFiles {
    dir: Dir,
    /// `vram_size`: the size of VRAM in bytes.
    #[pin]
    vram_size: File<u64>,
    /// `device_private_pfn` or `device_coherent_pfn`: the pfn of VRAM page
    /// 0.
    #[pin]
    first_pfn: File<u64>,
    /// `stats`: VRAM use and the event counters.
    #[pin]
    stats: File<Arc<Gpu>>,
    /// The files of device-private VRAM only.
    private: Option<Pin<KBox<PrivateFiles>>>,
}

/// The files of a GPU with device-private VRAM.
#[pin_data]
struct PrivateFiles {
    /// `alias_phys`: where peers reach VRAM page 0, BAR2's physical
    /// address.
    #[pin]
    alias_phys: File<u64>,
    /// `p2p_alias`: whether peers get aliases of VRAM pages
    /// ([`Pagemap::revoke_aliases`] and [`Pagemap::restore_aliases`]),
    /// which benchmarks and tests turn off to measure what a peer's access
    /// costs when it migrates the pages instead.
    ///
    /// [`Pagemap::revoke_aliases`]: kernel::mm::pagemap::Pagemap::revoke_aliases
    /// [`Pagemap::restore_aliases`]: kernel::mm::pagemap::Pagemap::restore_aliases
    #[pin]
    p2p_alias: File<Arc<Gpu>>,
    /// `fill`: the scale benchmark's VRAM fill.
    #[cfg(CONFIG_RVRAM_SCALE_BENCH)]
    #[pin]
    fill: File<Arc<ScaleBench>>,
    /// `alloc_bench`: the scale benchmark's allocation latencies.
    #[cfg(CONFIG_RVRAM_SCALE_BENCH)]
    #[pin]
    alloc_bench: File<Arc<ScaleBench>>,
}

impl GpuFiles {
    /// Creates the files of `gpu`, whose VRAM is `size` bytes and, if
    /// device-private, reached by peers at `alias_phys`.
    pub(crate) fn new(
        gpu: &Arc<Gpu>,
        size: u64,
        alias_phys: Option<u64>,
    ) -> impl PinInit<Self, Error> + '_ {
        pin_init::pin_init_scope(move || {
            let dir = REGISTRY
                .lock()
                .root
                .as_ref()
                .ok_or(ENODEV)?
                .subdir(NAMES[gpu.index]);
            let (pfn_name, private) = match (&gpu.vram, alias_phys) {
                (Vram::Private(_), Some(phys)) => (
                    c"device_private_pfn",
                    Some(KBox::pin_init(
                        PrivateFiles::new(&dir, gpu, phys),
                        GFP_KERNEL,
                    )?),
                ),
                (Vram::Private(_), None) => return Err(EINVAL),
                (Vram::Coherent(_), _) => (c"device_coherent_pfn", None),
            };
            let first_pfn = gpu.vram.first_pfn() as u64;
            Ok(try_pin_init!(Self {
                dir: dir.clone(),
                vram_size <- dir.read_only_file(c"vram_size", size),
                first_pfn <- dir.read_only_file(pfn_name, first_pfn),
                stats <- dir.read_callback_file(c"stats", gpu.clone(), &show_stats),
                private,
            }))
        })
    }
}

impl PrivateFiles {
    fn new<'a>(dir: &'a Dir, gpu: &'a Arc<Gpu>, alias_phys: u64) -> impl PinInit<Self, Error> + 'a {
        pin_init::pin_init_scope(move || {
            #[cfg(CONFIG_RVRAM_SCALE_BENCH)]
            let bench = ScaleBench::new(gpu.clone())?;
            Ok(try_pin_init!(Self {
                alias_phys <- dir.read_only_file(c"alias_phys", alias_phys),
                p2p_alias <- dir.read_write_callback_file(
                    c"p2p_alias",
                    gpu.clone(),
                    &show_p2p_alias,
                    &store_p2p_alias,
                ),
                #[cfg(CONFIG_RVRAM_SCALE_BENCH)]
                fill <- dir.read_write_callback_file(
                    c"fill",
                    bench.clone(),
                    &scale::show_fill,
                    &scale::store_fill,
                ),
                #[cfg(CONFIG_RVRAM_SCALE_BENCH)]
                alloc_bench <- dir.read_write_callback_file(
                    c"alloc_bench",
                    bench,
                    &scale::show_alloc_bench,
                    &scale::store_alloc_bench,
                ),
            }))
        })
    }
}

/// The `stats` file: VRAM use around the event counters.
fn show_stats(gpu: &Arc<Gpu>, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let v = &gpu.vram;
    let reserved = match v {
        Vram::Private(pm) => pm.nr_reserved(),
        Vram::Coherent(_) => 0,
    };
    // Pages that peers got as aliases, counted by core mm.
    let aliases = match v {
        Vram::Private(pm) => pm.aliases_reported(),
        Vram::Coherent(_) => 0,
    };
    writeln!(f, "pages_total {}", v.nr_pages())?;
    writeln!(f, "pages_resident {}", v.nr_used())?;
    v.stats().show(f)?;
    writeln!(f, "alias_grants {aliases}")?;
    writeln!(f, "dmabuf_pages {}", reserved)
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
