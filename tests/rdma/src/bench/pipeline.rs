// SPDX-License-Identifier: GPL-2.0
//! Part 2: the NIC writes the target, then the GPU uses it ([`Pipeline`]).

use std::time::Duration;

use super::rig::Dir;
use super::{
    expect_eq, mib, migrations_per_page, ms, us_per_page, Cell, Measured, Measurement, Metric,
    Placement, Rig,
};
use crate::pattern;
use crate::verbs::Region;
use crate::vram::{self, StatsDelta};

/// Part 2: the NIC writes the target, then the GPU uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// What was measured.
    pub cell: Cell,
    /// The NIC's RDMA WRITE of the whole target.
    pub nic: Duration,
    /// The GPU's MIGRATE_TO_DEV of the whole target (checking its
    /// read-back is not included).
    pub gpu: Duration,
    /// Counters over the NIC's write.
    pub nic_delta: StatsDelta,
    /// Counters over the GPU's MIGRATE_TO_DEV.
    pub gpu_delta: StatsDelta,
    /// Target pages in VRAM at the end.
    pub resident_after: usize,
}

impl Pipeline {
    /// Counters over the whole pipeline.
    pub fn delta(&self) -> StatsDelta {
        let mut d = self.nic_delta;
        d += self.gpu_delta;
        d
    }

    /// NIC plus GPU time.
    pub fn total(&self) -> Duration {
        self.nic + self.gpu
    }

    /// Copies between VRAM and RAM per target page.
    pub fn migrations_per_page(&self) -> f64 {
        migrations_per_page(&self.delta(), self.cell.npages())
    }

    /// Pages each placement must copy `(to RAM, to VRAM)`, per target page:
    /// alias none; migration one out (the NIC's write faults it to RAM) and
    /// one back (the GPU pulls it in); RAM one in (the GPU pulls it in).
    pub fn expected_copies(placement: Placement) -> (i64, i64) {
        match placement {
            Placement::Ram => (0, 1),
            Placement::Alias => (0, 0),
            Placement::Migrate => (1, 1),
        }
    }
}

impl Measurement for Pipeline {
    /// What the counters must show, as failure lines.
    fn check(&self) -> Vec<String> {
        let n = self.cell.npages() as i64;
        let (to_ram, to_vram) = Self::expected_copies(self.cell.placement);
        let d = self.delta();
        let mut why = Vec::new();
        expect_eq(
            &mut why,
            "pipeline: pages_to_ram",
            d.pages_to_ram,
            to_ram * n,
        );
        expect_eq(
            &mut why,
            "pipeline: pages_to_vram",
            d.pages_to_vram,
            to_vram * n,
        );
        if self.cell.placement == Placement::Migrate {
            // The pages leave VRAM for the NIC, not for the GPU.
            expect_eq(
                &mut why,
                "NIC write: pages_to_ram",
                self.nic_delta.pages_to_ram,
                n,
            );
        }
        expect_eq(
            &mut why,
            "pages in VRAM after the GPU's MIGRATE_TO_DEV:",
            self.resident_after as i64,
            n,
        );
        why
    }

    /// The `# bench` values.
    fn metrics(&self) -> Vec<Metric> {
        let p = self.cell.key("pipeline");
        let d = self.delta();
        vec![
            Metric::new(&p, "nic_ms", ms(self.nic), 3, "ms"),
            Metric::new(&p, "gpu_ms", ms(self.gpu), 3, "ms"),
            Metric::new(&p, "total_ms", ms(self.total()), 3, "ms"),
            Metric::new(
                &p,
                "us_per_page",
                us_per_page(self.total(), self.cell.npages()),
                2,
                "us",
            ),
            Metric::new(&p, "pages", self.cell.npages() as f64, 0, "pages"),
            Metric::new(
                &p,
                "migrations_per_page",
                self.migrations_per_page(),
                2,
                "per_page",
            ),
            Metric::new(&p, "pages_to_ram", d.pages_to_ram as f64, 0, "pages"),
            Metric::new(&p, "pages_to_vram", d.pages_to_vram as f64, 0, "pages"),
            Metric::new(&p, "mib_copied", mib(d.bytes_copied()), 2, "MiB"),
            Metric::new(&p, "resident_after", self.resident_after as f64, 0, "pages"),
        ]
    }

    /// The TAP description.
    fn name(&self) -> String {
        let (to_ram, to_vram) = Self::expected_copies(self.cell.placement);
        let n = to_ram + to_vram;
        format!(
            "bench {}: NIC RDMA WRITE, then GPU MIGRATE_TO_DEV: {n} migration{} per page; data intact",
            self.cell.label(),
            if n == 1 { "" } else { "s" }
        )
    }

    fn note(&self) -> String {
        format!(
            "NIC write {:.1} ms ({}), GPU MIGRATE_TO_DEV {:.1} ms ({})",
            ms(self.nic),
            self.nic_delta.detail(),
            ms(self.gpu),
            self.gpu_delta.detail()
        )
    }
}

impl Rig<'_> {
    pub(super) fn pipeline(
        &mut self,
        cell: Cell,
        region: &mut Region<'_>,
        old_seed: u32,
        seed: u32,
    ) -> Measured<Pipeline> {
        let mut errors = Vec::new();
        self.set_placement(cell.placement)?;
        if cell.placement.in_vram() {
            // Back into VRAM (with migration the fault path moved it out);
            // the migration also invalidates the NIC's mapping, so the
            // NIC's write faults again.
            self.place_in_vram(region.bytes(), old_seed, &mut errors)?;
        }
        let len = cell.size;
        pattern::fill(&mut self.local.bytes_mut()[..len], 0, seed);

        let s0 = self.gpu.stats()?;
        let nic = self.transfer(Dir::Write, region, len)?;
        let s1 = self.gpu.stats()?;
        let gpu = self.timed_migrate(
            region.bytes(),
            seed,
            &mut errors,
            "GPU read-back (MIGRATE_TO_DEV) of what the NIC wrote",
        )?;
        let s2 = self.gpu.stats()?;
        let resident_after = vram::resident(&self.gpu.snapshot(region.bytes())?);
        Ok((
            Pipeline {
                cell,
                nic,
                gpu,
                nic_delta: s1.since(&s0),
                gpu_delta: s2.since(&s1),
                resident_after,
            },
            errors,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{good_pipelines, to_vram, N};
    use super::*;

    #[test]
    fn pipeline_expectations() {
        let [ram, alias, migrate] = good_pipelines();
        assert_eq!(ram.migrations_per_page(), 1.0);
        assert_eq!(alias.migrations_per_page(), 0.0);
        assert_eq!(migrate.migrations_per_page(), 2.0);
        for p in good_pipelines() {
            assert_eq!(p.check(), Vec::<String>::new(), "{:?}", p.cell);
        }
        assert_eq!(Pipeline::expected_copies(Placement::Migrate), (1, 1));
        assert!(migrate.name().contains(": 2 migrations per page"));
        assert!(alias.name().contains(": 0 migrations per page"));
        assert!(ram.name().contains(": 1 migration per page"));
        // Alias with copies fails; migration whose pages left VRAM for the
        // GPU instead of the NIC fails.
        let bad = Pipeline {
            gpu_delta: to_vram(N),
            ..alias
        };
        assert_eq!(bad.check(), ["pipeline: pages_to_vram +1024, want +0"]);
        let bad = Pipeline {
            nic_delta: StatsDelta::default(),
            gpu_delta: StatsDelta {
                pages_to_ram: N,
                pages_to_vram: N,
                ..StatsDelta::default()
            },
            ..migrate
        };
        assert_eq!(bad.check(), ["NIC write: pages_to_ram +0, want +1024"]);
        let bad = Pipeline {
            resident_after: 0,
            ..ram
        };
        assert_eq!(bad.check().len(), 1);
        let m = good_pipelines()[2].metrics();
        assert!(m
            .iter()
            .any(|m| m.line() == "bench pipeline_4M_4k_migrate_migrations_per_page 2.00 per_page"));
        assert!(m
            .iter()
            .any(|m| m.line() == "bench pipeline_4M_4k_migrate_mib_copied 8.00 MiB"));
        assert!(m
            .iter()
            .any(|m| m.line() == "bench pipeline_4M_4k_migrate_total_ms 120.000 ms"));
    }
}
