// SPDX-License-Identifier: GPL-2.0
//! Part 3: a second GPU reads the target in the first one's VRAM
//! ([`PeerRead`]).

use std::path::Path;
use std::time::{Duration, Instant};

use super::rig::{data_error, gpu_name, new_target};
use super::{
    expect_eq, mib, ms, size_text, us_per_page, Cell, Measured, Measurement, Metric, Placement, Rig,
};
use crate::config::Pages;
use crate::pattern;
use crate::vram::{self, StatsDelta, Vram};

/// Part 3: a second GPU reads the target in the first one's VRAM.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerRead {
    /// Target size, page kind; the placement is [`Placement::Alias`] for
    /// the read through aliases, [`Placement::Migrate`] for the one
    /// without.
    pub cell: Cell,
    /// Owner and reader, e.g. `rvram0`, `rvram1`.
    pub gpus: (String, String),
    /// Time of the reader's HMM_DMIRROR_READ of the whole target.
    pub elapsed: Duration,
    /// The owner's counters over the read.
    pub owner: StatsDelta,
    /// The reader's counters over the read.
    pub reader: StatsDelta,
    /// Target pages in the owner's VRAM after the read.
    pub resident_after: usize,
}

impl PeerRead {
    /// Whether the reader asked for aliases.
    pub fn alias(&self) -> bool {
        self.cell.placement == Placement::Alias
    }
}

impl Measurement for PeerRead {
    /// What the counters must show, as failure lines. Through aliases: no
    /// page leaves the owner's VRAM, the owner grants aliases and the
    /// reader reads every page through one. Without: every page migrates
    /// to RAM, no alias.
    fn check(&self) -> Vec<String> {
        let n = self.cell.npages() as i64;
        let (owner, reader) = &self.gpus;
        let mut why = Vec::new();
        let resident = self.resident_after as i64;
        // Pages moved to RAM, and pages read through an alias.
        let (moved, aliased) = if self.alias() { (0, n) } else { (n, 0) };
        expect_eq(
            &mut why,
            &format!("{owner} pages_to_ram"),
            self.owner.pages_to_ram,
            moved,
        );
        if self.alias() && self.owner.alias_grants <= 0 {
            why.push(format!(
                "{owner} alias_grants {:+}, want an increase",
                self.owner.alias_grants
            ));
        } else if !self.alias() {
            expect_eq(
                &mut why,
                &format!("{owner} alias_grants"),
                self.owner.alias_grants,
                0,
            );
        }
        expect_eq(
            &mut why,
            &format!("{reader} alias_accesses"),
            self.reader.alias_accesses,
            aliased,
        );
        expect_eq(
            &mut why,
            &format!("pages in {owner}'s VRAM after the read:"),
            resident,
            aliased,
        );
        why
    }

    /// The `# bench` values.
    fn metrics(&self) -> Vec<Metric> {
        let p = self.cell.key("peer");
        let o = &self.owner;
        vec![
            Metric::new(&p, "ms", ms(self.elapsed), 3, "ms"),
            Metric::new(
                &p,
                "us_per_page",
                us_per_page(self.elapsed, self.cell.npages()),
                2,
                "us",
            ),
            Metric::new(&p, "pages", self.cell.npages() as f64, 0, "pages"),
            Metric::new(&p, "pages_to_ram", o.pages_to_ram as f64, 0, "pages"),
            Metric::new(&p, "mib_copied", mib(o.bytes_copied()), 2, "MiB"),
            Metric::new(&p, "alias_grants", o.alias_grants as f64, 0, "grants"),
            Metric::new(
                &p,
                "alias_accesses",
                self.reader.alias_accesses as f64,
                0,
                "pages",
            ),
            Metric::new(&p, "resident_after", self.resident_after as f64, 0, "pages"),
        ]
    }

    /// The TAP description.
    fn name(&self) -> String {
        let (owner, reader) = &self.gpus;
        format!(
            "bench peer {} {}: {reader} reads {owner}'s VRAM {}; data intact",
            size_text(self.cell.size),
            self.cell.pages,
            if self.alias() {
                "through P2P aliases: 0 pages to RAM"
            } else {
                "without aliases: every page migrates to RAM"
            }
        )
    }

    fn note(&self) -> String {
        format!(
            "{:.1} ms; {}: {}; {}: {}",
            ms(self.elapsed),
            self.gpus.0,
            self.owner.detail(),
            self.gpus.1,
            self.reader.detail()
        )
    }
}

impl Rig<'_> {
    /// Part 3: `peer` reads a target of `size` in this GPU's VRAM, through
    /// aliases and then without. Two outcomes, alias first.
    pub fn measure_peer(
        &mut self,
        size: usize,
        pages: Pages,
        peer: &Path,
        seed: u32,
    ) -> Vec<Measured<PeerRead>> {
        let cells = [Placement::Alias, Placement::Migrate].map(|placement| Cell {
            size,
            pages,
            placement,
        });
        match self.peer_reads(cells, peer, seed) {
            Ok(results) => results,
            Err(e) => vec![Err(e.clone()), Err(e)],
        }
    }

    fn peer_reads(
        &mut self,
        cells: [Cell; 2],
        peer: &Path,
        seed: u32,
    ) -> Result<Vec<Measured<PeerRead>>, String> {
        let size = cells[0].size;
        let alias_reader = Vram::open(peer)?;
        alias_reader.set_flags(vram::FLAG_ALIAS_DMA)?;
        // A file's flags cannot go back to 0: a second file reads without.
        let plain_reader = Vram::open(peer)?;
        let gpus = (gpu_name(self.gpu.device()), gpu_name(peer));
        let mut target = new_target(size, cells[0].pages)?;
        pattern::fill(target.as_mut_slice(), 0, seed);
        let mut out = vec![0u8; size];
        let mut results = Vec::new();
        for (i, cell) in cells.into_iter().enumerate() {
            let reader = if i == 0 { &alias_reader } else { &plain_reader };
            let one = (|| -> Measured<PeerRead> {
                let mut errors = Vec::new();
                // The switches as the cell names them, whatever the cell
                // before left: the alias read needs rvram0's on.
                self.set_placement(cell.placement)?;
                // Into (or back into) VRAM; this also invalidates what the
                // reader mapped before.
                self.place_in_vram(target.as_slice(), seed, &mut errors)?;
                out.fill(0);
                let o0 = self.gpu.stats()?;
                let r0 = reader.stats()?;
                let start = Instant::now();
                reader.read_into(target.as_slice(), &mut out)?;
                let elapsed = start.elapsed();
                let o1 = self.gpu.stats()?;
                let r1 = reader.stats()?;
                let resident_after = vram::resident(&self.gpu.snapshot(target.as_slice())?);
                data_error(
                    &mut errors,
                    &pattern::check(&out, 0, seed),
                    &format!("{} HMM_DMIRROR_READ", gpus.1),
                );
                Ok((
                    PeerRead {
                        cell,
                        gpus: gpus.clone(),
                        elapsed,
                        owner: o1.since(&o0),
                        reader: r1.since(&r0),
                        resident_after,
                    },
                    errors,
                ))
            })();
            results.push(one);
        }
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{peer, to_ram, N};
    use super::*;

    #[test]
    fn peer_expectations() {
        let grants = StatsDelta {
            alias_grants: 64,
            ..StatsDelta::default()
        };
        let accesses = StatsDelta {
            alias_accesses: N,
            ..StatsDelta::default()
        };
        let good_alias = peer(true, grants, accesses, 1024);
        let good_plain = peer(false, to_ram(N), StatsDelta::default(), 0);
        assert!(good_alias.check().is_empty(), "{:?}", good_alias.check());
        assert!(good_plain.check().is_empty(), "{:?}", good_plain.check());
        // Aliases asked for, but the pages migrated (no P2P path).
        let fell_back = peer(true, to_ram(N), StatsDelta::default(), 0);
        let why = fell_back.check();
        assert_eq!(why.len(), 4, "{why:?}");
        assert!(why[0].starts_with("rvram0 pages_to_ram +1024"), "{why:?}");
        assert!(good_alias
            .name()
            .contains("rvram1 reads rvram0's VRAM through P2P aliases"));
        assert!(good_plain.name().contains("without aliases"));
        assert!(good_alias
            .metrics()
            .iter()
            .any(|m| m.line() == "bench peer_4M_4k_alias_alias_accesses 1024 pages"));
    }
}
