// SPDX-License-Identifier: GPL-2.0
//! [`BenchReport`]: everything a run measured, as `# bench` lines and
//! markdown tables.

use std::fmt::Write as _;

use super::{
    median, mib, ms, size_text, us_per_page, Bandwidth, Cell, FaultPath, Measurement, Metric,
    PeerRead, Pipeline, Placement,
};
use crate::config::Pages;

/// Everything a benchmark run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BenchReport {
    /// What the numbers were measured with, one line each.
    pub context: Vec<String>,
    /// Part 1.
    pub fault: Vec<FaultPath>,
    /// Part 2.
    pub pipeline: Vec<Pipeline>,
    /// Part 3.
    pub peer: Vec<PeerRead>,
    /// Part 4.
    pub bandwidth: Vec<Bandwidth>,
}

/// The note every table of results carries.
pub const TCG_NOTE: &str = "Times are wall time in a QEMU TCG guest: the emulated CPU, \
    Soft-RoCE's packet processing and the emulated BAR dominate them, so they compare code \
    paths on an emulator, not hardware. The counted pages and bytes are what transfers to \
    hardware: each page copied between VRAM and system RAM is a page's worth of copying and \
    of system RAM bandwidth that the P2P alias does not spend.";

/// `a / b` as `N.NNx`, or `-`.
fn ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b > 0.0 {
        format!("{:.2}x", a / b)
    } else {
        "-".to_owned()
    }
}

/// `got/total`.
fn of(got: usize, total: usize) -> String {
    format!("{got}/{total}")
}

impl BenchReport {
    /// The TAP comment lines of the context (without the `# `).
    pub fn context_lines(&self) -> Vec<String> {
        self.context.iter().map(|c| format!("bench: {c}")).collect()
    }

    /// Every `bench NAME VALUE UNIT` line, in measurement order.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = self.context_lines();
        let mut targets: Vec<(usize, Pages)> = Vec::new();
        for f in &self.fault {
            if !targets.contains(&(f.cell.size, f.cell.pages)) {
                targets.push((f.cell.size, f.cell.pages));
            }
        }
        let metrics = self
            .fault
            .iter()
            .flat_map(FaultPath::metrics)
            .chain(
                targets
                    .into_iter()
                    .flat_map(|(size, pages)| self.fault_medians(size, pages)),
            )
            .chain(self.pipeline.iter().flat_map(Pipeline::metrics))
            .chain(self.peer.iter().flat_map(PeerRead::metrics))
            .chain(self.bandwidth.iter().flat_map(Bandwidth::metrics));
        lines.extend(metrics.map(|m| m.line()));
        lines
    }

    /// The first round's fault path of the alias placement of `cell`'s
    /// size and pages.
    fn fault_alias(&self, cell: &Cell) -> Option<&FaultPath> {
        self.fault.iter().find(|f| {
            f.round == 0
                && f.cell.size == cell.size
                && f.cell.pages == cell.pages
                && f.cell.placement == Placement::Alias
        })
    }

    /// Microseconds per page of every round of the fault path of `size`,
    /// `pages` and `placement`, in measurement order.
    /// The rounds of a cell whose checks held: a round that failed its
    /// counter, data or THP checks (which fails the run) measured
    /// something else, and stays out of the medians.
    fn fault_rounds(&self, size: usize, pages: Pages, placement: Placement) -> Vec<f64> {
        self.fault
            .iter()
            .filter(|f| {
                f.cell.size == size && f.cell.pages == pages && f.cell.placement == placement
            })
            .filter(|f| f.check().is_empty())
            .map(FaultPath::us_per_page)
            .collect()
    }

    /// The medians over the rounds of the fault path of `size` and `pages`:
    /// `fault_SIZE_PAGES_PLACEMENT_us_per_page_median` for each placement
    /// measured, with `_rounds`, and the ratios alias/RAM and
    /// migration/alias of the medians.
    pub fn fault_medians(&self, size: usize, pages: Pages) -> Vec<Metric> {
        let mut m = Vec::new();
        let mut med = |placement| {
            let rounds = self.fault_rounds(size, pages, placement);
            let value = median(&rounds)?;
            let p = Cell {
                size,
                pages,
                placement,
            }
            .key("fault");
            m.push(Metric::new(&p, "us_per_page_median", value, 2, "us"));
            m.push(Metric::new(&p, "rounds", rounds.len() as f64, 0, "rounds"));
            Some(value)
        };
        let (ram, alias, migrate) = (
            med(Placement::Ram),
            med(Placement::Alias),
            med(Placement::Migrate),
        );
        let p = format!("fault_{}_{}", super::size_key(size), pages.key());
        if let (Some(r), Some(a)) = (ram, alias) {
            if r > 0.0 {
                m.push(Metric::new(&p, "alias_over_ram", a / r, 2, "x"));
            }
        }
        if let (Some(a), Some(g)) = (alias, migrate) {
            if a > 0.0 {
                m.push(Metric::new(&p, "migrate_over_alias", g / a, 2, "x"));
            }
        }
        m
    }

    /// The table of the fault path's medians over its rounds.
    pub fn fault_median_table(&self) -> String {
        let mut out = String::from(
            "| target | pages | rounds | system RAM us/page | VRAM, P2P alias us/page \
             | VRAM, migration us/page | alias / RAM | migration / alias |\n\
             |---|---|---:|---:|---:|---:|---:|---:|\n",
        );
        let mut seen = Vec::new();
        for f in &self.fault {
            let key = (f.cell.size, f.cell.pages);
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let cell = |placement| {
                let r = self.fault_rounds(key.0, key.1, placement);
                let range = r.iter().copied().fold(None, |acc: Option<(f64, f64)>, x| {
                    Some(acc.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))))
                });
                (median(&r), r.len(), range)
            };
            let text = |(m, _, range): (Option<f64>, usize, Option<(f64, f64)>)| match (m, range) {
                (Some(m), Some((lo, hi))) => format!("{m:.2} ({lo:.2}-{hi:.2})"),
                _ => "-".to_owned(),
            };
            let (ram, alias, migrate) = (
                cell(Placement::Ram),
                cell(Placement::Alias),
                cell(Placement::Migrate),
            );
            let rounds = ram.1.max(alias.1).max(migrate.1);
            let ar = ratio(alias.0.unwrap_or(f64::NAN), ram.0.unwrap_or(0.0));
            let ma = ratio(migrate.0.unwrap_or(f64::NAN), alias.0.unwrap_or(0.0));
            let _ = writeln!(
                out,
                "| {} | {} | {rounds} | {} | {} | {} | {ar} | {ma} |",
                size_text(key.0),
                key.1,
                text(ram),
                text(alias),
                text(migrate),
            );
        }
        out
    }

    fn pipeline_alias(&self, cell: &Cell) -> Option<&Pipeline> {
        self.pipeline.iter().find(|p| {
            p.cell.size == cell.size
                && p.cell.pages == cell.pages
                && p.cell.placement == Placement::Alias
        })
    }

    fn peer_alias(&self, cell: &Cell) -> Option<&PeerRead> {
        self.peer
            .iter()
            .find(|p| p.cell.size == cell.size && p.cell.pages == cell.pages && p.alias())
    }

    /// The fault-path table.
    pub fn fault_table(&self) -> String {
        let mut out = String::from(
            "| target | pages | placement | ms | us/page | migration faults | kernel us/fault \
             | pages to RAM | folios to RAM | MiB copied VRAM<->RAM | alias grants \
             | in VRAM after | time / alias |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for f in self.fault.iter().filter(|f| f.round == 0) {
            let d = &f.delta;
            let vs = self
                .fault_alias(&f.cell)
                .map_or_else(|| "-".to_owned(), |a| ratio(ms(f.elapsed), ms(a.elapsed)));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} | {:.2} | {} | {} | {} | {} | {:.1} | {} | {} | {vs} |",
                size_text(f.cell.size),
                f.cell.pages,
                f.cell.placement.heading(),
                ms(f.elapsed),
                f.us_per_page(),
                d.cpu_faults,
                d.us_per_fault()
                    .map_or_else(|| "-".to_owned(), |us| format!("{us:.1}")),
                d.pages_to_ram,
                d.migrated_to_ram,
                mib(d.bytes_copied()),
                d.alias_grants,
                of(f.resident_after, f.cell.npages()),
            );
        }
        out
    }

    /// The pipeline table.
    pub fn pipeline_table(&self) -> String {
        let mut out = String::from(
            "| target | pages | placement | NIC RDMA WRITE ms | GPU MIGRATE_TO_DEV ms | total ms \
             | migrations/page | pages to RAM | pages to VRAM | MiB copied VRAM<->RAM \
             | in VRAM after | total / alias |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for p in &self.pipeline {
            let d = p.delta();
            let vs = self
                .pipeline_alias(&p.cell)
                .map_or_else(|| "-".to_owned(), |a| ratio(ms(p.total()), ms(a.total())));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {} | {} | {:.1} | {} | {vs} |",
                size_text(p.cell.size),
                p.cell.pages,
                p.cell.placement.heading(),
                ms(p.nic),
                ms(p.gpu),
                ms(p.total()),
                p.migrations_per_page(),
                d.pages_to_ram,
                d.pages_to_vram,
                mib(d.bytes_copied()),
                of(p.resident_after, p.cell.npages()),
            );
        }
        out
    }

    /// The GPU peer table.
    pub fn peer_table(&self) -> String {
        let mut out = String::from(
            "| target | pages | reader | ms | us/page | owner's pages to RAM \
             | MiB copied VRAM<->RAM | owner's alias grants | reader's alias accesses \
             | in owner's VRAM after | time / alias |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for p in &self.peer {
            let (owner, reader) = &p.gpus;
            let how = if p.alias() {
                format!("{reader}, through P2P aliases")
            } else {
                format!("{reader}, by migration (no alias flag)")
            };
            let vs = self
                .peer_alias(&p.cell)
                .map_or_else(|| "-".to_owned(), |a| ratio(ms(p.elapsed), ms(a.elapsed)));
            let _ = writeln!(
                out,
                "| {} in {owner} | {} | {how} | {:.1} | {:.2} | {} | {:.1} | {} | {} | {} | {vs} |",
                size_text(p.cell.size),
                p.cell.pages,
                ms(p.elapsed),
                us_per_page(p.elapsed, p.cell.npages()),
                p.owner.pages_to_ram,
                mib(p.owner.bytes_copied()),
                p.owner.alias_grants,
                p.reader.alias_accesses,
                of(p.resident_after, p.cell.npages()),
            );
        }
        out
    }

    /// The bandwidth table.
    pub fn bandwidth_table(&self) -> String {
        let mut out = String::from(
            "| target | placement | RDMA WRITE MB/s | RDMA READ MB/s | pages to RAM | in VRAM after |\n\
             |---|---|---:|---:|---:|---:|\n",
        );
        for b in &self.bandwidth {
            let _ = writeln!(
                out,
                "| {} {} | {} | {:.1} | {:.1} | {} | {} |",
                size_text(b.cell.size),
                b.cell.pages,
                b.cell.placement.heading(),
                b.write_mb_s(),
                b.read_mb_s(),
                b.delta.pages_to_ram,
                of(b.resident_after, b.cell.npages()),
            );
        }
        out
    }

    /// The whole report as markdown: context, the TCG note, and a table
    /// per part that was measured.
    pub fn markdown(&self) -> String {
        let mut out = String::from("# What the P2P alias saves: RDMA ODP into GPU memory\n\n");
        for c in &self.context {
            let _ = writeln!(out, "- {c}");
        }
        let _ = writeln!(out, "\n{TCG_NOTE}\n");
        let _ = writeln!(
            out,
            "Placements: *system RAM*: the target never leaves RAM; *VRAM, P2P alias*: in \
             the GPU's VRAM, its `p2p_alias` switch on (this series); *VRAM, migration \
             (7.3)*: in VRAM, `p2p_alias` off, ODP faults migrate pages to RAM as Linux \
             7.3 does. *MiB copied VRAM<->RAM* is (pages_to_ram + pages_to_vram) x 4 KiB: \
             data that crossed system RAM. *time / alias*: this row's time over the alias \
             row's of the same target.\n"
        );
        if !self.fault.is_empty() {
            let _ = writeln!(
                out,
                "## 1. The NIC's fault path\n\n\
                 An ODP MR over the target, registered before the target was populated (so \
                 registration maps nothing); the GPU moves the target into VRAM; then one \
                 synchronous prefetch of the whole MR (`ibv_advise_mr` PREFETCH_WRITE + FLUSH, \
                 256 KiB per SGE) runs the NIC's page faults without the packet path. \
                 *kernel us/fault* is rvram's own accounting (`fault_ns / cpu_faults`) of \
                 serving one fault by migration. An RDMA READ of the whole target then \
                 checks every byte. The first round of each target:\n\n{}\n\
                 Every round, each on a fresh target and MR, the placements rotated \
                 each round (over three rounds, each runs first, second and last once): \
                 the median us/page (lowest-highest), and the ratios of the medians.\n\n{}",
                self.fault_table(),
                self.fault_median_table()
            );
        }
        if !self.pipeline.is_empty() {
            let _ = writeln!(
                out,
                "## 2. The NIC writes, then the GPU uses the data\n\n\
                 The target is in VRAM (RAM placement: in RAM); the NIC RDMA WRITEs all of \
                 it (1 MiB per work request); then the GPU consumes it with \
                 HMM_DMIRROR_MIGRATE_TO_DEV, whose read-back is checked. With the alias no \
                 page moves (MIGRATE_TO_DEV finds every page in VRAM and only reads it \
                 back); with migration each page leaves VRAM for the NIC and comes back for \
                 the GPU; from RAM the GPU pulls each page in.\n\n{}",
                self.pipeline_table()
            );
        }
        if !self.peer.is_empty() {
            let _ = writeln!(
                out,
                "## 3. A GPU peer reads the target\n\n\
                 The target in the first GPU's VRAM; the second GPU reads all of it \
                 (HMM_DMIRROR_READ), first from a file with rvram's FLAG_ALIAS_DMA (through \
                 P2P aliases), then, with the target put back, from a file without it (the \
                 pages migrate to RAM). Data checked.\n\n{}",
                self.peer_table()
            );
        }
        if !self.bandwidth.is_empty() {
            let reps = self.bandwidth[0].reps;
            let _ = writeln!(
                out,
                "## 4. Steady RDMA bandwidth\n\n\
                 After one warm-up WRITE and READ of the whole target (which faults it in: \
                 with migration, it is in RAM from then on), {reps} timed RDMA WRITEs and \
                 READs of the whole target, 1 MiB per work request, at MTU 4096. Not \
                 asserted; data checked.\n\n{}",
                self.bandwidth_table()
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::fixtures::{cell, good_faults, good_pipelines, peer, to_ram, MIB4, N};
    use super::*;
    use crate::config::Pages;
    use crate::vram::StatsDelta;

    fn report() -> BenchReport {
        let [ram_p, alias_p, migrate_p] = good_pipelines();
        BenchReport {
            context: vec!["kernel 7.3, device rxe0".into()],
            fault: good_faults().to_vec(),
            pipeline: vec![ram_p, alias_p, migrate_p],
            peer: vec![
                peer(
                    true,
                    StatsDelta {
                        alias_grants: 64,
                        ..StatsDelta::default()
                    },
                    StatsDelta {
                        alias_accesses: N,
                        ..StatsDelta::default()
                    },
                    1024,
                ),
                peer(false, to_ram(N), StatsDelta::default(), 0),
            ],
            bandwidth: vec![Bandwidth {
                cell: cell(MIB4, Pages::Small, Placement::Alias),
                reps: 2,
                write: Duration::from_secs(1),
                read: Duration::from_secs(2),
                delta: StatsDelta::default(),
                resident_after: 1024,
            }],
        }
    }

    #[test]
    fn fault_table_rows() {
        let t = report().fault_table();
        let rows: Vec<&str> = t.lines().collect();
        assert_eq!(rows.len(), 5);
        assert_eq!(
            rows[2],
            "| 4 MiB | 4k | system RAM | 2.0 | 1.95 | 0 | - | 0 | 0 | 0.0 | 0 | 0/1024 | 0.20x |"
        );
        assert_eq!(
            rows[3],
            "| 4 MiB | 4k | VRAM, P2P alias | 10.0 | 9.77 | 0 | - | 0 | 0 | 0.0 | 1024 | 1024/1024 | 1.00x |"
        );
        assert_eq!(
            rows[4],
            "| 4 MiB | 4k | VRAM, migration (7.3) | 400.0 | 390.62 | 1024 | 250.0 | 1024 | 1024 | 4.0 | 0 | 0/1024 | 40.00x |"
        );
        // Every row has as many cells as the heading.
        let cells = |r: &str| r.matches('|').count();
        assert!(rows.iter().all(|r| cells(r) == cells(rows[0])), "{t}");
    }

    #[test]
    fn pipeline_and_other_tables() {
        let r = report();
        let t = r.pipeline_table();
        assert!(t.contains(
            "| 4 MiB | 4k | VRAM, migration (7.3) | 100.0 | 20.0 | 120.0 | 2.00 | 1024 | 1024 | 8.0 | 1024/1024 | 1.00x |"
        ), "{t}");
        assert!(t.contains(
            "| 4 MiB | 4k | VRAM, P2P alias | 100.0 | 20.0 | 120.0 | 0.00 | 0 | 0 | 0.0 |"
        ));
        let t = r.peer_table();
        assert!(t.contains(
            "| 4 MiB in rvram0 | 4k | rvram1, by migration (no alias flag) | 500.0 | 488.28 | 1024 | 4.0 | 0 | 0 | 0/1024 | 10.00x |"
        ), "{t}");
        let t = r.bandwidth_table();
        assert!(
            t.contains("| 4 MiB 4k | VRAM, P2P alias | 8.4 | 4.2 | 0 | 1024/1024 |"),
            "{t}"
        );
        for t in [
            r.fault_table(),
            r.pipeline_table(),
            r.peer_table(),
            r.bandwidth_table(),
        ] {
            let rows: Vec<&str> = t.lines().collect();
            let cells = |s: &str| s.matches('|').count();
            assert!(rows.iter().all(|row| cells(row) == cells(rows[0])), "{t}");
        }
    }

    #[test]
    fn markdown_has_every_part_and_the_note() {
        let md = report().markdown();
        for part in [
            "## 1. The NIC's fault path",
            "## 2. The NIC writes, then the GPU uses the data",
            "## 3. A GPU peer reads the target",
            "## 4. Steady RDMA bandwidth",
            TCG_NOTE,
            "- kernel 7.3, device rxe0",
            "2 timed RDMA WRITEs",
        ] {
            assert!(md.contains(part), "{part:?} missing:\n{md}");
        }
        let empty = BenchReport::default().markdown();
        assert!(!empty.contains("## "), "{empty}");
    }

    #[test]
    fn failed_rounds_stay_out_of_the_medians() {
        let mut r = report();
        let first = r.fault.clone();
        assert!(first.iter().all(|f| f.check().is_empty()));
        // A second round of each cell, ten times slower, whose RDMA READ
        // copied pages: it failed its checks and measured something else.
        for f in &first {
            let mut bad = FaultPath {
                round: 1,
                elapsed: f.elapsed * 10,
                ..f.clone()
            };
            bad.read_delta.pages_to_ram += 1;
            assert!(!bad.check().is_empty());
            r.fault.push(bad);
        }
        let rounds = r.fault_rounds(MIB4, Pages::Small, Placement::Ram);
        assert_eq!(rounds, [first[0].us_per_page()]);
    }

    #[test]
    fn fault_rounds_give_medians() {
        let mut r = report();
        let first = r.fault.clone();
        // Rounds 1 and 2 take twice and three times as long: the medians
        // are round 1's.
        for (round, scale) in [(1, 2), (2, 3)] {
            for f in &first {
                r.fault.push(FaultPath {
                    round,
                    elapsed: f.elapsed * scale,
                    ..f.clone()
                });
            }
        }
        let m = r.fault_medians(MIB4, Pages::Small);
        let get = |name: &str| {
            m.iter()
                .find(|x| x.name == name)
                .map(|x| x.value)
                .unwrap_or_else(|| panic!("no {name} in {m:?}"))
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.abs().max(1.0);
        let ram = first[0].us_per_page();
        let alias = first[1].us_per_page();
        let migrate = first[2].us_per_page();
        assert!(close(get("fault_4M_4k_ram_us_per_page_median"), 2.0 * ram));
        assert!(close(
            get("fault_4M_4k_alias_us_per_page_median"),
            2.0 * alias
        ));
        assert_eq!(get("fault_4M_4k_migrate_rounds"), 3.0);
        assert!(close(get("fault_4M_4k_alias_over_ram"), alias / ram));
        assert!(close(
            get("fault_4M_4k_migrate_over_alias"),
            migrate / alias
        ));
        // The first-round table keeps a row per placement; the medians
        // table has a row per target, with the range of the rounds.
        assert_eq!(r.fault_table().lines().count(), 2 + 3);
        let t = r.fault_median_table();
        assert_eq!(t.lines().count(), 2 + 1, "{t}");
        assert!(
            t.contains(&format!(
                "| 4 MiB | 4k | 3 | {:.2} ({:.2}-{:.2}) |",
                2.0 * ram,
                ram,
                3.0 * ram
            )),
            "{t}"
        );
        // Later rounds' values carry their round; the medians are there.
        let lines = r.lines();
        assert!(lines
            .iter()
            .any(|l| l.starts_with("bench fault_4M_4k_alias_us_per_page_r2 ")));
        assert!(lines
            .iter()
            .any(|l| l.starts_with("bench fault_4M_4k_alias_us_per_page_median ")));
        assert!(r.markdown().contains(&t));
    }

    #[test]
    fn lines_are_tap_comments() {
        let lines = report().lines();
        assert_eq!(lines[0], "bench: kernel 7.3, device rxe0");
        assert!(lines
            .iter()
            .skip(1)
            .all(|l| l.starts_with("bench ") && l.split_whitespace().count() == 4));
        assert!(lines.contains(&"bench bw_4M_4k_alias_write_mb_s 8.4 MB/s".to_owned()));
    }
}
