// SPDX-License-Identifier: GPL-2.0

//! The `lib/test_hmm` (dmirror) ioctl ABI on rvram's character devices.
//!
//! Each open file mirrors the opener's address space with a
//! [`Mirror`]; device reads and writes fault through it and copy from the
//! pages HMM reports: system memory, or this GPU's VRAM for its own
//! device-private pages. Device-coherent VRAM (of any GPU) is in the
//! kernel's linear map and is copied like system memory. The device caches
//! no translations for them. Its page table only holds the pages it maps
//! for atomic access (`HMM_DMIRROR_EXCLUSIVE`), which an invalidation of
//! the page drops.

use crate::{
    gpu::{
        with_vram,
        Gpu, //
    },
    pages::{
        CoherentPages,
        PrivatePages,
        VramKind, //
    },
};
use kernel::{
    alloc::flags::{
        __GFP_ZERO,
        GFP_KERNEL_ACCOUNT, //
    },
    cred::{
        self,
        Capability, //
    },
    fs::File,
    ioctl::_IOWR,
    miscdevice::{
        MiscDevice,
        MiscDeviceRegistration, //
    },
    mm::{
        hmm::{
            AliasAccess,
            Mirror,
            MirrorOps,
            NotifierRange,
            RangeRequest,
            DEFAULT_TIMEOUT_MS, //
        },
        pagemap::Pagemap,
        virt::VmaNew,
        Mm, //
    },
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNode, //
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc, //
    },
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

mod migrate;

/// `struct hmm_dmirror_cmd` (lib/test_hmm_uapi.h).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Cmd {
    addr: u64,
    ptr: u64,
    npages: u64,
    cpages: u64,
    faults: u64,
}

// SAFETY: `Cmd` is five `u64`s with no padding: every bit pattern is valid.
unsafe impl FromBytes for Cmd {}
// SAFETY: `Cmd` is five `u64`s with no padding: every byte is initialised.
unsafe impl AsBytes for Cmd {}

const TYPE: u32 = b'H' as u32;
const READ: u32 = _IOWR::<Cmd>(TYPE, 0x00);
const WRITE: u32 = _IOWR::<Cmd>(TYPE, 0x01);
const MIGRATE_TO_DEV: u32 = _IOWR::<Cmd>(TYPE, 0x02);
const MIGRATE_TO_SYS: u32 = _IOWR::<Cmd>(TYPE, 0x03);
const SNAPSHOT: u32 = _IOWR::<Cmd>(TYPE, 0x04);
const EXCLUSIVE: u32 = _IOWR::<Cmd>(TYPE, 0x05);
const CHECK_EXCLUSIVE: u32 = _IOWR::<Cmd>(TYPE, 0x06);
const RELEASE: u32 = _IOWR::<Cmd>(TYPE, 0x07);
const FLAGS: u32 = _IOWR::<Cmd>(TYPE, 0x08);
const READ_UNLOCKED: u32 = _IOWR::<Cmd>(TYPE, 0x09);

/// `HMM_DMIRROR_FLAG_FAIL_ALLOC`: the next device allocation fails (once).
const FLAG_FAIL_ALLOC: u64 = 1;
/// `HMM_DMIRROR_FLAG_ALIAS`: device reads and writes reach another
/// device's private pages through their alias, with the CPU, as
/// lib/test_hmm does: [`FLAG_ALIAS_CPU`].
const FLAG_ALIAS: u64 = 1 << 1;
/// `HMM_DMIRROR_FLAG_NO_ALIAS`: this GPU's pages have no alias for peers
/// while any file keeps it set (`CAP_SYS_ADMIN`: it slows every user's
/// peers down).
const FLAG_NO_ALIAS: u64 = 1 << 2;
/// rvram's own flag: device reads and writes fault on behalf of this GPU as
/// a DMA alias client, so that pages in another GPU's VRAM are accessed
/// through their alias when P2P is possible instead of migrating.
const FLAG_ALIAS_DMA: u64 = 1 << 16;
/// rvram's own flag: as [`FLAG_ALIAS_DMA`], but as a virtual-DMA client that
/// accesses memory with the CPU (as software RDMA does): every alias
/// qualifies.
const FLAG_ALIAS_CPU: u64 = 1 << 17;
/// The flags `HMM_DMIRROR_FLAGS` accepts.
const FLAGS_KNOWN: u64 =
    FLAG_FAIL_ALLOC | FLAG_ALIAS | FLAG_NO_ALIAS | FLAG_ALIAS_DMA | FLAG_ALIAS_CPU;

/// `HMM_DMIRROR_PROT_*` of a SNAPSHOT.
mod prot {
    pub(super) const ERROR: u8 = 0xff;
    pub(super) const NONE: u8 = 0x00;
    pub(super) const READ: u8 = 0x01;
    pub(super) const WRITE: u8 = 0x02;
    pub(super) const PMD: u8 = 0x04;
    pub(super) const PUD: u8 = 0x08;
    pub(super) const ZERO: u8 = 0x10;
    pub(super) const DEV_PRIVATE_LOCAL: u8 = 0x20;
    pub(super) const DEV_PRIVATE_REMOTE: u8 = 0x30;
    pub(super) const DEV_COHERENT_LOCAL: u8 = 0x40;
    pub(super) const DEV_COHERENT_REMOTE: u8 = 0x50;
}

/// Device reads and writes fault and copy this many bytes at a time (as
/// test_hmm does): each fault, which may migrate every page of it from
/// another device, must finish within the mirror's retry timeout. It is
/// also the size of a command's bounce buffer.
const FAULT_CHUNK: usize = 64 * PAGE_SIZE;

/// Largest `npages` accepted by one command (test_hmm bounds it only by
/// address-space wrap; we also bound the snapshot buffer): 1 GiB.
const MAX_NPAGES: u64 = (1 << 30) / PAGE_SIZE as u64;

/// Longest `mmap()` of the device file: its pages are allocated when it is
/// mapped, so the length is bounded (test_hmm does not bound it). One PMD;
/// hmm-tests maps one page.
const MAX_MMAP: usize = 2 << 20;

/// The chunks of a copy of `len` bytes between the device and user memory:
/// `(offset, length)` of each run of at most [`FAULT_CHUNK`] bytes.
fn chunks(len: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len)
        .step_by(FAULT_CHUNK)
        .map(move |off| (off, FAULT_CHUNK.min(len - off)))
}

/// The device page table of a file: the addresses of the pages the device
/// maps for atomic access (see the module documentation).
pub(crate) struct DeviceTable {
    atomic: RBTree<usize, ()>,
}

impl DeviceTable {
    fn new() -> Self {
        Self {
            atomic: RBTree::new(),
        }
    }

    /// Whether the device maps a page of `[start, end)` for atomic access.
    fn any_atomic(&self, start: usize, end: usize) -> bool {
        self.atomic
            .cursor_lower_bound(&start)
            .is_some_and(|c| *c.current().0 < end)
    }
}

impl MirrorOps for DeviceTable {
    fn invalidate(&mut self, range: &NotifierRange<'_>) {
        let r = range.range();
        // Removing frees the node: no allocation here.
        while let Some(c) = self.atomic.cursor_lower_bound_mut(&r.start) {
            if *c.current().0 >= r.end {
                break;
            }
            drop(c.remove_current());
        }
    }
}

/// An open rvram file.
///
/// The file belongs to the address space of the process that opened it
/// (the mirror's mm): commands and `mmap()` from any other address space
/// (a child after `fork()`, a process the file was passed to) fail with
/// `EBADF`, as amdkfd refuses another process's ioctls.
#[pin_data]
pub(crate) struct DmirrorFile {
    gpu: Arc<Gpu>,
    mirror: Pin<KBox<Mirror<DeviceTable>>>,
    flags: Atomic<u64>,
    /// Tags the VRAM pages this file migrates in ([`crate::vram::Owners`]), which
    /// are those `HMM_DMIRROR_RELEASE` evicts. Never 0.
    id: u32,
}

#[vtable]
impl MiscDevice for DmirrorFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        let gpu = crate::registry::gpu_by_name(misc.device().name()).ok_or(ENODEV)?;
        let task = kernel::current!();
        let mm = task.mm().ok_or(EINVAL)?;
        let owner = gpu.vram.owner();
        let id = gpu.new_file_id();
        // Charged to the opener's memory cgroup, as everything a file
        // allocates on behalf of its user.
        let mirror = KBox::pin_init(
            Mirror::new(
                mm,
                0,
                usize::MAX & !(PAGE_SIZE - 1),
                Some(owner),
                DeviceTable::new(),
            ),
            GFP_KERNEL_ACCOUNT,
        )?;
        KBox::pin_init(
            try_pin_init!(Self {
                gpu,
                mirror,
                flags: Atomic::new(0),
                id,
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// A file that kept this GPU's aliases off stops keeping them off.
    fn release(device: Pin<KBox<Self>>, _file: &File) {
        if device.flags.load(Relaxed) & FLAG_NO_ALIAS != 0 {
            let mut off = device.gpu.aliases_off.lock();
            // Fails only once unbind revoked them for good.
            let _ = device.gpu.count_aliases_off(&mut off, false);
        }
    }

    /// Maps zeroed system pages, as test_hmm does: a device file whose
    /// mapping is not anonymous memory (hmm-tests' `mixedmap` case snapshots
    /// it). The VMA holds its own reference to every page. At most
    /// [`MAX_MMAP`] bytes (`ENOMEM` beyond), charged to the caller's memory
    /// cgroup; `EBADF` from another address space than the opener's.
    fn mmap(me: Pin<&DmirrorFile>, _file: &File, vma: &VmaNew) -> Result {
        me.check_mm(Some(&**vma.mm()))?;
        if vma.end() - vma.start() > MAX_MMAP {
            return Err(ENOMEM);
        }
        let vma = vma.set_mixedmap();
        for addr in (vma.start()..vma.end()).step_by(PAGE_SIZE) {
            let page = Page::alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO)?;
            vma.vm_insert_page(addr, &page)?;
        }
        Ok(())
    }

    fn ioctl(me: Pin<&DmirrorFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        me.check_mm(kernel::current!().mm().map(|mm| &**mm))?;
        if cmd == crate::bo::ALLOC_DMABUF {
            return crate::bo::alloc_dmabuf(&me.gpu, arg);
        }
        let user = UserSlice::new(UserPtr::from_addr(arg), size_of::<Cmd>());
        let (mut reader, mut writer) = user.reader_writer();
        // The outputs start at 0, whatever the caller left in them.
        let mut c = Cmd {
            cpages: 0,
            faults: 0,
            ..reader.read::<Cmd>()?
        };
        // Same checks and order as test_hmm: page-aligned, non-empty, no wrap.
        if c.addr % PAGE_SIZE as u64 != 0
            || c.npages == 0
            || c.npages > u64::MAX / PAGE_SIZE as u64
            || c.addr.checked_add(c.npages * PAGE_SIZE as u64).is_none()
        {
            return Err(EINVAL);
        }
        if me.gpu.is_unbound() {
            return Err(ENODEV);
        }
        match cmd {
            READ | READ_UNLOCKED => me.read(&mut c)?,
            WRITE => me.write(&mut c)?,
            MIGRATE_TO_DEV => me.migrate_to_dev(&mut c)?,
            MIGRATE_TO_SYS => me.migrate_to_sys(&mut c)?,
            SNAPSHOT => me.snapshot(&mut c)?,
            FLAGS => {
                if c.npages & !FLAGS_KNOWN != 0
                    || c.npages & FLAG_ALIAS_DMA != 0
                        && c.npages & (FLAG_ALIAS | FLAG_ALIAS_CPU) != 0
                {
                    // Any user can ask: the errno says it all, no log line.
                    pr_debug!("HMM_DMIRROR_FLAGS: bad flags {:#x}\n", c.npages);
                    return Err(EINVAL);
                }
                me.set_flags(c.npages)?
            }
            RELEASE => me.release()?,
            EXCLUSIVE => me.exclusive(&mut c)?,
            CHECK_EXCLUSIVE => {
                let end = usize::try_from(c.addr)? + Self::bounce_len(&c)?;
                if me.mirror.lock().any_atomic(usize::try_from(c.addr)?, end) {
                    return Err(EPERM);
                }
            }
            _ => return Err(EINVAL),
        }
        writer.write(&c)?;
        Ok(0)
    }
}

impl DmirrorFile {
    /// `EBADF` unless `mm`, the caller's address space, is the one this
    /// file mirrors (see [`DmirrorFile`]).
    fn check_mm(&self, mm: Option<&Mm>) -> Result {
        match mm {
            Some(mm) if core::ptr::eq(mm.as_raw(), self.mirror.mm().as_raw()) => Ok(()),
            _ => Err(EBADF),
        }
    }

    fn bounce_len(c: &Cmd) -> Result<usize> {
        if c.npages > MAX_NPAGES {
            return Err(ENOMEM);
        }
        Ok(usize::try_from(c.npages)? * PAGE_SIZE)
    }

    /// A zeroed buffer of `len` bytes (bounded by the callers: one chunk,
    /// or one byte per page of at most [`MAX_NPAGES`]), charged to the
    /// caller's memory cgroup.
    fn zeroed(len: usize) -> Result<KVVec<u8>> {
        let mut v = KVVec::with_capacity(len, GFP_KERNEL_ACCOUNT)?;
        v.resize(len, 0, GFP_KERNEL_ACCOUNT)?;
        Ok(v)
    }

    /// The bounce buffer of a command that copies `len` bytes between the
    /// device and user memory. It holds one chunk of at most
    /// [`FAULT_CHUNK`] bytes and is reused for every chunk of the range
    /// (see [`chunks`]): what a command allocates and clears does not grow
    /// with its length.
    fn bounce(len: usize) -> Result<KVVec<u8>> {
        Self::zeroed(len.min(FAULT_CHUNK))
    }

    /// HMM_DMIRROR_READ: the device reads the range into `ptr`.
    fn read(&self, c: &mut Cmd) -> Result {
        let len = Self::bounce_len(c)?;
        let start = usize::try_from(c.addr)?;
        let mut out = UserSlice::new(UserPtr::from_addr(usize::try_from(c.ptr)?), len).writer();
        let mut buf = Self::bounce(len)?;
        for (off, n) in chunks(len) {
            let chunk = &mut buf[..n];
            let mut req = self.request(start + off, n, false)?;
            {
                let f = self.mirror.fault(&mut req, DEFAULT_TIMEOUT_MS)?;
                for ((_, pfn), dst) in f.iter().zip(chunk.chunks_mut(PAGE_SIZE)) {
                    if let Some((folio, index)) = pfn.device_page::<PrivatePages>() {
                        folio.pagemap().data().read_page(index, dst)?;
                    } else if pfn.is_alias() {
                        pfn.read_alias(dst).ok_or(EFAULT)?;
                        self.count_alias();
                    } else {
                        pfn.read_system_page(dst).ok_or(EFAULT)?;
                    }
                }
            }
            // Not under the fault's lock: the copy may fault on user memory.
            out.write_slice(chunk)?;
        }
        c.cpages = c.npages;
        c.faults = 1;
        Ok(())
    }

    /// HMM_DMIRROR_WRITE: the device writes `ptr`'s content to the range.
    fn write(&self, c: &mut Cmd) -> Result {
        let len = Self::bounce_len(c)?;
        let start = usize::try_from(c.addr)?;
        let mut inp = UserSlice::new(UserPtr::from_addr(usize::try_from(c.ptr)?), len).reader();
        let mut buf = Self::bounce(len)?;
        for (off, n) in chunks(len) {
            let chunk = &mut buf[..n];
            inp.read_slice(chunk)?;
            let chunk = &*chunk;
            let addr = start + off;
            // Each retry makes a page of the chunk private; a concurrent
            // fork() may share it again, so the retries are bounded.
            let mut retries = 2 * FAULT_CHUNK / PAGE_SIZE;
            while let Some(shared) = self.write_chunk(addr, chunk)? {
                // A page of this GPU mapped read-only: shared copy-on-write
                // with a child since fork(). Break the sharing as a CPU
                // write would (the page migrates to system memory), then
                // write the chunk again.
                retries = retries.checked_sub(1).ok_or(EBUSY)?;
                let mut one = RangeRequest::new(shared, 1, true)?.fault_owner_pages();
                drop(self.mirror.fault(&mut one, DEFAULT_TIMEOUT_MS)?);
            }
        }
        c.cpages = c.npages;
        c.faults = 1;
        Ok(())
    }

    /// Writes `src` to the range at `addr`; stops at the first page of this
    /// GPU that is mapped read-only and returns its address.
    fn write_chunk(&self, addr: usize, src: &[u8]) -> Result<Option<usize>> {
        let mut req = self.request(addr, src.len(), true)?;
        let f = self.mirror.fault(&mut req, DEFAULT_TIMEOUT_MS)?;
        for ((va, pfn), src) in f.iter().zip(src.chunks(PAGE_SIZE)) {
            if let Some((folio, index)) = pfn.device_page::<PrivatePages>() {
                if !pfn.is_writable() {
                    return Ok(Some(va));
                }
                folio.pagemap().data().write_page(index, src)?;
            } else if pfn.is_alias() {
                pfn.write_alias(src).ok_or(EPERM)?;
                self.count_alias();
            } else {
                pfn.write_system_page(src).ok_or(EPERM)?;
            }
        }
        Ok(None)
    }

    /// Sets the file's flags; counts the file in or out of those that keep
    /// this GPU's aliases off if `FLAG_NO_ALIAS` changes.
    fn set_flags(&self, flags: u64) -> Result {
        // The flag and the count change together, whatever else this
        // file's other threads do.
        let mut off = self.gpu.aliases_off.lock();
        let old = self.flags.load(Relaxed);
        if (old ^ flags) & FLAG_NO_ALIAS != 0 {
            if !cred::capable(Capability::SYS_ADMIN) {
                return Err(EPERM);
            }
            self.gpu
                .count_aliases_off(&mut off, flags & FLAG_NO_ALIAS != 0)?;
        }
        self.flags.store(flags, Relaxed);
        Ok(())
    }

    /// The fault request of a device read or write of `len` bytes at
    /// `addr`, with this GPU as the alias client if the file asked for it.
    fn request(&self, addr: usize, len: usize, write: bool) -> Result<RangeRequest> {
        let req = RangeRequest::new(addr, len / PAGE_SIZE, write)?;
        let flags = self.flags.load(Relaxed);
        let access = if flags & FLAG_ALIAS_DMA != 0 {
            AliasAccess::Dma
        } else if flags & (FLAG_ALIAS | FLAG_ALIAS_CPU) != 0 {
            AliasAccess::Cpu
        } else {
            return Ok(req);
        };
        Ok(req.with_alias_client(self.gpu.dev.clone(), access))
    }

    /// Whether `pm` is this GPU's VRAM.
    fn is_mine<T: VramKind>(&self, pm: &Pagemap<T>) -> bool {
        with_vram!(&self.gpu.vram, mine => core::ptr::eq(
            core::ptr::from_ref(mine).cast::<u8>(),
            core::ptr::from_ref(pm).cast::<u8>()
        ))
    }

    /// Counts a page this GPU accessed through another GPU's alias.
    fn count_alias(&self) {
        self.gpu.vram.stats().alias_access.fetch_add(1, Relaxed);
    }

    /// Takes the one-shot allocation failure flag. Clears that bit alone:
    /// a `FLAGS` call of another thread of this file that lands in between
    /// keeps its flags, the counted `FLAG_NO_ALIAS` among them.
    fn fail_alloc(&self) -> bool {
        let mut f = self.flags.load(Relaxed);
        while f & FLAG_FAIL_ALLOC != 0 {
            match self.flags.cmpxchg(f, f & !FLAG_FAIL_ALLOC, Relaxed) {
                Ok(_) => return true,
                Err(now) => f = now,
            }
        }
        false
    }

    /// HMM_DMIRROR_EXCLUSIVE: maps the range for atomic access by the
    /// device (`make_device_exclusive()`) and reads it into `ptr`. The CPU's
    /// next access to a page ends the device's access to it, which
    /// HMM_DMIRROR_CHECK_EXCLUSIVE then reports.
    fn exclusive(&self, c: &mut Cmd) -> Result {
        let len = Self::bounce_len(c)?;
        let start = usize::try_from(c.addr)?;
        let mut out = UserSlice::new(UserPtr::from_addr(usize::try_from(c.ptr)?), len).writer();
        let mut buf = Self::bounce(len)?;
        let mm = self.mirror.mm().mmget_not_zero().ok_or(EINVAL)?;
        for (off, n) in chunks(len) {
            let chunk = &mut buf[..n];
            {
                let guard = mm.mmap_read_lock();
                for (i, dst) in chunk.chunks_mut(PAGE_SIZE).enumerate() {
                    let addr = start + off + i * PAGE_SIZE;
                    // Lives until the CPU touches the page or the file is
                    // closed: charged to the caller.
                    let node = RBTreeNode::new(addr, (), GFP_KERNEL_ACCOUNT)?;
                    let page = self.mirror.make_exclusive(&guard, addr)?;
                    // Mapped before the page is unlocked: the CPU's access,
                    // which needs the page lock, finds the entry to drop.
                    self.mirror.lock().atomic.insert(node);
                    page.read(dst)?;
                }
            }
            // Not under the mmap lock: the copy may fault on user memory.
            out.write_slice(chunk)?;
        }
        c.cpages = c.npages;
        Ok(())
    }

    /// HMM_DMIRROR_SNAPSHOT: what the device would see, without faulting.
    fn snapshot(&self, c: &mut Cmd) -> Result {
        let n = usize::try_from(c.npages)?;
        if c.npages > MAX_NPAGES {
            return Err(ENOMEM);
        }
        let mut out = Self::zeroed(n)?;
        let mut req = RangeRequest::snapshot(usize::try_from(c.addr)?, n)?;
        {
            let f = self.mirror.fault(&mut req, DEFAULT_TIMEOUT_MS)?;
            for ((_, pfn), o) in f.iter().zip(out.iter_mut()) {
                *o = if pfn.is_error() {
                    prot::ERROR
                } else if !pfn.is_valid() {
                    prot::NONE
                } else {
                    let mut v = if let Some(d) = pfn.device_folio::<PrivatePages>() {
                        if self.is_mine(d.pagemap()) {
                            prot::DEV_PRIVATE_LOCAL
                        } else {
                            prot::DEV_PRIVATE_REMOTE
                        }
                    } else if let Some(d) = pfn.device_folio::<CoherentPages>() {
                        if self.is_mine(d.pagemap()) {
                            prot::DEV_COHERENT_LOCAL
                        } else {
                            prot::DEV_COHERENT_REMOTE
                        }
                    } else if pfn.is_zero_page() {
                        prot::ZERO
                    } else {
                        prot::NONE
                    };
                    v |= if pfn.is_writable() {
                        prot::WRITE
                    } else {
                        prot::READ
                    };
                    v |= match pfn.map_order() {
                        9 => prot::PMD,
                        18 => prot::PUD,
                        _ => 0,
                    };
                    v
                };
            }
        }
        UserSlice::new(UserPtr::from_addr(usize::try_from(c.ptr)?), n)
            .writer()
            .write_slice(&out)?;
        c.cpages = c.npages;
        Ok(())
    }
}

#[kunit_tests(rvram_dmirror)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_range_once() {
        assert_eq!(chunks(0).count(), 0);
        let mut c = chunks(PAGE_SIZE);
        assert_eq!(c.next(), Some((0, PAGE_SIZE)));
        assert_eq!(c.next(), None);
        let mut c = chunks(2 * FAULT_CHUNK + PAGE_SIZE);
        assert_eq!(c.next(), Some((0, FAULT_CHUNK)));
        assert_eq!(c.next(), Some((FAULT_CHUNK, FAULT_CHUNK)));
        assert_eq!(c.next(), Some((2 * FAULT_CHUNK, PAGE_SIZE)));
        assert_eq!(c.next(), None);
        let max = usize::try_from(MAX_NPAGES).unwrap_or(0) * PAGE_SIZE;
        assert_eq!(chunks(max).count(), max / FAULT_CHUNK);
        assert_eq!(chunks(max).map(|(_, n)| n).sum::<usize>(), max);
    }
}
