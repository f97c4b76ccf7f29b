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
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "zero-length mapping",
            ));
        }
        // SAFETY: a fresh anonymous private mapping at an address of the
        // kernel's choice overlaps no existing Rust object; the arguments are
        // valid for mmap(2), and failure is reported as MAP_FAILED.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
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
    fn refuses_empty() {
        assert!(Mmap::anonymous(0).is_err());
    }
}
