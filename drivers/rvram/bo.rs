// SPDX-License-Identifier: GPL-2.0

//! VRAM buffer objects, exported as dma-bufs (`RVRAM_IOCTL_ALLOC_DMABUF`).
//!
//! A buffer object is a run of VRAM pages set aside from migration
//! ([`Pagemap::reserve`](kernel::mm::pagemap::Pagemap::reserve)) and handed
//! to user space as a dma-buf file descriptor, for importers that register
//! it pinned (RDMA dma-buf MRs) instead of mirroring a process's memory
//! with ODP. The pages are cleared before the buffer is exported and go back
//! to the VRAM allocator with the dma-buf's last reference. Importers reach
//! the BAR peer to peer or not at all; unbinding the GPU revokes every
//! buffer (see [`kernel::pci::BarExporter`]). A buffer's size is charged to
//! the dmem cgroup of the process that allocates it, for as long as the
//! buffer lives, so that an administrator can bound the VRAM a cgroup holds
//! (`dmem.max`).
//!
//! Only device-private VRAM exports buffers: device-coherent VRAM is mapped
//! by the kernel as memory, cacheable, which an uncached mapping of the same
//! BAR for importers must not alias; it gets `EOPNOTSUPP`.

use crate::gpu::{
    Gpu,
    Vram, //
};
use kernel::{
    cgroup::dmem::Charge,
    fs::file::{
        flags::O_CLOEXEC,
        FileDescriptorReservation, //
    },
    ioctl::_IOWR,
    mm::pagemap::Reservation,
    page::PAGE_SIZE,
    prelude::*,
    sync::{
        atomic::Relaxed,
        Arc, //
    },
    task::might_sleep,
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// `struct rvram_alloc_dmabuf` (include/uapi/misc/rvram.h).
#[repr(C)]
#[derive(Clone, Copy)]
struct AllocDmabuf {
    /// Bytes of VRAM.
    size: u64,
    /// None defined: must be 0.
    flags: u32,
    /// Out: the dma-buf's file descriptor.
    fd: i32,
}

// SAFETY: A `u64`, a `u32` and an `i32`, 16 bytes with no padding: every
// bit pattern is valid.
unsafe impl FromBytes for AllocDmabuf {}
// SAFETY: As above: no padding, every byte is initialised.
unsafe impl AsBytes for AllocDmabuf {}

/// `RVRAM_IOCTL_ALLOC_DMABUF`: `'R'` 0x30, the first of the range 0x30-0x3f
/// that Documentation/userspace-api/ioctl/ioctl-number.rst gives rvram.
pub(crate) const ALLOC_DMABUF: u32 = _IOWR::<AllocDmabuf>(b'R' as u32, 0x30);

/// The VRAM behind one exported dma-buf. Its fields drop in order: the
/// VRAM goes back to the allocator before the charge is dropped.
struct Bo {
    gpu: Arc<Gpu>,
    _vram: Reservation,
    _charge: Charge,
}

impl Drop for Bo {
    fn drop(&mut self) {
        // Only device-private VRAM has buffer objects.
        if let Vram::Private(pm) = &self.gpu.vram {
            pm.data().books.stats.dmabufs_freed.fetch_add(1, Relaxed);
        }
    }
}

/// Handles `RVRAM_IOCTL_ALLOC_DMABUF` on a file of `gpu`: allocates `size`
/// bytes of cleared VRAM and returns a dma-buf file descriptor for it.
///
/// Any user who can open the device can ask, as often as they like: a
/// refused request is not logged (the errno says it all), and running out
/// of VRAM is plain `ENOMEM`. How much VRAM one user may hold is for the
/// dmem cgroup to bound: a request that would take the caller's cgroup over
/// its `dmem.max` fails with `ENOSPC`, as TTM's allocations do.
pub(crate) fn alloc_dmabuf(gpu: &Arc<Gpu>, arg: usize) -> Result<isize> {
    let (mut reader, mut writer) =
        UserSlice::new(UserPtr::from_addr(arg), size_of::<AllocDmabuf>()).reader_writer();
    let mut req: AllocDmabuf = reader.read()?;
    let AllocDmabuf { size, flags, .. } = req;
    let (Vram::Private(pm), Some(exports)) = (&gpu.vram, &gpu.exports) else {
        pr_debug!(
            "RVRAM_IOCTL_ALLOC_DMABUF: rvram{}: device-coherent VRAM exports no dma-bufs\n",
            gpu.index
        );
        return Err(EOPNOTSUPP);
    };
    let vram = pm.nr_pages() as u64 * PAGE_SIZE as u64;
    if flags != 0 || size == 0 || size % PAGE_SIZE as u64 != 0 || size > vram {
        pr_debug!(
            "RVRAM_IOCTL_ALLOC_DMABUF: bad request: size {size:#x} (VRAM {vram:#x}), flags {flags:#x}\n"
        );
        return Err(EINVAL);
    }
    let nr = usize::try_from(size / PAGE_SIZE as u64)?;
    let fd = FileDescriptorReservation::get_unused_fd_flags(O_CLOEXEC)?;
    let buf = {
        // Holds off unbind, which evicts VRAM and drops the exporter (and
        // nothing else: other users' ioctls run meanwhile).
        let _bound = gpu.hold_bound()?;
        // Charged before VRAM is set aside, uncharged if this fails.
        let charge = gpu.dmem.lock().as_ref().ok_or(ENODEV)?.try_charge(size)?;
        let r = pm.reserve(nr).inspect_err(|_| {
            pm.data().books.stats.alloc_fail.fetch_add(1, Relaxed);
        })?;
        let index = r.index();
        let bo = Bo {
            gpu: gpu.clone(),
            _vram: r,
            _charge: charge,
        };
        // VRAM held someone else's data: the importer sees zeroes. Up to
        // all of VRAM: a scheduling point per page.
        for i in index..index + nr {
            pm.data().zero_page(i)?;
            might_sleep();
        }
        let offset = u64::try_from(index * PAGE_SIZE)?;
        let buf = exports.export(offset, nr * PAGE_SIZE, bo)?;
        pm.data().books.stats.dmabufs.fetch_add(1, Relaxed);
        buf
    };
    req.fd = i32::try_from(fd.reserved_fd())?;
    writer.write(&req)?;
    fd.fd_install(buf.into_file());
    Ok(0)
}
