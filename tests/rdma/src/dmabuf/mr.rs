// SPDX-License-Identifier: GPL-2.0
//! The buffer object and its MR: allocation on `/dev/rvramN`, a CPU mapping
//! of the dma-buf, and its registration through libibverbs or the uverbs
//! command.

use super::*;

/// `struct rvram_alloc_dmabuf` (include/uapi/misc/rvram.h).
#[repr(C)]
#[derive(Debug, Default)]
struct AllocDmabuf {
    size: u64,
    flags: u32,
    fd: i32,
}

/// `RVRAM_IOCTL_ALLOC_DMABUF`: `_IOWR('R', 0x30, struct rvram_alloc_dmabuf)`.
const RVRAM_IOCTL_ALLOC_DMABUF: u64 =
    (3 << 30) | ((std::mem::size_of::<AllocDmabuf>() as u64) << 16) | ((b'R' as u64) << 8) | 0x30;

/// Allocates a VRAM buffer object of `size` bytes on `gpu` (an open
/// `/dev/rvramN`) and returns its dma-buf.
pub(super) fn alloc_dmabuf(gpu: &File, size: usize) -> Result<OwnedFd, String> {
    let mut arg = AllocDmabuf {
        size: size as u64,
        ..Default::default()
    };
    // SAFETY: `arg` is a valid `struct rvram_alloc_dmabuf` that the ioctl
    // reads and writes back, exclusively borrowed for the call.
    let r = unsafe {
        libc::ioctl(
            gpu.as_raw_fd(),
            RVRAM_IOCTL_ALLOC_DMABUF as libc::c_ulong,
            &mut arg,
        )
    };
    if r != 0 {
        return Err(format!(
            "RVRAM_IOCTL_ALLOC_DMABUF of {size} bytes: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: On success the ioctl installed a new file descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(arg.fd) })
}

/// A shared mapping of a dma-buf: the BAR pages of the buffer.
pub(super) struct CpuMap {
    ptr: NonNull<u8>,
    len: usize,
}

impl CpuMap {
    pub(super) fn new(fd: RawFd, len: usize) -> Result<Self, String> {
        // SAFETY: A new shared mapping of `fd`; nothing else is at the
        // address the kernel picks.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "mmap of the dma-buf: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Self {
            ptr: NonNull::new(p.cast()).ok_or("mmap returned NULL")?,
            len,
        })
    }

    /// The mapping's address.
    pub(super) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Writes `data` at the start of the mapping with volatile writes.
    pub(super) fn write(&self, data: &[u8]) {
        for (i, &b) in data.iter().enumerate().take(self.len) {
            // SAFETY: `i` is inside the mapping, which lives as long as
            // self; nothing else in this process holds a reference to it.
            unsafe { self.ptr.as_ptr().add(i).write_volatile(b) };
        }
    }

    /// The buffer's bytes, copied out with volatile reads (device memory
    /// that the NIC writes behind the compiler's back).
    pub(super) fn read(&self) -> Vec<u8> {
        (0..self.len)
            // SAFETY: `i` is inside the mapping, which lives as long as self.
            .map(|i| unsafe { self.ptr.as_ptr().add(i).read_volatile() })
            .collect()
    }
}

impl Drop for CpuMap {
    fn drop(&mut self) {
        // SAFETY: The mapping made in `new`, not used after this.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// `struct ibv_mr` (infiniband/verbs.h, stable ABI).
#[repr(C)]
struct IbvMr {
    context: *mut c_void,
    pd: *mut c_void,
    addr: *mut c_void,
    length: usize,
    handle: u32,
    lkey: u32,
    rkey: u32,
}

/// `struct verbs_mr` (infiniband/driver.h), what providers allocate per MR
/// and free in `dereg_mr`.
#[repr(C)]
struct VerbsMr {
    ibv_mr: IbvMr,
    mr_type: c_int,
    access: c_int,
}

/// `ibv_cmd_reg_dmabuf_mr()`; rdma-core 44 has no trailing driver command
/// buffer, later versions do: passing NULL for it suits both.
type CmdRegDmabufMr = unsafe extern "C" fn(
    pd: *mut c_void,
    offset: u64,
    length: usize,
    iova: u64,
    fd: c_int,
    access: c_int,
    vmr: *mut VerbsMr,
    driver: *mut c_void,
) -> c_int;
/// `ibv_dereg_mr()`.
type DeregMr = unsafe extern "C" fn(mr: *mut IbvMr) -> c_int;

/// Looks `name` up in the libibverbs that sideway loaded.
fn ibverbs_symbol(name: &CStr) -> Result<*mut c_void, String> {
    // SAFETY: A plain C string; RTLD_NOLOAD only returns a handle to a
    // library already loaded, with a reference we never drop (it stays
    // loaded for the process anyway).
    let lib = unsafe {
        libc::dlopen(
            c"libibverbs.so.1".as_ptr(),
            libc::RTLD_NOW | libc::RTLD_NOLOAD,
        )
    };
    if lib.is_null() {
        return Err("libibverbs.so.1 is not loaded".to_owned());
    }
    // SAFETY: `lib` is a valid handle, `name` a C string.
    let sym = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if sym.is_null() {
        Err(format!("libibverbs.so.1 has no {name:?}"))
    } else {
        Ok(sym)
    }
}

/// How the MR was registered.
enum Mr {
    /// Through `ibv_reg_dmabuf_mr()` and the provider.
    Verbs(Arc<MemoryRegion>),
    /// Through `ibv_cmd_reg_dmabuf_mr()`, on the provider's behalf.
    Cmd(NonNull<VerbsMr>),
}

/// A dma-buf MR registered on a [`Device`], deregistered on drop.
pub(super) struct DmabufMr<'d> {
    /// `None` once deregistered.
    mr: Option<Mr>,
    len: usize,
    _dev: &'d Device,
}

/// Why a registration failed: the errno, if there was one, and the text.
type RegError = (Option<i32>, String);

impl<'d> DmabufMr<'d> {
    /// Registers `len` bytes at `offset` of the dma-buf `fd` at [`IOVA`].
    /// Returns the MR and a note on the path it took.
    pub(super) fn register(
        dev: &'d Device,
        fd: RawFd,
        offset: u64,
        len: usize,
        access: AccessFlags,
    ) -> Result<(Self, String), RegError> {
        // SAFETY: `fd` is a dma-buf exported by rvram that outlives the
        // MR (the caller drops the MR first); the kernel maps it for the
        // MR and keeps its own reference.
        let r = unsafe { dev.pd().reg_dmabuf_mr(offset, len, IOVA, fd, access) };
        // sideway's error hides its io::Error from `source()`.
        let errno = |err: &RegisterMemoryRegionError| match &err.0 {
            RegisterMemoryRegionErrorKind::Ibverbs(io) => io.raw_os_error(),
            _ => None,
        };
        match r {
            Ok(mr) => Ok((
                Self {
                    mr: Some(Mr::Verbs(mr)),
                    len,
                    _dev: dev,
                },
                "registered through ibv_reg_dmabuf_mr() and the provider".to_owned(),
            )),
            Err(err) if errno(&err) == Some(libc::EOPNOTSUPP) => {
                let mr = Self::register_cmd(dev, fd, offset, len, access)?;
                Ok((
                    mr,
                    "ibv_reg_dmabuf_mr(): EOPNOTSUPP from the rxe provider (no reg_dmabuf_mr method); registered through ibv_cmd_reg_dmabuf_mr(), the provider's part".to_owned(),
                ))
            }
            Err(err) => Err((errno(&err), format!("ibv_reg_dmabuf_mr: {err}"))),
        }
    }

    fn register_cmd(
        dev: &'d Device,
        fd: RawFd,
        offset: u64,
        len: usize,
        access: AccessFlags,
    ) -> Result<Self, RegError> {
        let sym = ibverbs_symbol(c"ibv_cmd_reg_dmabuf_mr").map_err(|e| (None, e))?;
        // SAFETY: The symbol is `ibv_cmd_reg_dmabuf_mr()`, of this type (see
        // `CmdRegDmabufMr`).
        let cmd: CmdRegDmabufMr = unsafe { std::mem::transmute(sym) };
        // The provider frees it with free() in dereg_mr: allocate with
        // calloc().
        // SAFETY: Plain allocation.
        let vmr = unsafe { libc::calloc(1, std::mem::size_of::<VerbsMr>()) }.cast::<VerbsMr>();
        let vmr = NonNull::new(vmr).ok_or((Some(libc::ENOMEM), "calloc".to_owned()))?;
        // SAFETY: The PD is live for the call (`dev` holds it); `vmr` is a
        // zeroed `verbs_mr` the command fills in.
        let ret = unsafe {
            cmd(
                dev.pd().pd().as_ptr().cast(),
                offset,
                len,
                IOVA,
                fd,
                access.bits() as c_int,
                vmr.as_ptr(),
                std::ptr::null_mut(),
            )
        };
        if ret != 0 {
            // SAFETY: Not handed to anyone.
            unsafe { libc::free(vmr.as_ptr().cast()) };
            return Err((
                Some(ret),
                format!(
                    "ibv_cmd_reg_dmabuf_mr: {}",
                    std::io::Error::from_raw_os_error(ret)
                ),
            ));
        }
        Ok(Self {
            mr: Some(Mr::Cmd(vmr)),
            len,
            _dev: dev,
        })
    }

    pub(super) fn keys(&self) -> (u32, u32) {
        match &self.mr {
            Some(Mr::Verbs(mr)) => (mr.lkey(), mr.rkey()),
            // SAFETY: Registered, filled in by the command.
            Some(Mr::Cmd(vmr)) => unsafe {
                let mr = &vmr.as_ref().ibv_mr;
                (mr.lkey, mr.rkey)
            },
            None => (0, 0),
        }
    }

    pub(super) fn check(&self, offset: usize, len: usize) -> Result<(), OpError> {
        if offset.checked_add(len).is_some_and(|end| end <= self.len) {
            Ok(())
        } else {
            Err(OpError::Invalid(format!(
                "{len} bytes at offset {offset} exceed the {}-byte dma-buf MR",
                self.len
            )))
        }
    }

    pub(super) fn remote(&self, offset: usize, len: usize) -> Result<verbs::Remote, OpError> {
        self.check(offset, len)?;
        Ok(verbs::Remote {
            rkey: self.keys().1,
            addr: IOVA + offset as u64,
        })
    }

    pub(super) fn sge(&self, offset: usize, len: usize) -> Result<Sge<'_>, OpError> {
        self.check(offset, len)?;
        let len = u32::try_from(len).map_err(|_| OpError::Invalid("SGE too long".into()))?;
        Ok(Sge::raw(self.keys().0, IOVA + offset as u64, len))
    }

    /// `ibv_advise_mr()` prefetch of the MR on `dev` (its PD): every
    /// advice, async and FLUSH, of the whole MR and of one page inside it,
    /// must be refused with `ENOENT`, as for any MR that is not ODP.
    pub(super) fn prefetch_refused(&self, dev: &Device) -> Result<Vec<String>, String> {
        let lkey = self.keys().0;
        let whole = [IbvSge {
            addr: IOVA,
            length: self.len as u32,
            lkey,
        }];
        let page = [IbvSge {
            addr: IOVA + PAGE_SIZE as u64,
            length: PAGE_SIZE as u32,
            lkey,
        }];
        let mut calls = prefetch::matrix(&whole, prefetch::NOT_ODP);
        calls.extend(prefetch::matrix(&page, prefetch::NOT_ODP));
        prefetch::check_calls(dev, &calls)
    }
}

impl DmabufMr<'_> {
    /// Deregisters the MR.
    pub(super) fn deregister(mut self) -> Result<(), String> {
        self.dereg()
    }

    fn dereg(&mut self) -> Result<(), String> {
        match self.mr.take() {
            // sideway's MemoryRegion deregisters on drop.
            Some(Mr::Verbs(mr)) => {
                drop(mr);
                Ok(())
            }
            Some(Mr::Cmd(vmr)) => {
                let sym = ibverbs_symbol(c"ibv_dereg_mr")?;
                // SAFETY: The symbol is `ibv_dereg_mr()`.
                let dereg: DeregMr = unsafe { std::mem::transmute(sym) };
                // SAFETY: A registered MR, not used after this; on success
                // the provider frees `vmr`.
                match unsafe { dereg(&raw mut (*vmr.as_ptr()).ibv_mr) } {
                    0 => Ok(()),
                    e => Err(format!(
                        "ibv_dereg_mr: {}",
                        std::io::Error::from_raw_os_error(e)
                    )),
                }
            }
            None => Ok(()),
        }
    }
}

impl Drop for DmabufMr<'_> {
    fn drop(&mut self) {
        if let Err(why) = self.dereg() {
            eprintln!("dmabuf: the dma-buf MR: {why}");
        }
    }
}

/// The dma-bufs rvram exported that are still alive, from the dma-buf
/// core's list (`exp_name` is the fifth column).
pub(super) fn rvram_dmabufs() -> Result<usize, String> {
    const BUFINFO: &str = "/sys/kernel/debug/dma_buf/bufinfo";
    let text = std::fs::read_to_string(BUFINFO).map_err(|e| format!("read {BUFINFO}: {e}"))?;
    Ok(text
        .lines()
        .filter(|l| l.split_whitespace().nth(4) == Some("rvram"))
        .count())
}
