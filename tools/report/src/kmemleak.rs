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
    // The series' C code, by the functions its diffs add or change
    // (series/*.diff) and their neighbours on the same paths; built in,
    // so their frames carry no module tag.
    // mm/hmm.c (hmm_device_alias, hmm_vma_handle_*), mm/tests/hmm_alias_kunit.c.
    "hmm_",
    // mm/migrate_device.c (migrate_vma_collect_huge_pmd, ...).
    "migrate_vma",
    "migrate_device",
    // P2PDMA, which the aliases are pages of.
    "p2pdma",
    "pci_p2p",
    // drivers/dma-buf/dma-buf-mapping.c: the sg_table of a dma-buf of
    // physical ranges, allocated by the one and freed by the other.
    "dma_buf_phys_vec_to_sgt",
    "dma_buf_free_sgt",
    // drivers/infiniband/core/umem_odp.c (ib_umem_odp_map_dma_and_lock,
    // ib_umem_odp_unmap_dma_pages) and umem_dmabuf.c, which rxe's dma-buf
    // MRs of this series use.
    "ib_umem_odp",
    "ib_umem_dmabuf",
    // drivers/infiniband/sw/rxe/ (rxe_mr_dmabuf_*, rxe_reg_user_mr*,
    // __rxe_odp_mr_copy, rxe_ib_advise_mr_prefetch, ...; flush_send_wqe
    // has no prefix) should rdma_rxe be built in.
    "rxe_",
    "flush_send_wqe",
    // lib/iomap_copy.c.
    "__ioread64_copy",
    // The Rust cgroup abstraction (`kernel::cgroup`, dmem charges).
    "6kernel6cgroup",
];

/// Whether `frame` is a bare address in the x86-64 module area: code of a
/// module unloaded before kmemleak printed the report, which it can no
/// longer name. The suites unload only rvram and the test modules (odp_dma,
/// test_hmm, rvram_splat; tests/vm/kmemleak.sh unloads them before its
/// scans), and built-in code always has a name (`CONFIG_KALLSYMS`): such a
/// frame is ours. An 8-byte `KVec` buffer that rvram's module-wide
/// registry kept after unload was only seen this way.
fn unloaded(frame: &str) -> bool {
    let Some(hex) = frame
        .split_whitespace()
        .next()
        .and_then(|f| f.strip_prefix("0x"))
    else {
        return false;
    };
    // MODULES_VADDR (0xffffffffa0000000 without KASLR, 0xffffffffc0000000
    // with it) to the fixmap.
    u64::from_str_radix(hex, 16).is_ok_and(|a| a >= 0xffff_ffff_a000_0000)
}

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
    // A bare address: code kallsyms cannot name ([`unloaded`]).
    let addr = t
        .strip_prefix("0x")
        .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
    (t.contains("+0x") || t.contains(" [") || addr).then_some(t)
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
            if leak.ours.is_none() && (OURS.iter().any(|m| frame.contains(m)) || unloaded(frame)) {
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

    /// From the dual plan's kmemleak.txt: rvram's registry kept a `KVec`
    /// buffer after unload, and its frames had no names any more.
    const UNLOADED: &str = "\
unreferenced object 0xffff88810107f320 (size 8):
  comm \"rvram-coherent\", pid 1518, jiffies 4295027988
  hex dump (first 8 bytes):
    00 ec 15 01 81 88 ff ff                          ........
  backtrace (crc ae9eff62):
    __kmalloc_node_track_caller_noprof+0x2ba/0x580
    krealloc_node_align_noprof+0x184/0x2f0
    0xffffffffa000f7b4
    0xffffffffa001a1d4
    pci_device_remove+0x64/0xb0
    device_release_driver_internal+0x3b0/0x6e0
    unbind_store+0x149/0x170
";

    #[test]
    fn a_leak_from_an_unloaded_module_is_ours() {
        let leaks = parse(UNLOADED);
        assert_eq!(leaks.len(), 1);
        assert_eq!(leaks[0].ours.as_deref(), Some("0xffffffffa000f7b4"));
        assert_eq!(leaks[0].site, "0xffffffffa000f7b4");
        // Built-in text, or a hex dump's numbers, are not.
        assert!(!unloaded("0xffffffff81234567"));
        assert!(!unloaded("00 ec 15 01"));
    }

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

    /// A one-record report whose backtrace is the allocator, then `frame`,
    /// then a base-kernel caller.
    fn leak_at(frame: &str) -> Leak {
        let report = format!(
            "\
unreferenced object 0xffff888007000000 (size 256):
  comm \"rvram-rdma-test\", pid 400, jiffies 4294900000
  backtrace (crc 3):
    kmemleak_alloc+0x4e/0x90
    __kmalloc_noprof+0x2a4/0x3b0
    {frame}
    __x64_sys_ioctl+0x1/0x2
"
        );
        let mut leaks = parse(&report);
        assert_eq!(leaks.len(), 1);
        leaks.remove(0)
    }

    #[test]
    fn the_series_c_frames_are_ours() {
        // Built-in code the series adds or changes: no module tag.
        let ours = [
            "dma_buf_phys_vec_to_sgt+0x1a0/0x5c0",
            "dma_buf_free_sgt+0x30/0x120",
            "ib_umem_odp_map_dma_and_lock+0x2d0/0x9a0",
            "ib_umem_odp_unmap_dma_pages+0x40/0x200",
            "ib_umem_dmabuf_get_pinned+0x10/0x80",
            "rxe_mr_dmabuf_init_user+0x80/0x400",
            "rxe_reg_user_mr_dmabuf+0x60/0x200",
            "__rxe_odp_mr_copy+0x10/0x300",
            "rxe_ib_advise_mr_prefetch+0x20/0x100",
            "flush_send_wqe+0x40/0x100",
            "hmm_device_alias+0x70/0x300",
            "hmm_vma_handle_pte+0x1/0x2",
            "hmm_alias_test_encoding+0x1/0x2",
            "migrate_vma_collect_huge_pmd+0x1/0x2",
            "__ioread64_copy+0x1/0x2",
            "dmirror_migrate_to_device+0x1/0x2 [test_hmm]",
            "dmirror_bounce_init+0x1/0x2",
            "_RNvMNtNtCsabc_6kernel6cgroup4dmemNtB2_6Region6charge+0x1/0x2",
        ];
        for frame in ours {
            assert_eq!(leak_at(frame).ours.as_deref(), Some(frame), "{frame}");
        }
        // Their base-kernel neighbours are not ours.
        let base = [
            "dma_buf_export+0x1/0x2",
            "dma_buf_dynamic_attach+0x1/0x2",
            "ib_umem_get+0x1/0x2",
            "sg_alloc_append_table_from_pages+0x1/0x2",
            "migrate_pages+0x1/0x2",
            "shmem_alloc_folio+0x1/0x2",
        ];
        for frame in base {
            let leak = leak_at(frame);
            assert_eq!(leak.ours, None, "{frame}");
            assert_eq!(leak.site, frame);
        }
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
