// SPDX-License-Identifier: GPL-2.0

use super::ops::{background_u64, read_u64};
use super::window::vram_verdict;
use super::*;
use crate::report::exit_code;

#[test]
fn background_words_match_the_background_fill() {
    let mut target = vec![0; 2 * 4096];
    pattern::fill(&mut target, 0, BACKGROUND_SEED);
    for offset in cases::ATOMIC_OFFSETS {
        assert_eq!(read_u64(&target, offset), background_u64(offset));
    }
}

#[test]
fn fetch_add_changes_every_byte_of_some_word() {
    let old = background_u64(0);
    let new = old.wrapping_add(FETCH_ADD);
    assert_ne!(old, new);
    assert_ne!(!old, old);
}

/// Without an RDMA device (as on a build host) the suite reports one
/// setup failure per MTU and exit code 2, and leaves the target alone.
#[test]
fn missing_device_is_a_setup_failure() {
    let cfg = Config {
        device: "rvram-no-such-device".into(),
        ..Config::default()
    };
    let mut target = vec![0; 2 * 4096];
    let mut seen = 0;
    let results = run_suite_with(&cfg, &mut target, &mut |_| seen += 1);
    assert_eq!(results.len(), cfg.mtus.len());
    assert_eq!(seen, results.len());
    for (result, mtu) in results.iter().zip(&cfg.mtus) {
        assert_eq!(result.kind, CaseKind::Setup);
        assert!(!result.passed);
        assert_eq!(result.mtu, Some(*mtu));
        assert!(
            result.name.starts_with(&format!("mtu {mtu}: setup")),
            "{}",
            result.name
        );
        assert!(!result.diagnostics.is_empty());
    }
    assert_eq!(exit_code(&results), 2);
}

fn delta(ram: i64, grants: i64) -> StatsDelta {
    StatsDelta {
        migrated_to_ram: ram,
        alias_grants: grants,
        ..StatsDelta::default()
    }
}

#[test]
fn vram_verdict_alias() {
    let snapshot = [0x22u8; 8];
    let (ok, lines) = vram_verdict(Expect::Alias, &delta(0, 3), &snapshot, 1..=2);
    assert!(ok, "{lines:?}");
    assert_eq!(
        lines,
        ["vram: migrated_to_ram +0, alias_grants +3, resident 8/8, touched pages in VRAM 2/2"]
    );

    let mut moved = snapshot;
    moved[2] = 0x02;
    let (ok, lines) = vram_verdict(Expect::Alias, &delta(1, 0), &moved, 1..=2);
    assert!(!ok);
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(lines[0].ends_with("resident 7/8, touched pages in VRAM 1/2"));
    assert!(
        lines[1].contains("migrated_to_ram changed by +1"),
        "{lines:?}"
    );
    assert!(lines[2].contains("alias_grants changed by +0"), "{lines:?}");
    assert_eq!(
        lines[3],
        "1 of 2 touched target pages left VRAM: page 2 (0x02)"
    );

    // Another GPU's VRAM is not ours.
    let (ok, _) = vram_verdict(Expect::Alias, &delta(0, 1), &[0x32], 0..=0);
    assert!(!ok);
    // A snapshot too short is a failure, not a panic.
    let (ok, lines) = vram_verdict(Expect::Alias, &delta(0, 1), &[0x22], 0..=1);
    assert!(!ok);
    assert!(
        lines[1].contains("page 1 (not in the snapshot)"),
        "{lines:?}"
    );
}

#[test]
fn vram_verdict_migrate() {
    let snapshot = [0x02u8, 0x22];
    let (ok, lines) = vram_verdict(Expect::Migrate, &delta(1, 0), &snapshot, 0..=0);
    assert!(ok, "{lines:?}");
    assert_eq!(lines.len(), 1);
    let (ok, lines) = vram_verdict(Expect::Migrate, &delta(0, 2), &snapshot, 0..=0);
    assert!(!ok);
    assert_eq!(lines.len(), 3, "{lines:?}");
}

#[test]
fn vram_verdict_coherent() {
    // Device-coherent pages of this GPU (0x40), mapped writable.
    let snapshot = [0x42u8; 4];
    let (ok, lines) = vram_verdict(Expect::Coherent, &delta(0, 0), &snapshot, 0..=3);
    assert!(ok, "{lines:?}");
    assert_eq!(
        lines,
        ["vram: migrated_to_ram +0, alias_grants +0, resident 4/4, touched pages in VRAM 4/4"]
    );
    // Any alias grant or migration is a failure, as is a page that left.
    let (ok, lines) = vram_verdict(Expect::Coherent, &delta(0, 1), &snapshot, 0..=3);
    assert!(!ok);
    assert!(lines[1].contains("alias_grants changed by +1"), "{lines:?}");
    let (ok, lines) = vram_verdict(Expect::Coherent, &delta(1, 0), &snapshot, 0..=3);
    assert!(!ok);
    assert!(
        lines[1].contains("migrated_to_ram changed by +1"),
        "{lines:?}"
    );
    let (ok, lines) = vram_verdict(Expect::Coherent, &delta(0, 0), &[0x42, 0x02], 0..=1);
    assert!(!ok);
    assert_eq!(
        lines[1],
        "1 of 2 touched target pages left VRAM: page 1 (0x02)"
    );
    // Another GPU's coherent VRAM (0x50) is not ours.
    let (ok, _) = vram_verdict(Expect::Coherent, &delta(0, 0), &[0x52], 0..=0);
    assert!(!ok);
}

/// VRAM mode with a device that is not rvram fails setup without
/// touching RDMA.
#[test]
fn vram_mode_needs_an_rvram_device() {
    let cfg = Config {
        mtus: vec![PathMtu::Mtu1024],
        vram: Some(crate::config::VramMode {
            device: "/dev/null".into(),
            expect: Expect::Alias,
        }),
        ..Config::default()
    };
    let mut target = Mmap::anonymous(2 * PAGE_SIZE).unwrap();
    let results = run_suite(&cfg, target.as_mut_slice());
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].kind, CaseKind::Setup);
    assert!(
        results[0].diagnostics[0].contains("not an rvram device"),
        "{:?}",
        results[0]
    );

    let mut unaligned = vec![0u8; 3 * PAGE_SIZE];
    let start = PAGE_SIZE - unaligned.as_ptr() as usize % PAGE_SIZE + 1;
    let results = run_suite(&cfg, &mut unaligned[start..start + PAGE_SIZE]);
    assert!(
        results[0].diagnostics[0].contains("whole pages"),
        "{:?}",
        results[0]
    );
}

#[test]
fn empty_target_is_a_setup_failure() {
    let results = run_suite(&Config::default(), &mut []);
    assert!(results
        .iter()
        .all(|r| r.kind == CaseKind::Setup && !r.passed));
    assert!(
        results[0].diagnostics[0].contains("empty"),
        "{:?}",
        results[0]
    );
}
