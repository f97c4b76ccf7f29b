// SPDX-License-Identifier: GPL-2.0

use super::*;

#[test]
fn ioctl_numbers() {
    assert_eq!(std::mem::size_of::<DmirrorCmd>(), 40);
    assert_eq!(MIGRATE_TO_DEV, 0xc028_4802);
    assert_eq!(MIGRATE_TO_SYS, 0xc028_4803);
    assert_eq!(SNAPSHOT, 0xc028_4804);
}

#[test]
fn snapshot_bytes() {
    assert!(in_vram(0x20));
    assert!(in_vram(0x23));
    assert!(in_vram(0x26));
    assert!(!in_vram(SNAP_DEV_PRIVATE_REMOTE | 0x02));
    assert!(!in_vram(0x02));
    assert!(!in_vram(0x00));
    assert!(!in_vram(0xff));
    assert_eq!(resident(&[0x22, 0x02, 0x32, 0x26, 0xff]), 2);
}

#[test]
fn stats_paths() {
    assert_eq!(
        stats_path(Path::new("/dev/rvram3")),
        Ok(PathBuf::from("/sys/kernel/debug/rvram/rvram3/stats"))
    );
    assert_eq!(
        stats_path(Path::new("rvram12")),
        Ok(PathBuf::from("/sys/kernel/debug/rvram/rvram12/stats"))
    );
    for bad in ["/dev/rvram", "/dev/hmm_dmirror0", "/dev/rvram1x", "/", ""] {
        assert!(stats_path(Path::new(bad)).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn parses_stats() {
    let text = "pages_total 65536\npages_resident 1024\nmigrated_to_vram 4096\n\
                    migrated_to_ram 3072\ncpu_faults 12\nalloc_failures 0\nevicted 0\n\
                    alias_grants 17\nalias_accesses 5\npages_to_vram 8192\n\
                    pages_to_ram 6144\nfault_ns 36000000\n";
    let s = Stats::parse(text).unwrap();
    assert_eq!(
        s,
        Stats {
            migrated_to_vram: 4096,
            migrated_to_ram: 3072,
            cpu_faults: 12,
            alias_grants: 17,
            alias_accesses: 5,
            pages_resident: 1024,
            pages_to_vram: 8192,
            pages_to_ram: 6144,
            fault_ns: 36_000_000,
        }
    );
    let before = Stats {
        migrated_to_ram: 3072,
        alias_grants: 14,
        ..s
    };
    let d = s.since(&before);
    assert_eq!(d.migrated_to_ram, 0);
    assert_eq!(d.alias_grants, 3);
    assert_eq!(d.to_string(), "migrated_to_ram +0, alias_grants +3");
    assert_eq!(before.since(&s).alias_grants, -3);

    assert!(Stats::parse("migrated_to_ram 1\n").is_err());
    // The counters of the current driver are required.
    for name in ["pages_to_ram", "pages_to_vram", "fault_ns", "cpu_faults"] {
        let without: String = text
            .lines()
            .filter(|l| !l.starts_with(&format!("{name} ")))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = Stats::parse(&without).unwrap_err();
        assert!(err.contains(name), "{err}");
    }
    let err = Stats::parse(&text.replace("alias_grants 17", "alias_grants x")).unwrap_err();
    assert!(err.contains("alias_grants"), "{err}");
}

#[test]
fn deltas() {
    let before = Stats {
        pages_to_ram: 10,
        pages_to_vram: 20,
        cpu_faults: 3,
        fault_ns: 1_000,
        ..Stats::default()
    };
    let after = Stats {
        pages_to_ram: 10 + 1024,
        pages_to_vram: 20 + 1024,
        cpu_faults: 3 + 4,
        fault_ns: 1_000 + 10_000,
        migrated_to_ram: 2,
        ..Stats::default()
    };
    let d = after.since(&before);
    assert_eq!(d.pages_copied(), 2048);
    assert_eq!(d.bytes_copied(), 2048 * 4096);
    assert_eq!(d.us_per_fault(), Some(2.5));
    assert_eq!(StatsDelta::default().us_per_fault(), None);
    assert_eq!(
        d.detail(),
        "pages_to_ram +1024, pages_to_vram +1024, migrated_to_ram +2, cpu_faults +4, \
             fault_ns +10000"
    );
    assert_eq!(StatsDelta::default().detail(), "no counter changed");
    let mut sum = d;
    sum += d;
    assert_eq!(sum.pages_to_ram, 2048);
    assert_eq!(sum.fault_ns, 20_000);
}

#[test]
fn huge_and_switch_values() {
    assert_eq!(resident_huge(&[0x26, 0x22, 0x36, 0x06, 0x24]), 2);
    assert_eq!(READ, 0xc028_4800);
    assert_eq!(FLAGS, 0xc028_4808);
    assert_eq!(bool_is_on("Y\n"), Some(true));
    assert_eq!(bool_is_on("1"), Some(true));
    assert_eq!(bool_is_on("N"), Some(false));
    assert_eq!(bool_is_on("0\n"), Some(false));
    assert_eq!(bool_is_on("maybe"), None);
    assert_eq!(switch_text(true), "Y");
    assert_eq!(switch_text(false), "N");
}

#[test]
fn gpu_directories() {
    assert_eq!(gpu_index("rvram0"), Some(0));
    assert_eq!(gpu_index("rvram12"), Some(12));
    for bad in ["rvram", "rvram1x", "rvram-1", "hmm_dmirror0", ""] {
        assert_eq!(gpu_index(bad), None, "{bad:?} accepted");
    }
}

#[test]
fn page_spans() {
    assert_eq!(page_span(0, 1), 0..=0);
    assert_eq!(page_span(4095, 2), 0..=1);
    assert_eq!(page_span(4096 + 512, 64 * 1024 + 7), 1..=17);
    assert_eq!(page_span(4096 - 8, 8), 0..=0);
    assert_eq!(pages(4096), 1);
    assert_eq!(pages(4097), 2);
}

#[test]
fn open_refuses_other_devices() {
    let err = Vram::open(Path::new("/dev/null")).unwrap_err();
    assert!(err.contains("not an rvram device"), "{err}");
}
