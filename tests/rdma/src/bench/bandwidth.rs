// SPDX-License-Identifier: GPL-2.0
//! Part 4: steady RDMA bandwidth ([`Bandwidth`]).

use std::time::Duration;

use super::rig::{data_error, new_target, Dir};
use super::{mb_per_s, size_text, Cell, Measured, Measurement, Metric, Placement, Rig};
use crate::config::Pages;
use crate::pattern;
use crate::verbs;
use crate::vram::{self, StatsDelta};

/// Part 4: steady RDMA bandwidth.
#[derive(Debug, Clone, PartialEq)]
pub struct Bandwidth {
    /// What was measured.
    pub cell: Cell,
    /// Timed repetitions of each direction.
    pub reps: usize,
    /// Total time of the timed RDMA WRITEs.
    pub write: Duration,
    /// Total time of the timed RDMA READs.
    pub read: Duration,
    /// Counters over the warm-up and the timed transfers.
    pub delta: StatsDelta,
    /// Target pages in VRAM at the end.
    pub resident_after: usize,
}

impl Bandwidth {
    /// RDMA WRITE MB/s.
    pub fn write_mb_s(&self) -> f64 {
        mb_per_s(self.cell.size * self.reps, self.write)
    }

    /// RDMA READ MB/s.
    pub fn read_mb_s(&self) -> f64 {
        mb_per_s(self.cell.size * self.reps, self.read)
    }
}

impl Measurement for Bandwidth {
    /// The `# bench` values.
    fn metrics(&self) -> Vec<Metric> {
        let p = self.cell.key("bw");
        vec![
            Metric::new(&p, "write_mb_s", self.write_mb_s(), 1, "MB/s"),
            Metric::new(&p, "read_mb_s", self.read_mb_s(), 1, "MB/s"),
            Metric::new(&p, "pages", self.cell.npages() as f64, 0, "pages"),
            Metric::new(
                &p,
                "pages_to_ram",
                self.delta.pages_to_ram as f64,
                0,
                "pages",
            ),
            Metric::new(&p, "resident_after", self.resident_after as f64, 0, "pages"),
        ]
    }

    /// The TAP description.
    fn name(&self) -> String {
        format!(
            "bench bandwidth {} {}: {} RDMA WRITEs and READs after a warm-up (not asserted); data intact",
            size_text(self.cell.size),
            self.cell.placement.key(),
            self.reps
        )
    }

    /// Not asserted: bandwidth is a time.
    fn check(&self) -> Vec<String> {
        Vec::new()
    }

    fn note(&self) -> String {
        format!(
            "WRITE {:.1} MB/s, READ {:.1} MB/s; {}",
            self.write_mb_s(),
            self.read_mb_s(),
            self.delta.detail()
        )
    }
}

impl Rig<'_> {
    /// Part 4: `reps` timed RDMA WRITEs and READs of a fresh target of
    /// `size` in `placement`, after one warm-up of each.
    pub fn measure_bandwidth(
        &mut self,
        size: usize,
        placement: Placement,
        reps: usize,
        seed: u32,
    ) -> Measured<Bandwidth> {
        let cell = Cell {
            size,
            pages: Pages::Small,
            placement,
        };
        let mut errors = Vec::new();
        self.set_placement(placement)?;
        let mut target = new_target(size, Pages::Small)?;
        let dev = self.dev;
        let region = dev
            .register(target.as_mut_slice(), verbs::target_access(true))
            .map_err(|e| format!("register the target as an ODP MR: {e}"))?;
        // Populated by the CPU, as in the other parts; the first WRITE
        // overwrites it with the local buffer's pattern.
        let mut region = region;
        pattern::fill(region.bytes_mut(), 0, seed ^ 1);
        if placement.in_vram() {
            self.place_in_vram(region.bytes(), seed ^ 1, &mut errors)?;
        }
        pattern::fill(&mut self.local.bytes_mut()[..size], 0, seed);
        let before = self.gpu.stats()?;
        self.transfer(Dir::Write, &region, size)?;
        self.transfer(Dir::Read, &region, size)?;
        let mut write = Duration::ZERO;
        for _ in 0..reps {
            write += self.transfer(Dir::Write, &region, size)?;
        }
        let mut read = Duration::ZERO;
        for _ in 0..reps {
            read += self.transfer(Dir::Read, &region, size)?;
        }
        let after = self.gpu.stats()?;
        let resident_after = vram::resident(&self.gpu.snapshot(region.bytes())?);
        self.local.bytes_mut()[..size].fill(0);
        self.transfer(Dir::Read, &region, size)?;
        data_error(
            &mut errors,
            &pattern::check(&self.local.bytes()[..size], 0, seed),
            "RDMA READ of the whole target after the bandwidth runs",
        );
        drop(region);
        Ok((
            Bandwidth {
                cell,
                reps,
                write,
                read,
                delta: after.since(&before),
                resident_after,
            },
            errors,
        ))
    }
}
