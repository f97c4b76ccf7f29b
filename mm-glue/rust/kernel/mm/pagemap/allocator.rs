// SPDX-License-Identifier: GPL-2.0

//! The page allocator of a [`Pagemap`](super::Pagemap): the GPU buddy
//! allocator ([`crate::gpu::buddy`]) over its pages, with single pages
//! sub-allocated from PMD-sized blocks, and frees that neither sleep nor
//! take a mutex, as `folio_free` may run in any context.

use super::MAX_FOLIO_ORDER;
use crate::{
    bitmap::BitmapVec,
    gpu::buddy::{
        AllocatedBlocks,
        GpuBuddy,
        GpuBuddyAllocFlag,
        GpuBuddyAllocFlags,
        GpuBuddyAllocMode,
        GpuBuddyParams, //
    },
    new_mutex,
    prelude::*,
    ptr::Alignment,
    sync::{
        Arc,
        Mutex,
        SpinLockIrq, //
    },
};

/// Pages per chunk: the PMD-sized blocks a pagemap takes from its buddy
/// allocator for folios.
pub(super) const CHUNK_PAGES: usize = 1 << MAX_FOLIO_ORDER;

/// Bytes per chunk.
pub(super) const CHUNK_SIZE: usize = crate::page::PAGE_SIZE << MAX_FOLIO_ORDER;

/// A chunk of [`CHUNK_PAGES`] pages, as the pagemap tracks it.
struct Chunk {
    /// The chunk's buddy block while the pagemap holds the chunk.
    block: Option<Pin<KBox<AllocatedBlocks>>>,
    /// How many of its pages are in folios.
    used: usize,
}

/// The chunks a pagemap holds from its buddy allocator, and their pages.
///
/// A held chunk is a PMD-sized folio, or split into single-page folios
/// (allocated lowest page first), or idle: free, and kept for the next
/// folio rather than given back to the buddy allocator at once, because
/// `folio_free` cannot take the buddy allocator's mutex (which giving a
/// block back does, and it may reschedule). `bits` has a bit set for
/// every page in a folio, of either order: a PMD folio can be split
/// while it is in use (a device THP split in place) and its pages then
/// freed one by one, after which the chunk is partly used like any other.
///
/// # Invariants
///
/// - `chunks[c].block` is set exactly while chunk `c` is held: it is then
///   one block of the pagemap's buddy allocator at the chunk's offset, of
///   the chunk's size. (The unit tests of the chunk table mark chunks held
///   without blocks; nothing else does.)
/// - A held chunk has `used` bits set among its pages in `bits`: the pages
///   in folios. It is in use (`0 < used`, `in_use` set; `partial` set if
///   `used < CHUNK_PAGES`), or idle (`used == 0`, `idle` set). `bits`,
///   `in_use`, `partial` and `idle` have no other bits set.
/// - `allocated` is the sum of `used`, `reserved` the number of pages in
///   [`Reservation`]s.
/// - No bit of `partial` below `partial_from` is set, nor of `idle` below
///   `idle_from`.
pub(super) struct Pages {
    chunks: KVec<Chunk>,
    /// One bit per page: set while the page is in a folio.
    bits: BitmapVec,
    /// One bit per chunk: some of its pages are in folios.
    in_use: BitmapVec,
    /// One bit per chunk: split with both used and free pages.
    partial: BitmapVec,
    /// One bit per chunk: held but free.
    pub(super) idle: BitmapVec,
    /// Where searches of `partial` and `idle` start. The buddy allocator
    /// hands out its highest free block first, so the chunks in use sit
    /// at the top of a large pagemap: a search from chunk 0 would cost a
    /// bit per chunk of the whole pagemap on every allocation.
    pub(super) partial_from: usize,
    pub(super) idle_from: usize,
    pub(super) allocated: usize,
    pub(super) reserved: usize,
}

impl Pages {
    /// The books of `nr_pages` pages, a whole number of chunks.
    pub(super) fn new(nr_pages: usize) -> Result<Self> {
        if nr_pages % CHUNK_PAGES != 0 {
            return Err(EINVAL);
        }
        let nr_chunks = nr_pages / CHUNK_PAGES;
        let mut chunks = KVec::with_capacity(nr_chunks, GFP_KERNEL)?;
        for _ in 0..nr_chunks {
            let free = Chunk {
                block: None,
                used: 0,
            };
            chunks.push_within_capacity(free).map_err(|_| ENOMEM)?;
        }
        // INVARIANT: Nothing is held.
        Ok(Self {
            chunks,
            bits: BitmapVec::new(nr_pages, GFP_KERNEL)?,
            in_use: BitmapVec::new(nr_chunks, GFP_KERNEL)?,
            partial: BitmapVec::new(nr_chunks, GFP_KERNEL)?,
            idle: BitmapVec::new(nr_chunks, GFP_KERNEL)?,
            partial_from: nr_chunks,
            idle_from: nr_chunks,
            allocated: 0,
            reserved: 0,
        })
    }

    /// The first bit set in `bits` at or after `from`, which may be past
    /// the end.
    fn next_set(bits: &BitmapVec, from: usize) -> Option<usize> {
        if from < bits.len() {
            bits.next_bit(from)
        } else {
            None
        }
    }

    /// Takes the lowest idle chunk.
    fn take_idle(&mut self) -> Option<usize> {
        let Some(c) = Self::next_set(&self.idle, self.idle_from) else {
            // INVARIANT: No bit of `idle` is set from `idle_from` on.
            self.idle_from = self.idle.len();
            return None;
        };
        // INVARIANT: None below `c` was set; `c` is cleared.
        self.idle_from = c;
        self.idle.clear_bit(c);
        Some(c)
    }

    /// Marks chunk `c` idle.
    pub(super) fn set_idle(&mut self, c: usize) {
        self.idle.set_bit(c);
        // INVARIANT: `idle_from` stays at or below every set bit.
        self.idle_from = self.idle_from.min(c);
    }

    /// Marks chunk `c` partly used.
    fn set_partial(&mut self, c: usize) {
        self.partial.set_bit(c);
        // INVARIANT: `partial_from` stays at or below every set bit.
        self.partial_from = self.partial_from.min(c);
    }

    /// The lowest partly used chunk.
    fn lowest_partial(&mut self) -> Option<usize> {
        let found = Self::next_set(&self.partial, self.partial_from);
        // INVARIANT: No bit below the one found (or none at all) is set.
        self.partial_from = found.unwrap_or(self.partial.len());
        found
    }

    /// Allocates a single page: the lowest free page of the lowest partly
    /// used chunk, else the first page of an idle chunk.
    fn take_page(&mut self) -> Option<usize> {
        let c = match self.lowest_partial() {
            Some(c) => c,
            None => self.take_idle()?,
        };
        // A partial or idle chunk has a free page.
        let index = self.bits.next_zero_bit(c * CHUNK_PAGES)?;
        self.bits.set_bit(index);
        let chunk = &mut self.chunks[c];
        chunk.used += 1;
        self.in_use.set_bit(c);
        if chunk.used < CHUNK_PAGES {
            self.set_partial(c);
        } else {
            self.partial.clear_bit(c);
        }
        // INVARIANT: The chunk has one more page used, and its bit set.
        self.allocated += 1;
        Some(index)
    }

    /// Allocates an idle chunk as a PMD folio.
    fn take_chunk(&mut self) -> Option<usize> {
        let c = self.take_idle()?;
        for index in c * CHUNK_PAGES..(c + 1) * CHUNK_PAGES {
            self.bits.set_bit(index);
        }
        // INVARIANT: Every page of the idle chunk is used now, by one folio.
        self.chunks[c].used = CHUNK_PAGES;
        self.in_use.set_bit(c);
        self.allocated += CHUNK_PAGES;
        Some(c * CHUNK_PAGES)
    }

    /// Allocates a folio of `order` (0 or [`MAX_FOLIO_ORDER`]) from the held
    /// chunks, if one fits.
    pub(super) fn take(&mut self, order: u32) -> Option<usize> {
        if order == 0 {
            self.take_page()
        } else {
            self.take_chunk()
        }
    }

    /// Adds `block`, one chunk-sized block just allocated from the
    /// pagemap's buddy allocator at `offset`, as an idle chunk.
    fn hold(&mut self, block: Pin<KBox<AllocatedBlocks>>, offset: u64) {
        let c = offset as usize / CHUNK_SIZE;
        // The buddy allocator just handed out the chunk's range: it was not
        // held (and no block is dropped here, under the spinlock).
        debug_assert!(self.chunks[c].block.is_none());
        // INVARIANT: The chunk is held and idle; as no folio used its pages,
        // none of its bits is set.
        self.chunks[c] = Chunk {
            block: Some(block),
            used: 0,
        };
        self.set_idle(c);
    }

    /// Frees the folio of `order` at `index`, allocated from this.
    pub(super) fn free(&mut self, index: usize, order: u32) {
        let c = index / CHUNK_PAGES;
        let chunk = &mut self.chunks[c];
        if order == 0 {
            self.bits.clear_bit(index);
            chunk.used -= 1;
            self.allocated -= 1;
            if chunk.used > 0 {
                self.set_partial(c);
                return;
            }
            self.partial.clear_bit(c);
        } else {
            chunk.used = 0;
            self.allocated -= CHUNK_PAGES;
            for index in c * CHUNK_PAGES..(c + 1) * CHUNK_PAGES {
                self.bits.clear_bit(index);
            }
        }
        // INVARIANT: No page of the chunk is used any more.
        self.in_use.clear_bit(c);
        self.set_idle(c);
    }

    /// The first page in a folio at or after `start`: found through the
    /// chunks in use, so that it costs a bit per chunk and the page bits
    /// of two chunks at most, not a bit per page. Adds the bits it looked
    /// at to `walk`.
    pub(super) fn next_used(&self, mut start: usize, walk: &mut UsedWalk) -> Option<usize> {
        let nr_pages = self.bits.len();
        while start < nr_pages {
            let first_chunk = start / CHUNK_PAGES;
            let Some(c) = self.in_use.next_bit(first_chunk) else {
                walk.chunk_bits += nr_pages / CHUNK_PAGES - first_chunk;
                return None;
            };
            walk.chunk_bits += c + 1 - first_chunk;
            let end = (c + 1) * CHUNK_PAGES;
            let from = start.max(c * CHUNK_PAGES);
            // SAFETY: `bits` has `nr_pages` bits, a whole number of
            // chunks (`Pages::new`), so `end <= nr_pages`; the search
            // stops at `end`.
            let i = unsafe { bindings::_find_next_bit(self.bits.as_ptr(), end, from) };
            // A chunk in use has a page in a folio, though maybe not after
            // `start` in the chunk that `start` is in.
            if i < end {
                walk.page_bits += i + 1 - from;
                return Some(i);
            }
            walk.page_bits += end - from;
            start = end;
        }
        None
    }

    /// Lets go of an idle chunk, returning its block for the caller to
    /// drop, which gives it back to the buddy allocator (not under the
    /// spinlock: that takes the buddy allocator's mutex).
    fn pop_idle(&mut self) -> Option<Pin<KBox<AllocatedBlocks>>> {
        let c = self.take_idle()?;
        // INVARIANT: The chunk is no longer held; its block is the caller's.
        self.chunks[c].block.take()
    }
}

/// What [`Pagemap::next_used_walk`](super::Pagemap::next_used_walk) looked
/// at, summed over calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsedWalk {
    /// Bits of the bitmap of chunks in use (one per PMD-sized chunk).
    pub chunk_bits: usize,
    /// Bits of the bitmap of pages in folios (one per page).
    pub page_bits: usize,
}

/// The page allocator of a pagemap: a GPU buddy allocator
/// ([`GpuBuddy`]) over its pages, as GPU drivers use for their VRAM, with
/// single pages sub-allocated from PMD-sized chunks.
///
/// The buddy allocator's chunk size is a page, so that a [`Reservation`]
/// of any number of pages is one contiguous run. Folios come from
/// chunk-sized blocks instead: a PMD-sized folio is one block, naturally
/// aligned; single pages are handed out of a block by a bitmap, and the
/// block is held until its last page is freed. A buddy block for every
/// page would cost a `struct gpu_buddy_block` (88 bytes on 64-bit) per
/// page and as many again for the split blocks above them: 738 MB of slab
/// for 16 GiB of device memory full of single-page folios. This way it
/// costs one bit per page, 16 bytes and three bits per chunk, and for a
/// chunk held one block, its 32-byte [`AllocatedBlocks`] and the split
/// blocks above: 643 KiB + 256 KiB + 1.4 MB = 2.3 MB at 16 GiB (a plain
/// bitmap would need 512 KiB; the `struct page`s themselves take 256 MiB).
///
/// The buddy allocator takes a mutex and allocates its blocks with
/// `GFP_KERNEL`. Folios are freed from `folio_free`, which runs wherever
/// the last reference to a page is dropped, in process, softirq or
/// hardirq context (a network stack freeing a zero-copy skb, a bio
/// completion): it only takes the spinlock of `pages`, which disables
/// interrupts wherever it is taken, so that such a free cannot interrupt
/// its holder on the same CPU. A chunk freed that way stays held as idle
/// and is handed out again for the next folio, or given back to the buddy
/// allocator, in process context, when a reservation needs the room or
/// the allocator goes away.
///
/// `lock` serialises taking chunks from the buddy allocator and giving
/// them back, so that the chunks held change only under it. Lock order:
/// `lock`, then the buddy allocator's mutex or `pages` (never both).
#[pin_data]
pub(super) struct Alloc {
    #[pin]
    lock: Mutex<()>,
    buddy: GpuBuddy,
    #[pin]
    pub(super) pages: SpinLockIrq<Pages>,
}

impl Alloc {
    /// The allocator of `nr_pages` pages (a multiple of [`CHUNK_PAGES`]).
    ///
    /// Not generic, so that its locks have one class, named once, for all
    /// pagemaps.
    pub(super) fn new(nr_pages: usize) -> Result<Arc<Self>> {
        let pages = Pages::new(nr_pages)?;
        let buddy = GpuBuddy::new(GpuBuddyParams {
            base_offset: 0,
            size: (nr_pages * crate::page::PAGE_SIZE) as u64,
            chunk_size: Alignment::new::<{ crate::page::PAGE_SIZE }>(),
        })?;
        let (name, key) = (c"Pagemap::pages", crate::static_lock_class!());
        Arc::pin_init(
            try_pin_init!(Self {
                lock <- new_mutex!((), "Pagemap::alloc"),
                buddy,
                pages <- SpinLockIrq::new(pages, name, key),
            }),
            GFP_KERNEL,
        )
    }

    /// Allocates a folio of `order` (0 or [`MAX_FOLIO_ORDER`]) and returns
    /// the index of its first page. Might sleep.
    pub(super) fn alloc(&self, order: u32) -> Result<usize> {
        if let Some(index) = self.pages.lock().take(order) {
            return Ok(index);
        }
        let _chunks = self.lock.lock();
        // Another folio may have been freed meanwhile.
        if let Some(index) = self.pages.lock().take(order) {
            return Ok(index);
        }
        let block = KBox::pin_init(
            self.buddy.alloc_blocks(
                GpuBuddyAllocMode::Simple,
                CHUNK_SIZE as u64,
                Alignment::new::<CHUNK_SIZE>(),
                GpuBuddyAllocFlags::default(),
            ),
            GFP_KERNEL,
        )
        // `ENOSPC` from the buddy allocator, or no memory for its blocks:
        // either way, not enough memory.
        .map_err(|_| ENOMEM)?;
        // One block: a naturally aligned one of the chunk's size.
        let offset = block.iter().next().ok_or(ENOMEM)?.offset();
        let mut pages = self.pages.lock();
        pages.hold(block, offset);
        pages.take(order).ok_or(ENOMEM)
    }

    /// Gives every idle chunk back to the buddy allocator.
    fn put_idle(&self) {
        loop {
            // One chunk per spinlock hold: `folio_free` waits on it. The
            // block is dropped, into the buddy allocator, after the
            // spinlock is released.
            let Some(block) = self.pages.lock().pop_idle() else {
                break;
            };
            drop(block);
        }
    }

    /// Sets aside a contiguous run of `nr` pages (`0 < nr`), first giving
    /// the idle chunks back to the buddy allocator, as they may be what
    /// makes the run. Might sleep.
    pub(super) fn reserve(self: &Arc<Self>, nr: usize) -> Result<Reservation> {
        let _chunks = self.lock.lock();
        self.put_idle();
        let blocks = KBox::pin_init(
            self.buddy.alloc_blocks(
                GpuBuddyAllocMode::Simple,
                (nr * crate::page::PAGE_SIZE) as u64,
                Alignment::new::<{ crate::page::PAGE_SIZE }>(),
                GpuBuddyAllocFlag::Contiguous,
            ),
            GFP_KERNEL_ACCOUNT,
        )
        .map_err(|_| ENOMEM)?;
        let start = blocks.iter().map(|b| b.offset()).min().ok_or(ENOMEM)?;
        self.pages.lock().reserved += nr;
        // INVARIANT: The blocks are a contiguous run of `nr` pages at
        // `start` (`Contiguous`) of this allocator, counted as reserved;
        // no folio uses them.
        Ok(Reservation {
            _blocks: blocks,
            alloc: self.clone(),
            index: start as usize / crate::page::PAGE_SIZE,
            nr,
        })
    }
}

/// A run of a [`Pagemap`](super::Pagemap)'s pages set aside for the
/// driver's own use by [`Pagemap::reserve`](super::Pagemap::reserve).
/// Dropping it gives the pages back; it might sleep, so it must be dropped
/// where sleeping is allowed.
///
/// # Invariants
///
/// Pages `index..index + nr` of the pagemap that `alloc` allocates for are
/// `_blocks`, counted as reserved in `alloc`, with no folio.
pub struct Reservation {
    _blocks: Pin<KBox<AllocatedBlocks>>,
    alloc: Arc<Alloc>,
    index: usize,
    nr: usize,
}

impl Reservation {
    /// The index of the first page in the pagemap.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The number of pages.
    pub fn nr_pages(&self) -> usize {
        self.nr
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // The blocks go back to the buddy allocator when `_blocks` drops,
        // right after this; counted as free before that, which only a
        // concurrent `nr_reserved()` can tell.
        self.alloc.pages.lock().reserved -= self.nr;
    }
}
