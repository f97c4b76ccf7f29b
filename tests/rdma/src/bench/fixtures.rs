// SPDX-License-Identifier: GPL-2.0
//! Measurements with known counters, shared by the benchmarks' unit tests.

use std::time::Duration;

use super::{Cell, FaultPath, PeerRead, Pipeline, Placement};
use crate::config::Pages;
use crate::vram::StatsDelta;

pub(super) fn cell(size: usize, pages: Pages, placement: Placement) -> Cell {
    Cell {
        size,
        pages,
        placement,
    }
}

pub(super) const MIB4: usize = 4 << 20;
pub(super) const N: i64 = 1024;

fn fault(placement: Placement, delta: StatsDelta, resident: usize, ms_: u64) -> FaultPath {
    FaultPath {
        cell: cell(MIB4, Pages::Small, placement),
        elapsed: Duration::from_millis(ms_),
        delta,
        read_delta: StatsDelta::default(),
        resident_after: resident,
        huge_before: 0,
        round: 0,
    }
}

pub(super) fn good_faults() -> [FaultPath; 3] {
    [
        fault(Placement::Ram, StatsDelta::default(), 0, 2),
        fault(
            Placement::Alias,
            StatsDelta {
                alias_grants: N,
                ..StatsDelta::default()
            },
            1024,
            10,
        ),
        fault(
            Placement::Migrate,
            StatsDelta {
                pages_to_ram: N,
                migrated_to_ram: N,
                cpu_faults: N,
                fault_ns: N * 250_000,
                ..StatsDelta::default()
            },
            0,
            400,
        ),
    ]
}

fn pipeline(placement: Placement, nic: StatsDelta, gpu: StatsDelta, resident: usize) -> Pipeline {
    Pipeline {
        cell: cell(MIB4, Pages::Small, placement),
        nic: Duration::from_millis(100),
        gpu: Duration::from_millis(20),
        nic_delta: nic,
        gpu_delta: gpu,
        resident_after: resident,
    }
}

pub(super) fn to_ram(n: i64) -> StatsDelta {
    StatsDelta {
        pages_to_ram: n,
        ..StatsDelta::default()
    }
}

pub(super) fn to_vram(n: i64) -> StatsDelta {
    StatsDelta {
        pages_to_vram: n,
        ..StatsDelta::default()
    }
}

pub(super) fn good_pipelines() -> [Pipeline; 3] {
    [
        pipeline(Placement::Ram, StatsDelta::default(), to_vram(N), 1024),
        pipeline(
            Placement::Alias,
            StatsDelta::default(),
            StatsDelta::default(),
            1024,
        ),
        pipeline(Placement::Migrate, to_ram(N), to_vram(N), 1024),
    ]
}

pub(super) fn peer(
    alias: bool,
    owner: StatsDelta,
    reader: StatsDelta,
    resident: usize,
) -> PeerRead {
    PeerRead {
        cell: cell(
            MIB4,
            Pages::Small,
            if alias {
                Placement::Alias
            } else {
                Placement::Migrate
            },
        ),
        gpus: ("rvram0".into(), "rvram1".into()),
        elapsed: Duration::from_millis(if alias { 50 } else { 500 }),
        owner,
        reader,
        resident_after: resident,
    }
}
