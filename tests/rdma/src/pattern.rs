// SPDX-License-Identifier: GPL-2.0
//! Position- and seed-dependent data patterns, and exact verification.
//!
//! Every byte written by a test case is a hash of its offset in the target
//! buffer and of the case's seed, so data that lands at the wrong offset,
//! data from another case, stale data and the background all fail to match.
//! Verification compares each byte at its exact offset and counts wrong
//! bytes and wrong 32-bit words (a word counts once if any of its bytes in
//! the checked range is wrong; words are aligned to the target's start).

use std::fmt;
use std::ops::Range;

/// Seed of the background pattern every unwritten target byte holds.
pub const BACKGROUND_SEED: u32 = 0;

/// SplitMix64 finaliser.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The pattern's eight bytes at offsets `8 * index .. 8 * index + 8`.
fn pattern_word(index: u64, seed: u32) -> u64 {
    mix(index.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (u64::from(seed) << 32 | u64::from(seed)))
}

/// The pattern byte at offset `pos` for `seed`.
pub fn pattern_byte(pos: usize, seed: u32) -> u8 {
    let word = pattern_word((pos / 8) as u64, seed);
    word.to_le_bytes()[pos % 8]
}

/// The pattern's little-endian `u64` at offset `pos` (need not be aligned).
pub fn pattern_u64(pos: usize, seed: u32) -> u64 {
    let mut bytes = [0; 8];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = pattern_byte(pos + i, seed);
    }
    u64::from_le_bytes(bytes)
}

/// Fills `buf`, whose first byte stands at offset `pos`, with the pattern.
///
/// Computes each 8-byte pattern word once (the benchmark fills tens of
/// MiB under emulation); the bytes are those of [`pattern_byte`].
pub fn fill(buf: &mut [u8], pos: usize, seed: u32) {
    let head = ((8 - pos % 8) % 8).min(buf.len());
    let (head_bytes, rest) = buf.split_at_mut(head);
    for (i, b) in head_bytes.iter_mut().enumerate() {
        *b = pattern_byte(pos + i, seed);
    }
    let start = pos + head;
    let tail_pos = start + rest.len() / 8 * 8;
    let mut words = rest.chunks_exact_mut(8);
    for (i, chunk) in (&mut words).enumerate() {
        let index = (start / 8 + i) as u64;
        chunk.copy_from_slice(&pattern_word(index, seed).to_le_bytes());
    }
    let tail = words.into_remainder();
    for (i, b) in tail.iter_mut().enumerate() {
        *b = pattern_byte(tail_pos + i, seed);
    }
}

/// Whether `buf`, whose first byte stands at offset `pos`, holds the
/// pattern for `seed`, compared 8 bytes at a time.
fn matches_pattern(buf: &[u8], pos: usize, seed: u32) -> bool {
    let head = ((8 - pos % 8) % 8).min(buf.len());
    let (head_bytes, rest) = buf.split_at(head);
    if head_bytes
        .iter()
        .enumerate()
        .any(|(i, &b)| b != pattern_byte(pos + i, seed))
    {
        return false;
    }
    let start = pos + head;
    let words = rest.chunks_exact(8);
    let tail = words.remainder();
    let tail_pos = start + (rest.len() - tail.len());
    words
        .enumerate()
        .all(|(i, chunk)| chunk == pattern_word((start / 8 + i) as u64, seed).to_le_bytes())
        && tail
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern_byte(tail_pos + i, seed))
}

/// Number of 32-bit words (aligned to offset 0) that `len` bytes at `pos`
/// touch.
fn words_touched(pos: usize, len: usize) -> u64 {
    if len == 0 {
        0
    } else {
        ((pos + len - 1) / 4 - pos / 4 + 1) as u64
    }
}

/// Fills `target[range]` with the pattern, at the range's own offsets.
pub fn fill_range(target: &mut [u8], range: Range<usize>, seed: u32) {
    let pos = range.start;
    fill(&mut target[range], pos, seed);
}

/// Number of wrong and of checked 32-bit words.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WordStats {
    /// Words with at least one wrong byte.
    pub wrong: u64,
    /// Words checked.
    pub total: u64,
}

impl std::ops::AddAssign for WordStats {
    fn add_assign(&mut self, other: Self) {
        self.wrong += other.wrong;
        self.total += other.total;
    }
}

impl fmt::Display for WordStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {}", self.wrong, self.total)
    }
}

/// The first wrong byte of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Offset in the target of the byte.
    pub pos: usize,
    /// The byte found.
    pub got: u8,
    /// The byte expected.
    pub want: u8,
}

/// The result of comparing a buffer with what it should hold.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    /// Bytes compared.
    pub bytes: usize,
    /// Bytes that differ.
    pub wrong_bytes: usize,
    /// 32-bit words, as in [`WordStats`].
    pub words: WordStats,
    /// The wrong byte at the lowest offset.
    pub first: Option<Mismatch>,
}

impl Check {
    /// True if every byte matched.
    pub fn is_ok(&self) -> bool {
        self.wrong_bytes == 0
    }

    /// Merges the check of another range into this one.
    pub fn merge(&mut self, other: Check) {
        self.bytes += other.bytes;
        self.wrong_bytes += other.wrong_bytes;
        self.words += other.words;
        self.first = match (self.first, other.first) {
            (Some(a), Some(b)) => Some(if b.pos < a.pos { b } else { a }),
            (a, b) => a.or(b),
        };
    }

    /// One diagnostic line naming `what` was checked, or `None` if it
    /// matched, e.g. `write: 750 of 1000 bytes wrong (188 of 251 words),
    /// first at offset 0x1 (got 0x00, want 0x5a)`.
    pub fn describe(&self, what: &str) -> Option<String> {
        let first = self.first?;
        Some(format!(
            "{what}: {} of {} bytes wrong ({} words), first at offset {:#x} (got {:#04x}, want {:#04x})",
            self.wrong_bytes, self.bytes, self.words, first.pos, first.got, first.want
        ))
    }
}

/// Compares `buf`, whose first byte stands at offset `pos`, with
/// `expect(offset)` byte by byte.
pub fn check_with(buf: &[u8], pos: usize, expect: impl Fn(usize) -> u8) -> Check {
    let mut check = Check {
        bytes: buf.len(),
        ..Check::default()
    };
    let mut word = None;
    let mut word_wrong = false;
    for (i, &got) in buf.iter().enumerate() {
        let at = pos + i;
        if word != Some(at / 4) {
            if word.is_some() {
                check.words.wrong += u64::from(word_wrong);
            }
            check.words.total += 1;
            word = Some(at / 4);
            word_wrong = false;
        }
        let want = expect(at);
        if got != want {
            check.wrong_bytes += 1;
            word_wrong = true;
            if check.first.is_none() {
                check.first = Some(Mismatch { pos: at, got, want });
            }
        }
    }
    check.words.wrong += u64::from(word_wrong);
    check
}

/// Compares `buf`, whose first byte stands at offset `pos`, with the
/// pattern for `seed`.
///
/// A buffer that matches is recognised 8 bytes at a time; only one that
/// does not is compared byte by byte, for the counts and the first
/// mismatch.
pub fn check(buf: &[u8], pos: usize, seed: u32) -> Check {
    if matches_pattern(buf, pos, seed) {
        return Check {
            bytes: buf.len(),
            words: WordStats {
                wrong: 0,
                total: words_touched(pos, buf.len()),
            },
            ..Check::default()
        };
    }
    check_with(buf, pos, |at| pattern_byte(at, seed))
}

/// Compares `buf` with zeroes; offsets in the result are `pos`-based.
pub fn check_zero(buf: &[u8], pos: usize) -> Check {
    check_with(buf, pos, |_| 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_seed_dependent() {
        let mut a = vec![0; 4096];
        let mut b = vec![0; 4096];
        fill(&mut a, 100, 7);
        fill(&mut b, 100, 7);
        assert_eq!(a, b);
        fill(&mut b, 100, 8);
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(same < 64, "{same} equal bytes across seeds");
        assert_eq!(pattern_byte(100, 7), a[0]);
    }

    #[test]
    fn background_differs_from_case_seeds() {
        let mut bg = vec![0; 4096];
        fill(&mut bg, 0, BACKGROUND_SEED);
        assert!(!check(&bg, 0, 1).is_ok());
        assert!(check(&bg, 0, BACKGROUND_SEED).is_ok());
    }

    #[test]
    fn shifted_data_is_detected_at_every_shift() {
        let mut data = vec![0; 2048];
        fill(&mut data, 1000, 3);
        for shift in [1usize, 2, 3, 4, 8, 16, 512, 1024] {
            let c = check(&data, 1000 + shift, 3);
            assert!(c.wrong_bytes > data.len() * 9 / 10, "shift {shift}: {c:?}");
        }
        assert!(check(&data, 1000, 3).is_ok());
    }

    #[test]
    fn not_constant_within_a_word() {
        let words: Vec<u64> = (0..64).map(|i| pattern_u64(i * 8, 5)).collect();
        for w in &words {
            let bytes = w.to_le_bytes();
            assert!(bytes.iter().any(|&b| b != bytes[0]), "{w:#x}");
        }
        assert_eq!(pattern_u64(8, 5), words[1]);
    }

    #[test]
    fn counts_words_at_target_alignment() {
        // 10 bytes from offset 3 touch words 0 (byte 3), 1, 2 and 3 (byte 12).
        let mut buf = vec![0; 10];
        fill(&mut buf, 3, 9);
        let c = check(&buf, 3, 9);
        assert_eq!(c.words, WordStats { wrong: 0, total: 4 });
        assert!(c.describe("write").is_none());

        buf[0] ^= 1; // word 0
        buf[5] ^= 1; // offset 8: word 2
        buf[6] ^= 1; // offset 9: word 2 again
        let c = check(&buf, 3, 9);
        assert_eq!(c.wrong_bytes, 3);
        assert_eq!(c.words, WordStats { wrong: 2, total: 4 });
        let first = c.first.unwrap();
        assert_eq!(first.pos, 3);
        assert_eq!(first.want, pattern_byte(3, 9));
        assert_eq!(first.got, pattern_byte(3, 9) ^ 1);
        let line = c.describe("write").unwrap();
        assert!(
            line.starts_with("write: 3 of 10 bytes wrong (2 of 4 words), first at offset 0x3"),
            "{line}"
        );
    }

    /// The bug this suite is meant to catch: at MTU 1024, packets of an
    /// unaligned transfer corrupt 3 of every 4 words.
    #[test]
    fn catches_three_of_four_words_wrong() {
        let pos = 4096 + 1;
        let len = 5000;
        let mut buf = vec![0; len];
        fill(&mut buf, pos, 11);
        for (i, b) in buf.iter_mut().enumerate() {
            if ((pos + i) / 4) % 4 != 0 {
                *b = 0;
            }
        }
        let c = check(&buf, pos, 11);
        let ratio = c.words.wrong as f64 / c.words.total as f64;
        assert!((0.73..0.77).contains(&ratio), "{c:?}");
    }

    #[test]
    fn zero_check_and_merge() {
        let mut buf = vec![0; 32];
        assert!(check_zero(&buf, 0).is_ok());
        buf[20] = 1;
        let mut c = check_zero(&buf[16..], 16);
        assert_eq!(c.first.map(|m| m.pos), Some(20));
        let mut low = check_zero(&[2], 3);
        low.merge(c);
        assert_eq!(low.first.map(|m| m.pos), Some(3));
        assert_eq!(low.wrong_bytes, 2);
        assert_eq!(low.bytes, 17);
        c.merge(Check::default());
        assert_eq!(c.first.map(|m| m.pos), Some(20));
    }

    #[test]
    fn word_wise_fill_and_check_match_the_bytes() {
        for pos in [0usize, 1, 3, 7, 8, 13, 4096 - 5] {
            for len in [0usize, 1, 5, 8, 9, 16, 23, 100] {
                let mut buf = vec![0xa5; len];
                fill(&mut buf, pos, 21);
                for (i, &b) in buf.iter().enumerate() {
                    assert_eq!(b, pattern_byte(pos + i, 21), "pos {pos} len {len} byte {i}");
                }
                let fast = check(&buf, pos, 21);
                let slow = check_with(&buf, pos, |at| pattern_byte(at, 21));
                assert_eq!(fast, slow, "pos {pos} len {len}");
                if len > 0 {
                    buf[len - 1] ^= 0x10;
                    let fast = check(&buf, pos, 21);
                    assert_eq!(fast, check_with(&buf, pos, |at| pattern_byte(at, 21)));
                    assert_eq!(fast.wrong_bytes, 1);
                    assert_eq!(fast.first.map(|m| m.pos), Some(pos + len - 1));
                }
            }
        }
    }

    #[test]
    fn fill_range_uses_absolute_offsets() {
        let mut target = vec![0; 64];
        fill_range(&mut target, 10..20, 4);
        assert!(check(&target[10..20], 10, 4).is_ok());
        assert!(check_zero(&target[..10], 0).is_ok());
        assert!(check_zero(&target[20..], 20).is_ok());
    }
}
