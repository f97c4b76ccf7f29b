// SPDX-License-Identifier: GPL-2.0
//! Part 1: the NIC's fault path over a whole target ([`FaultPath`]), and
//! [`Rig::measure_cell`], which runs parts 1 and 2 on one target and MR.

use std::fmt::Write as _;
use std::time::Duration;

use super::rig::{data_error, huge_mapped, new_target, Dir};
use super::{
    expect_eq, mib, ms, us_per_page, Cell, Measured, Measurement, Metric, Pipeline, Placement, Rig,
};
use crate::config::Pages;
use crate::pattern;
use crate::verbs::{self, Region};
use crate::vram::{self, StatsDelta};

/// Part 1: the NIC's fault path over a whole target in one placement.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPath {
    /// What was measured.
    pub cell: Cell,
    /// Time of the synchronous prefetch of the whole MR.
    pub elapsed: Duration,
    /// rvram's counters over the prefetch.
    pub delta: StatsDelta,
    /// rvram's counters over the RDMA READ that checked the data after it.
    pub read_delta: StatsDelta,
    /// Target pages in VRAM right after the prefetch.
    pub resident_after: usize,
    /// Target pages mapped by a PMD (2 MiB folios) before the prefetch.
    pub huge_before: usize,
    /// Which round of the cell this is, from 0 (see `--bench-rounds`).
    pub round: usize,
}

impl FaultPath {
    /// Microseconds per page.
    pub fn us_per_page(&self) -> f64 {
        us_per_page(self.elapsed, self.cell.npages())
    }
}

impl Measurement for FaultPath {
    /// What the counters must show for the placement, as failure lines
    /// (none: as expected). Alias: no page to RAM, every page still in VRAM,
    /// aliases granted. Migration: every page to RAM, none left in VRAM, no
    /// alias. RAM: nothing moves. Every placement: the RDMA READ after the
    /// prefetch moves nothing (the prefetch mapped it all).
    fn check(&self) -> Vec<String> {
        let n = self.cell.npages() as i64;
        let d = &self.delta;
        let mut why = Vec::new();
        let resident = self.resident_after as i64;
        match self.cell.placement {
            Placement::Ram => {
                expect_eq(&mut why, "prefetch: pages_to_ram", d.pages_to_ram, 0);
                expect_eq(&mut why, "prefetch: pages_to_vram", d.pages_to_vram, 0);
                expect_eq(&mut why, "prefetch: alias_grants", d.alias_grants, 0);
                expect_eq(&mut why, "pages in VRAM after the prefetch:", resident, 0);
            }
            Placement::Alias => {
                expect_eq(&mut why, "prefetch: pages_to_ram", d.pages_to_ram, 0);
                if d.alias_grants <= 0 {
                    why.push(format!(
                        "prefetch: alias_grants {:+}, want an increase (the NIC mapped no alias)",
                        d.alias_grants
                    ));
                }
                expect_eq(&mut why, "pages in VRAM after the prefetch:", resident, n);
            }
            Placement::Migrate => {
                expect_eq(&mut why, "prefetch: pages_to_ram", d.pages_to_ram, n);
                expect_eq(&mut why, "prefetch: alias_grants", d.alias_grants, 0);
                expect_eq(&mut why, "pages in VRAM after the prefetch:", resident, 0);
            }
        }
        expect_eq(
            &mut why,
            "RDMA READ after the prefetch: pages copied",
            self.read_delta.pages_copied(),
            0,
        );
        // A 2 MiB cell measures 2 MiB folios only if every page was in one.
        if self.cell.pages == Pages::Huge && self.huge_before as i64 != n {
            why.push(format!(
                "a 2 MiB-folio cell: {} of {n} pages were PMD-mapped before the prefetch",
                self.huge_before
            ));
        }
        why
    }

    /// The `# bench` values; those of rounds after the first carry the
    /// round in their metric name (`us_per_page_r2`).
    fn metrics(&self) -> Vec<Metric> {
        let mut m = self.round_metrics();
        if self.round > 0 {
            for metric in &mut m {
                metric.name = format!("{}_r{}", metric.name, self.round);
            }
        }
        m
    }

    /// The TAP description.
    fn name(&self) -> String {
        let what = match self.cell.placement {
            Placement::Ram => "nothing moves",
            Placement::Alias => "0 pages to RAM, every page still in VRAM",
            Placement::Migrate => "every page migrates to RAM",
        };
        let round = match self.round {
            0 => String::new(),
            r => format!(", round {}", r + 1),
        };
        format!(
            "bench {}{round}: NIC fault path (ODP prefetch of the whole MR): {what}; data intact",
            self.cell.label()
        )
    }

    fn note(&self) -> String {
        self.note_text()
    }
}

impl FaultPath {
    /// The `# bench` values under their first-round names.
    fn round_metrics(&self) -> Vec<Metric> {
        let p = self.cell.key("fault");
        let d = &self.delta;
        let mut m = vec![
            Metric::new(&p, "ms", ms(self.elapsed), 3, "ms"),
            Metric::new(&p, "us_per_page", self.us_per_page(), 2, "us"),
            Metric::new(&p, "pages", self.cell.npages() as f64, 0, "pages"),
            Metric::new(&p, "pages_to_ram", d.pages_to_ram as f64, 0, "pages"),
            Metric::new(&p, "pages_to_vram", d.pages_to_vram as f64, 0, "pages"),
            Metric::new(&p, "mib_copied", mib(d.bytes_copied()), 2, "MiB"),
            Metric::new(&p, "migrated_to_ram", d.migrated_to_ram as f64, 0, "folios"),
            Metric::new(&p, "cpu_faults", d.cpu_faults as f64, 0, "faults"),
        ];
        if let Some(us) = d.us_per_fault() {
            m.push(Metric::new(&p, "kernel_us_per_fault", us, 2, "us"));
        }
        m.extend([
            Metric::new(&p, "alias_grants", d.alias_grants as f64, 0, "grants"),
            Metric::new(&p, "resident_after", self.resident_after as f64, 0, "pages"),
            Metric::new(&p, "huge_before", self.huge_before as f64, 0, "pages"),
        ]);
        m
    }

    fn note_text(&self) -> String {
        let n = self.cell.npages();
        let mut note = format!(
            "prefetch {:.1} ms: {}; {} of {n} pages in VRAM after",
            ms(self.elapsed),
            self.delta.detail(),
            self.resident_after,
        );
        if self.cell.pages == Pages::Huge {
            let _ = write!(
                note,
                "; {} of {n} pages in 2 MiB folios before",
                self.huge_before
            );
        }
        note
    }
}

impl Rig<'_> {
    /// Parts 1 and 2 for `cell`: the fault path, then, on the same target
    /// and MR, the pipeline. Each outcome carries the data errors found.
    pub fn measure_cell(
        &mut self,
        cell: Cell,
        seed: u32,
    ) -> (Measured<FaultPath>, Measured<Pipeline>) {
        let mut target = match new_target(cell.size, cell.pages) {
            Ok(t) => t,
            Err(e) => return (Err(e.clone()), Err(format!("not run: {e}"))),
        };
        let dev = self.dev;
        // Registered before the CPU touches the target: ODP registration
        // maps what is present (and, with aliases, what is in VRAM), so an
        // empty mapping leaves everything to the prefetch.
        let mut region = match dev.register(target.as_mut_slice(), verbs::target_access(true)) {
            Ok(r) => r,
            Err(e) => {
                let e = format!("register the target as an ODP MR: {e}");
                return (Err(e.clone()), Err(format!("not run: {e}")));
            }
        };
        let fault = self.fault_path(cell, &mut region, seed);
        let pipeline = match &fault {
            Ok(_) => self.pipeline(cell, &mut region, seed, seed ^ 0x00ff_ff00),
            Err(e) => Err(format!("not run: the fault-path part failed: {e}")),
        };
        drop(region);
        (fault, pipeline)
    }

    /// Part 1 alone for `cell`, on a target and MR of its own: a later
    /// round of the fault path (`round` from 1).
    pub fn measure_fault(&mut self, cell: Cell, round: usize, seed: u32) -> Measured<FaultPath> {
        let mut target = new_target(cell.size, cell.pages)?;
        let mut region = self
            .dev
            .register(target.as_mut_slice(), verbs::target_access(true))
            .map_err(|e| format!("register the target as an ODP MR: {e}"))?;
        let (mut fault, errors) = self.fault_path(cell, &mut region, seed)?;
        fault.round = round;
        Ok((fault, errors))
    }

    fn fault_path(
        &mut self,
        cell: Cell,
        region: &mut Region<'_>,
        seed: u32,
    ) -> Measured<FaultPath> {
        let mut errors = Vec::new();
        self.set_placement(cell.placement)?;
        pattern::fill(region.bytes_mut(), 0, seed);
        let snapshot = if cell.placement.in_vram() {
            self.place_in_vram(region.bytes(), seed, &mut errors)?
        } else {
            self.gpu.snapshot(region.bytes())?
        };
        let huge_before = huge_mapped(&snapshot);

        let before = self.gpu.stats()?;
        let elapsed = self.dev.prefetch_write(region)?;
        let after = self.gpu.stats()?;
        let resident_after = vram::resident(&self.gpu.snapshot(region.bytes())?);

        let len = cell.size;
        self.local.bytes_mut()[..len].fill(0);
        self.transfer(Dir::Read, region, len)?;
        let after_read = self.gpu.stats()?;
        data_error(
            &mut errors,
            &pattern::check(&self.local.bytes()[..len], 0, seed),
            "RDMA READ of the whole target after the prefetch",
        );
        Ok((
            FaultPath {
                cell,
                elapsed,
                delta: after.since(&before),
                read_delta: after_read.since(&after),
                resident_after,
                huge_before,
                round: 0,
            },
            errors,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{good_faults, to_ram, to_vram, N};
    use super::*;

    #[test]
    fn fault_path_expectations() {
        for f in good_faults() {
            assert_eq!(f.check(), Vec::<String>::new(), "{:?}", f.cell);
        }
        let [ram, alias, migrate] = good_faults();
        // An alias run that migrated a page, left it out of VRAM, granted
        // nothing.
        let bad = FaultPath {
            delta: to_ram(1),
            resident_after: 1023,
            ..alias.clone()
        };
        let why = bad.check();
        assert_eq!(why.len(), 3, "{why:?}");
        assert!(why[0].contains("pages_to_ram +1, want +0"), "{why:?}");
        assert!(why[1].contains("alias_grants +0"), "{why:?}");
        assert!(why[2].contains("+1023, want +1024"), "{why:?}");
        // Migration that left pages in VRAM.
        let bad = FaultPath {
            resident_after: 5,
            delta: to_ram(N - 5),
            ..migrate
        };
        assert_eq!(bad.check().len(), 2);
        // RAM: anything moving fails; so does an RDMA READ that moved pages.
        let bad = FaultPath {
            delta: to_vram(3),
            read_delta: to_ram(2),
            ..ram
        };
        let why = bad.check();
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(
            why[1].starts_with("RDMA READ after the prefetch"),
            "{why:?}"
        );
        assert!(alias
            .name()
            .contains("0 pages to RAM, every page still in VRAM"));
    }

    #[test]
    fn fault_path_metrics() {
        let [_, alias, migrate] = good_faults();
        let lines: Vec<String> = migrate.metrics().iter().map(Metric::line).collect();
        assert!(lines.contains(&"bench fault_4M_4k_migrate_ms 400.000 ms".to_owned()));
        assert!(lines.contains(&"bench fault_4M_4k_migrate_us_per_page 390.62 us".to_owned()));
        assert!(lines.contains(&"bench fault_4M_4k_migrate_pages_to_ram 1024 pages".to_owned()));
        assert!(lines.contains(&"bench fault_4M_4k_migrate_mib_copied 4.00 MiB".to_owned()));
        assert!(
            lines.contains(&"bench fault_4M_4k_migrate_kernel_us_per_fault 250.00 us".to_owned())
        );
        // No migration faults: no per-fault cost.
        assert!(!alias
            .metrics()
            .iter()
            .any(|m| m.name.ends_with("kernel_us_per_fault")));
        // Every line is `bench NAME VALUE UNIT`.
        for l in &lines {
            assert_eq!(l.split_whitespace().count(), 4, "{l}");
        }
    }
}
