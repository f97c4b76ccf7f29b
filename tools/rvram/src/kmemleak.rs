// SPDX-License-Identifier: GPL-2.0
//! kmemleak's report (`/sys/kernel/debug/kmemleak`, saved by the guest as
//! `kmemleak.txt` after two scans) and which of its leaks are ours.
//!
//! A record looks like
//!
//! ```text
//! unreferenced object 0xffff888004d1c000 (size 64):
//!   comm "hmm-tests", pid 201, jiffies 4294893123
//!   hex dump (first 32 bytes):
//!     00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  ................
//!   backtrace (crc 6a1e3f0c):
//!     kmemleak_alloc+0x4e/0x90
//!     __kmalloc_cache_noprof+0x2a4/0x3b0
//!     dmirror_fops_open+0x30/0x1c0 [rvram]
//! ```
//!
//! (older kernels print frames as `[<ffffffff81234567>] name+0x1/0x2`).
//! A leak is ours when a frame of its backtrace is in rvram, the test
//! modules, or the code the series adds or changes: the run fails on it.
//! Leaks elsewhere in the base kernel are reported but do not fail a run.

/// Frame substrings that make a leak attributable to the series or rvram.
const OURS: &[&str] = &[
    // rvram and the test modules, by module tag.
    "[rvram]",
    "[odp_dma]",
    "[test_hmm]",
    "[rdma_rxe]",
    // The Rust abstractions (v0-mangled: `_RNv...6kernel2mm...`), the
    // rvram driver, the dmirror ABI.
    "6kernel2mm",
    "6kernel2io",
    "6kernel3pci",
    "rvram",
    "dmirror",
    // mm/hmm and migration, P2PDMA, IB core ODP and rxe.
    "hmm_",
    "migrate_vma",
    "migrate_device",
    "p2pdma",
    "pci_p2p",
    "ib_umem_odp",
    "rxe_",
];

/// One unreferenced object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leak {
    /// The record's first line (`unreferenced object 0x... (size N):`).
    pub object: String,
    /// The `comm "...", pid N` line, trimmed.
    pub comm: String,
    /// The first frame that makes it ours, or `None` if it is not.
    pub ours: Option<String>,
    /// The innermost frame after kmemleak's and the allocator's own.
    pub site: String,
}

/// Whether a frame belongs to the allocator or kmemleak, not to the caller.
fn is_allocator(frame: &str) -> bool {
    const ALLOC: &[&str] = &[
        "kmemleak_",
        "kmalloc",
        "kmem_cache_",
        "kzalloc",
        "kcalloc",
        "krealloc",
        "vmalloc",
        "vzalloc",
        "kvmalloc",
        "__alloc_",
        "alloc_pages",
        "slab_",
        "pcpu_",
        "__do_kmalloc",
        "__vmalloc",
        // The Rust allocator (`kernel::alloc`).
        "6kernel5alloc",
    ];
    ALLOC.iter().any(|a| frame.contains(a))
}

/// A backtrace line's symbol part: `name+0x1/0x2 [mod]`.
fn frame_of(line: &str) -> Option<&str> {
    let t = line.trim();
    let t = match t.strip_prefix("[<") {
        Some(rest) => rest.split_once(">] ")?.1,
        None => t,
    };
    (t.contains("+0x") || t.contains(" [")).then_some(t)
}

/// Parses a kmemleak report.
pub fn parse(report: &str) -> Vec<Leak> {
    let mut leaks = Vec::new();
    let mut cur: Option<Leak> = None;
    let mut in_trace = false;
    for line in report.lines() {
        let t = line.trim();
        if t.starts_with("unreferenced object") {
            leaks.extend(cur.take());
            cur = Some(Leak {
                object: t.to_string(),
                comm: String::new(),
                ours: None,
                site: String::new(),
            });
            in_trace = false;
            continue;
        }
        let Some(leak) = cur.as_mut() else {
            continue;
        };
        if t.starts_with("comm ") {
            leak.comm = t.to_string();
        } else if t.starts_with("backtrace") {
            in_trace = true;
        } else if in_trace {
            let Some(frame) = frame_of(line) else {
                continue;
            };
            if leak.site.is_empty() && !is_allocator(frame) {
                leak.site = frame.to_string();
            }
            if leak.ours.is_none() && OURS.iter().any(|m| frame.contains(m)) {
                leak.ours = Some(frame.to_string());
            }
        }
    }
    leaks.extend(cur);
    leaks
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "\
unreferenced object 0xffff888004d1c000 (size 64):
  comm \"hmm-tests\", pid 201, jiffies 4294893123
  hex dump (first 32 bytes):
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  ................
  backtrace (crc 6a1e3f0c):
    kmemleak_alloc+0x4e/0x90
    __kmalloc_cache_noprof+0x2a4/0x3b0
    _RNvMs_NtNtCsfoo_6kernel2mm7pagemapNtB4_7Pagemap3new+0x30/0x1c0
    rvram_probe+0x30/0x1c0 [rvram]
    local_pci_probe+0x4e/0xa0
unreferenced object 0xffff888005000000 (size 32):
  comm \"swapper/0\", pid 1, jiffies 4294892000
  hex dump (first 32 bytes):
    01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00  ................
  backtrace (crc 1):
    [<ffffffff81234567>] kmemleak_alloc+0x4e/0x90
    [<ffffffff81234568>] kmalloc_trace+0x2a/0x3b
    [<ffffffff81234569>] acpi_ds_build_internal_package_obj+0x1/0x2
    [<ffffffff8123456a>] do_one_initcall+0x4/0x8
unreferenced object 0xffff888006000000 (size 128):
  comm \"ibv_rc_pingpong\", pid 300, jiffies 4294899000
  backtrace (crc 2):
    kmemleak_alloc+0x4e/0x90
    __kmalloc_noprof+0x2a4/0x3b0
    ib_umem_odp_get+0x10/0x200 [ib_core]
";

    #[test]
    fn records_and_attribution() {
        let leaks = parse(REPORT);
        assert_eq!(leaks.len(), 3);
        assert_eq!(
            leaks[0].object,
            "unreferenced object 0xffff888004d1c000 (size 64):"
        );
        assert_eq!(
            leaks[0].comm,
            "comm \"hmm-tests\", pid 201, jiffies 4294893123"
        );
        assert_eq!(
            leaks[0].ours.as_deref(),
            Some("_RNvMs_NtNtCsfoo_6kernel2mm7pagemapNtB4_7Pagemap3new+0x30/0x1c0")
        );
        assert_eq!(
            leaks[0].site,
            "_RNvMs_NtNtCsfoo_6kernel2mm7pagemapNtB4_7Pagemap3new+0x30/0x1c0"
        );
        assert_eq!(leaks[1].ours, None);
        assert_eq!(leaks[1].site, "acpi_ds_build_internal_package_obj+0x1/0x2");
        assert_eq!(
            leaks[2].ours.as_deref(),
            Some("ib_umem_odp_get+0x10/0x200 [ib_core]")
        );
    }

    #[test]
    fn empty_report() {
        assert!(parse("").is_empty());
        assert!(parse("\n").is_empty());
    }

    #[test]
    fn hex_dump_is_not_a_frame() {
        // A hex dump line that happens to contain "rvram" in its ASCII part.
        let r = "\
unreferenced object 0xffff888004d1c000 (size 16):
  comm \"x\", pid 1, jiffies 1
  hex dump (first 16 bytes):
    72 76 72 61 6d 00 00 00 00 00 00 00 00 00 00 00  rvram...........
  backtrace (crc 1):
    kmemleak_alloc+0x4e/0x90
    some_driver_init+0x1/0x2
";
        let leaks = parse(r);
        assert_eq!(leaks.len(), 1);
        assert_eq!(leaks[0].ours, None);
    }
}
