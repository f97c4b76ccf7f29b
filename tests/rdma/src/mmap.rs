// SPDX-License-Identifier: GPL-2.0
//! Anonymous, page-aligned memory mappings.

use std::io;
use std::ptr::NonNull;

/// A private anonymous read/write mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mmap {
    /// Maps `len` bytes (rounded up to whole pages by the kernel), zeroed.
    pub fn anonymous(len: usize) -> io::Result<Self> {
        Self::map(std::ptr::null_mut(), len)
    }

    /// Maps `len` bytes, zeroed, low in the address space (from 4 GiB up,
    /// if free): far below where the kernel places mappings nobody asked a
    /// place for. A hole unmapped in the middle of it stays a hole: the
    /// libraries' own mappings do not land in it meanwhile.
    pub fn anonymous_low(len: usize) -> io::Result<Self> {
        Self::map((1usize << 32) as *mut libc::c_void, len)
    }

    /// Maps `len` bytes at `hint` or, if that is taken, where the kernel
    /// chooses.
    fn map(hint: *mut libc::c_void, len: usize) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "zero-length mapping",
            ));
        }
        // SAFETY: without MAP_FIXED the address is a hint: the kernel maps
        // fresh anonymous memory that overlaps no existing mapping, hence no
        // Rust object; the arguments are valid for mmap(2), and failure is
        // reported as MAP_FAILED.
        let addr = unsafe {
            libc::mmap(
                hint,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(addr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Self { ptr, len })
    }

    /// Maps `len` bytes starting at a multiple of `align` (a power of two,
    /// at least the page size), zeroed: e.g. PMD-aligned memory that
    /// transparent huge pages can back. Maps `len + align` bytes and unmaps
    /// what lies before and after the aligned part.
    pub fn anonymous_aligned(len: usize, align: usize) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "zero-length mapping",
            ));
        }
        if !align.is_power_of_two() || align < 4096 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("alignment {align} is not a power of two >= 4096"),
            ));
        }
        let len_pages = len
            .checked_next_multiple_of(4096)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
        let outer_len = len_pages
            .checked_add(align)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
        let outer = Self::anonymous(outer_len)?;
        let start = outer.ptr.as_ptr() as usize;
        let aligned = start.next_multiple_of(align);
        let head = aligned - start;
        let tail = outer_len - head - len_pages;
        let ptr = NonNull::new(aligned as *mut u8)
            .ok_or_else(|| io::Error::other("aligned mapping at address 0"))?;
        // From here on the aligned part is owned by the new value and the
        // rest is unmapped below: `outer` must not unmap anything.
        std::mem::forget(outer);
        let inner = Self { ptr, len };
        for (addr, n) in [(start, head), (aligned + len_pages, tail)] {
            if n == 0 {
                continue;
            }
            // SAFETY: `[addr, addr + n)` is part of the mapping made above
            // and lies outside `[aligned, aligned + len_pages)`, which
            // `inner` owns; no reference into it exists.
            if unsafe { libc::munmap(addr as *mut libc::c_void, n) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(inner)
    }

    /// `madvise(2)` over the whole mapping, e.g. `libc::MADV_HUGEPAGE`.
    pub fn advise(&self, advice: libc::c_int) -> io::Result<()> {
        // SAFETY: the range is exactly this live mapping; madvise does not
        // invalidate Rust references for the advice values callers use
        // (huge page hints).
        let ret = unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, advice) };
        if ret != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Length in bytes as requested.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: empty mappings are refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapping's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is readable, initialised (zero-filled) and
        // valid for `len` bytes until `self` drops; the shared borrow of
        // `self` keeps it from being handed out mutably meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The mapping's bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; the exclusive borrow of `self` makes this
        // the only live reference to the mapping.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping this object created and
        // still owns; no reference into it outlives `self`. An munmap
        // failure cannot be handled usefully here and would only leak.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_zeroed_aligned_writable_memory() {
        let mut m = Mmap::anonymous(3 * 4096 + 5).unwrap();
        assert_eq!(m.len(), 3 * 4096 + 5);
        assert!(!m.is_empty());
        assert_eq!(m.as_slice().as_ptr() as usize % 4096, 0);
        assert!(m.as_slice().iter().all(|&b| b == 0));
        m.as_mut_slice()[4096] = 7;
        assert_eq!(m.as_slice()[4096], 7);
    }

    #[test]
    fn aligned_mappings() {
        const PMD: usize = 2 << 20;
        let mut m = Mmap::anonymous_aligned(4 << 20, PMD).unwrap();
        assert_eq!(m.len(), 4 << 20);
        assert_eq!(m.as_slice().as_ptr() as usize % PMD, 0);
        m.advise(libc::MADV_HUGEPAGE).unwrap();
        m.as_mut_slice()[(4 << 20) - 1] = 9;
        assert_eq!(m.as_slice()[(4 << 20) - 1], 9);
        assert!(m.as_slice()[..4096].iter().all(|&b| b == 0));
        let odd = Mmap::anonymous_aligned(5000, 8192).unwrap();
        assert_eq!(odd.as_slice().as_ptr() as usize % 8192, 0);
        assert!(Mmap::anonymous_aligned(4096, 3000).is_err());
        assert!(Mmap::anonymous_aligned(4096, 2048).is_err());
        assert!(Mmap::anonymous_aligned(0, 4096).is_err());
    }

    #[test]
    fn refuses_empty() {
        assert!(Mmap::anonymous(0).is_err());
    }
}
