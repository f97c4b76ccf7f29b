// SPDX-License-Identifier: GPL-2.0
//! Where in the target each test case operates.
//!
//! Offsets are relative to the start of the target buffer, which the binary
//! allocates page aligned. Cases that would not fit a (small) target are left
//! out rather than clipped, so every listed case tests what its name says.

use crate::config::PAGE_SIZE;

/// Target offsets of the RDMA WRITE/READ cases: page aligned, off by one,
/// at each 1 KiB step inside a page, last byte of a page, and inside the
/// second page.
pub const WRITE_READ_OFFSETS: [usize; 7] = [0, 1, 1024, 2048, 3072, 4095, 4096 + 512];

/// Lengths of the RDMA WRITE/READ cases: one byte, just under, at and over a
/// 1 KiB packet, a page, more than a page, and many pages plus an odd tail.
pub const WRITE_READ_LENGTHS: [usize; 6] = [1, 1000, 1024, 4096, 5000, 64 * 1024 + 7];

/// Target offset and length of the SEND/RECV cases: unaligned, several
/// packets at any MTU, crossing three page boundaries.
pub const SEND_RECV: Span = Span {
    offset: 2 * PAGE_SIZE + 1234,
    len: 10_000,
};

/// Target offset and length of the RDMA WRITE with immediate case.
pub const WRITE_IMM: Span = Span {
    offset: 3 * PAGE_SIZE + 3,
    len: 5000,
};

/// 8-byte aligned target offsets of the atomic cases: the first words of
/// the first page, its middle and its last word, and the second page.
pub const ATOMIC_OFFSETS: [usize; 6] = [0, 8, 2048, PAGE_SIZE - 8, PAGE_SIZE, PAGE_SIZE + 1032];

/// The longest transfer of any case.
pub const MAX_LEN: usize = 64 * 1024 + 7;

/// A byte range of the target by offset and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub offset: usize,
    /// Number of bytes.
    pub len: usize,
}

impl Span {
    /// One past the last byte.
    pub fn end(&self) -> usize {
        self.offset + self.len
    }

    /// Whether the span lies inside a buffer of `size` bytes.
    pub fn fits(&self, size: usize) -> bool {
        self.offset
            .checked_add(self.len)
            .is_some_and(|end| end <= size)
    }

    /// The span widened by `guard` bytes on each side, clipped to `size`.
    pub fn guarded(&self, guard: usize, size: usize) -> std::ops::Range<usize> {
        self.offset.saturating_sub(guard)..self.end().saturating_add(guard).min(size)
    }
}

/// The RDMA WRITE/READ cases that fit a target of `size` bytes: every
/// offset with every length, by offset first.
pub fn write_read_cases(size: usize) -> Vec<Span> {
    WRITE_READ_OFFSETS
        .iter()
        .flat_map(|&offset| {
            WRITE_READ_LENGTHS
                .iter()
                .map(move |&len| Span { offset, len })
        })
        .filter(|span| span.fits(size))
        .collect()
}

/// The atomic case offsets whose 8 bytes fit a target of `size` bytes.
pub fn atomic_offsets(size: usize) -> Vec<usize> {
    ATOMIC_OFFSETS
        .iter()
        .copied()
        .filter(|&off| off + 8 <= size)
        .collect()
}

/// Layout of the local (source and sink) buffer.
///
/// Each region starts page aligned, and a transfer to or from target offset
/// `o` uses local offset `region + o % PAGE_SIZE`, so the local side has the
/// same alignment within a page as the target side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalLayout {
    /// Size of the source and of the sink region.
    pub region: usize,
}

impl LocalLayout {
    /// The layout for transfers up to [`MAX_LEN`] bytes.
    pub const fn new() -> Self {
        Self {
            region: (MAX_LEN + PAGE_SIZE).div_ceil(PAGE_SIZE) * PAGE_SIZE,
        }
    }

    /// Total size: source, sink, and a page for atomic results.
    pub const fn size(&self) -> usize {
        2 * self.region + PAGE_SIZE
    }

    /// Local offset of the data written to, or sent from, target `span`.
    pub fn source(&self, span: Span) -> usize {
        span.offset % PAGE_SIZE
    }

    /// Start of the sink region.
    pub fn sink_base(&self) -> usize {
        self.region
    }

    /// Local offset that receives target `span` by READ or RECV.
    pub fn sink(&self, span: Span) -> usize {
        self.region + span.offset % PAGE_SIZE
    }

    /// Local offset of the 8-byte atomic result.
    pub fn atomic_result(&self) -> usize {
        2 * self.region
    }
}

impl Default for LocalLayout {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_matrix_fits_the_default_target() {
        let cases = write_read_cases(4 << 20);
        assert_eq!(
            cases.len(),
            WRITE_READ_OFFSETS.len() * WRITE_READ_LENGTHS.len()
        );
        assert_eq!(cases[0], Span { offset: 0, len: 1 });
        assert_eq!(
            cases[7],
            Span {
                offset: 1,
                len: 1000
            }
        );
        assert!(cases
            .iter()
            .any(|c| c.offset % PAGE_SIZE == 0 && c.len % PAGE_SIZE == 0));
        assert!(cases.iter().any(|c| c.offset % 4 != 0 && c.len % 4 != 0));
        assert!(cases
            .iter()
            .any(|c| c.offset / PAGE_SIZE != (c.end() - 1) / PAGE_SIZE));
    }

    #[test]
    fn small_targets_drop_cases_that_do_not_fit() {
        let cases = write_read_cases(PAGE_SIZE);
        assert!(!cases.is_empty());
        assert!(cases.iter().all(|c| c.fits(PAGE_SIZE)));
        assert!(cases.contains(&Span {
            offset: 4095,
            len: 1
        }));
        assert!(!cases.contains(&Span {
            offset: 4095,
            len: 1000
        }));
        assert!(write_read_cases(0).is_empty());
    }

    #[test]
    fn atomic_offsets_are_aligned_and_reach_the_second_page() {
        assert!(ATOMIC_OFFSETS.iter().all(|off| off % 8 == 0));
        assert!(ATOMIC_OFFSETS.iter().any(|&off| off >= PAGE_SIZE));
        assert_eq!(atomic_offsets(PAGE_SIZE), [0, 8, 2048, PAGE_SIZE - 8]);
        assert_eq!(atomic_offsets(4 << 20), ATOMIC_OFFSETS);
    }

    #[test]
    fn fixed_spans_are_unaligned_and_multi_page() {
        for span in [SEND_RECV, WRITE_IMM] {
            assert_ne!(span.offset % 4, 0);
            assert!(span.len <= MAX_LEN);
            assert!(span.offset / PAGE_SIZE != (span.end() - 1) / PAGE_SIZE);
        }
    }

    #[test]
    fn spans() {
        let s = Span { offset: 10, len: 5 };
        assert_eq!(s.end(), 15);
        assert!(s.fits(15));
        assert!(!s.fits(14));
        assert!(!Span {
            offset: usize::MAX,
            len: 1
        }
        .fits(usize::MAX));
        assert_eq!(s.guarded(4, 100), 6..19);
        assert_eq!(s.guarded(20, 17), 0..17);
    }

    #[test]
    fn local_layout_holds_every_transfer() {
        let l = LocalLayout::new();
        assert_eq!(l.region % PAGE_SIZE, 0);
        let spans = write_read_cases(usize::MAX)
            .into_iter()
            .chain([SEND_RECV, WRITE_IMM]);
        for span in spans {
            assert!(l.source(span) + span.len <= l.sink_base());
            assert!(l.sink(span) >= l.sink_base());
            assert!(l.sink(span) + span.len <= l.atomic_result());
            assert_eq!(l.sink(span) % PAGE_SIZE, span.offset % PAGE_SIZE);
        }
        assert_eq!(l.atomic_result() % 8, 0);
        assert!(l.atomic_result() + 8 <= l.size());
    }
}
