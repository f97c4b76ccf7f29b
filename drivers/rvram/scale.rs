// SPDX-License-Identifier: GPL-2.0

//! The debugfs files of the scale benchmark, on device-private GPUs: `fill`
//! takes VRAM from the allocator in 2 MiB blocks without touching it (the
//! emulated BAR commits host memory only for what is written), and
//! `alloc_bench` times folio allocations at that fill.
//!
//! `fill` accepts a percentage of VRAM, `0` to `99`, or `frag`: every
//! 2 MiB block that is free, then every other one of them given back, so
//! that free VRAM is all in separate 2 MiB holes. `free N` takes all but
//! `N` blocks, and `frag N` all but `N` separate holes, the lowest odd
//! blocks: the same free state at any VRAM size, to compare sizes doing the
//! same work from the same state. It replaces the previous
//! fill and reads back as `blocks B pages P of N`. `alloc_bench` accepts
//! `ORDER COUNT [ROUNDS]`: in each of `ROUNDS` rounds (default 1), it
//! allocates up to `COUNT` folios of `ORDER` (0 or 9) one after the other,
//! each timed, holding them all, then frees them. It reads back as
//! `order O asked C allocated A p50_ns X p99_ns Y max_ns Z rounds R`, over
//! the `A` allocations of all rounds, or `none` before the first run. Both
//! files belong to the benchmark
//! (`make bench`): they only exist for the root-owned debugfs tree.

use crate::{
    gpu::{
        Gpu,
        Vram, //
    },
    pages::PrivatePages,
};
use kernel::{
    mm::pagemap::{
        Pagemap,
        Reservation,
        MAX_FOLIO_ORDER, //
    },
    prelude::*,
    sync::{
        new_mutex,
        Arc,
        Mutex, //
    },
    time::{
        Instant,
        Monotonic, //
    },
    uaccess::UserSliceReader,
};

/// Pages of a 2 MiB block, the unit of `fill`.
const BLOCK_PAGES: usize = 1 << MAX_FOLIO_ORDER;
/// The most allocations that one `alloc_bench` run times, in all rounds.
const MAX_ALLOCS: usize = 1 << 16;
/// The longest line either file accepts.
const MAX_INPUT: usize = 32;

/// What the last `alloc_bench` run measured.
#[derive(Clone, Copy)]
struct Latency {
    order: u32,
    asked: usize,
    rounds: usize,
    allocated: usize,
    p50: u64,
    p99: u64,
    max: u64,
}

/// How to fill VRAM.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// This percentage of VRAM's 2 MiB blocks, rounded down.
    Percent(usize),
    /// Every other free 2 MiB block.
    Fragmented,
    /// All but this many 2 MiB blocks.
    Free(usize),
    /// All but this many separate 2 MiB blocks: those of odd index below
    /// twice as many.
    Holes(usize),
}

struct State {
    /// The blocks `fill` holds.
    held: KVVec<Reservation>,
    last: Option<Latency>,
}

/// The benchmark state of one device-private GPU, shared by its two files.
/// The reservations it holds go back to the GPU's allocator when it goes.
#[pin_data]
pub(crate) struct ScaleBench {
    gpu: Arc<Gpu>,
    #[pin]
    state: Mutex<State>,
}

/// Sorts `v` in place: a heapsort, which needs no memory and no more than
/// `O(n log n)` steps for any input.
fn sort(v: &mut [u64]) {
    fn sift(v: &mut [u64], mut root: usize, end: usize) {
        loop {
            let mut child = 2 * root + 1;
            if child >= end {
                return;
            }
            if child + 1 < end && v[child] < v[child + 1] {
                child += 1;
            }
            if v[root] >= v[child] {
                return;
            }
            v.swap(root, child);
            root = child;
        }
    }
    let n = v.len();
    for i in (0..n / 2).rev() {
        sift(v, i, n);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift(v, 0, end);
    }
}

/// The value at `pct` percent of `sorted` (nearest rank), 0 if empty.
fn percentile(sorted: &[u64], pct: usize) -> u64 {
    let rank = (sorted.len() * pct).div_ceil(100);
    sorted.get(rank.saturating_sub(1)).copied().unwrap_or(0)
}

/// Reads what user space wrote to a file of ours: one short line.
fn read_words(reader: &mut UserSliceReader, buf: &mut [u8; MAX_INPUT]) -> Result<usize> {
    let n = reader.len();
    if n == 0 || n > buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    Ok(n)
}

impl ScaleBench {
    /// The benchmark state of `gpu`, which must have device-private VRAM.
    pub(crate) fn new(gpu: Arc<Gpu>) -> Result<Arc<Self>> {
        if !matches!(gpu.vram, Vram::Private(_)) {
            return Err(EINVAL);
        }
        Arc::pin_init(
            try_pin_init!(Self {
                gpu,
                state <- new_mutex!(State {
                    held: KVVec::new(),
                    last: None,
                }),
            }),
            GFP_KERNEL,
        )
    }

    fn pagemap(&self) -> Result<&Pagemap<PrivatePages>> {
        match &self.gpu.vram {
            Vram::Private(pm) => Ok(pm),
            Vram::Coherent(_) => Err(ENODEV),
        }
    }

    /// Replaces the fill with `how`; `ENOSPC` (and no fill) if a
    /// percentage cannot be reached.
    fn fill(&self, how: Fill) -> Result {
        let _bound = self.gpu.hold_bound()?;
        let pm = self.pagemap()?;
        let mut state = self.state.lock();
        state.held.clear();
        let blocks = pm.nr_pages() / BLOCK_PAGES;
        let (want, hole) = match how {
            Fill::Percent(pct) => (blocks * pct / 100, None),
            Fill::Fragmented => (blocks, Some(blocks)),
            Fill::Free(n) if n <= blocks => (blocks - n, None),
            Fill::Holes(n) if n <= blocks / 2 => (blocks, Some(2 * n)),
            Fill::Free(_) | Fill::Holes(_) => return Err(EINVAL),
        };
        // Room for every block first: the pushes below do not allocate.
        let mut held = KVVec::with_capacity(want, GFP_KERNEL)?;
        let mut kept = KVVec::with_capacity(if hole.is_some() { want } else { 0 }, GFP_KERNEL)?;
        while held.len() < want {
            match pm.reserve(BLOCK_PAGES) {
                Ok(r) => held.push(r, GFP_KERNEL)?,
                // Holes take what is free, whatever that is.
                Err(e) if e == ENOMEM && hole.is_some() => break,
                Err(e) => {
                    held.clear();
                    return Err(if e == ENOMEM { ENOSPC } else { e });
                }
            }
        }
        if let Some(below) = hole {
            while let Some(r) = held.pop() {
                let block = r.index() / BLOCK_PAGES;
                // The others go back to the allocator.
                if block % 2 == 0 || block >= below {
                    kept.push(r, GFP_KERNEL)?;
                }
            }
            held = kept;
        }
        state.held = held;
        Ok(())
    }

    /// Times up to `asked` allocations of folios of `order`, held until
    /// the last, then freed, in each of `rounds` rounds.
    fn alloc_bench(&self, order: u32, asked: usize, rounds: usize) -> Result {
        let samples = match asked.checked_mul(rounds) {
            Some(n) if n > 0 && n <= MAX_ALLOCS => n,
            _ => return Err(EINVAL),
        };
        let _bound = self.gpu.hold_bound()?;
        let pm = self.pagemap()?;
        let mut state = self.state.lock();
        let mut ns = KVVec::with_capacity(samples, GFP_KERNEL)?;
        let mut folios = KVVec::with_capacity(asked, GFP_KERNEL)?;
        for _ in 0..rounds {
            while folios.len() < asked {
                let start = Instant::<Monotonic>::now();
                let folio = match pm.alloc_folio(order) {
                    Ok(f) => f,
                    Err(e) if e == ENOMEM => break,
                    Err(e) => return Err(e),
                };
                let took = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                folios.push(folio, GFP_KERNEL)?;
                ns.push(took, GFP_KERNEL)?;
            }
            folios.clear();
        }
        sort(&mut ns);
        state.last = Some(Latency {
            order,
            asked,
            rounds,
            allocated: ns.len(),
            p50: percentile(&ns, 50),
            p99: percentile(&ns, 99),
            max: ns.last().copied().unwrap_or(0),
        });
        Ok(())
    }
}

/// Shows the fill: `blocks B pages P of N`.
pub(crate) fn show_fill(
    bench: &Arc<ScaleBench>,
    f: &mut core::fmt::Formatter<'_>,
) -> core::fmt::Result {
    let blocks = bench.state.lock().held.len();
    let total = bench.pagemap().map_or(0, |pm| pm.nr_pages());
    writeln!(
        f,
        "blocks {blocks} pages {} of {total}",
        blocks * BLOCK_PAGES
    )
}

/// Sets the fill: a percentage from 0 to 99, `frag`, `free N` or `frag N`;
/// `EINVAL` otherwise.
pub(crate) fn store_fill(bench: &Arc<ScaleBench>, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; MAX_INPUT];
    let n = read_words(reader, &mut buf)?;
    let word = core::str::from_utf8(&buf[..n]).map_err(|_| EINVAL)?.trim();
    let mut words = word.split_ascii_whitespace();
    let count = |w: Option<&str>| w.and_then(|w| w.parse::<usize>().ok()).ok_or(EINVAL);
    let how = match (words.next(), words.next(), words.next()) {
        (Some("frag"), None, None) => Fill::Fragmented,
        (Some("frag"), n, None) => Fill::Holes(count(n)?),
        (Some("free"), n, None) => Fill::Free(count(n)?),
        (pct, None, None) => match count(pct)? {
            pct if pct < 100 => Fill::Percent(pct),
            _ => return Err(EINVAL),
        },
        _ => return Err(EINVAL),
    };
    bench.fill(how)
}

/// Shows the last allocation run.
pub(crate) fn show_alloc_bench(
    bench: &Arc<ScaleBench>,
    f: &mut core::fmt::Formatter<'_>,
) -> core::fmt::Result {
    match bench.state.lock().last {
        None => writeln!(f, "none"),
        Some(l) => writeln!(
            f,
            "order {} asked {} allocated {} p50_ns {} p99_ns {} max_ns {} rounds {}",
            l.order, l.asked, l.allocated, l.p50, l.p99, l.max, l.rounds
        ),
    }
}

/// Runs an allocation benchmark: `ORDER COUNT [ROUNDS]`, with ORDER 0 or 9,
/// COUNT and ROUNDS from 1, and COUNT times ROUNDS at most 65536; `EINVAL`
/// otherwise.
pub(crate) fn store_alloc_bench(bench: &Arc<ScaleBench>, reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; MAX_INPUT];
    let n = read_words(reader, &mut buf)?;
    let text = core::str::from_utf8(&buf[..n]).map_err(|_| EINVAL)?;
    let mut words = text.split_ascii_whitespace();
    let (Some(order), Some(count), rounds, None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(EINVAL);
    };
    let order = order.parse::<u32>().map_err(|_| EINVAL)?;
    let count = count.parse::<usize>().map_err(|_| EINVAL)?;
    let rounds = rounds.map_or(Ok(1), |r| r.parse::<usize>().map_err(|_| EINVAL))?;
    if order != 0 && order != MAX_FOLIO_ORDER {
        return Err(EINVAL);
    }
    bench.alloc_bench(order, count, rounds)
}

#[kunit_tests(rvram_scale)]
mod tests {
    use super::*;

    #[test]
    fn sorts_any_order() -> Result {
        let mut v = KVec::new();
        // A permutation of 0..1000 with runs up and down and repeats.
        for i in 0..1000u64 {
            v.push((i * 7919) % 1000 / 2, GFP_KERNEL)?;
        }
        sort(&mut v);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!((v[0], v[999]), (0, 499));
        let mut empty: [u64; 0] = [];
        sort(&mut empty);
        let mut one = [5u64];
        sort(&mut one);
        assert_eq!(one, [5]);
        Ok(())
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: [u64; 100] = core::array::from_fn(|i| i as u64 + 1);
        assert_eq!(percentile(&v, 50), 50);
        assert_eq!(percentile(&v, 99), 99);
        assert_eq!(percentile(&v, 100), 100);
        assert_eq!(percentile(&v[..3], 99), 3);
        assert_eq!(percentile(&v[..1], 50), 1);
        assert_eq!(percentile(&[], 99), 0);
    }
}
