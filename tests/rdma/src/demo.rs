// SPDX-License-Identifier: GPL-2.0
//! `--demo`: the project's story in one run, for people rather than TAP.
//!
//! First the story, with P2P aliases on: a buffer is moved into an rvram
//! GPU's VRAM, registered with plain ODP, and written by the NIC (RDMA
//! WRITE from a second QP). rvram's counters and a SNAPSHOT then show
//! where the data is, an RDMA READ checks what the NIC wrote, and finally
//! the CPU reads the buffer, which migrates it back to system RAM, and
//! checks it too.
//!
//! Then what the alias saves, side by side with migration (the GPUs'
//! `p2p_alias` switches off, Linux 7.3 as released), from the benchmark's
//! own measurements ([`crate::bench`]) on fresh buffers of the same size:
//! the pages and bytes the NIC's fault path moves, and the NIC-writes-then-
//! GPU-uses pipeline. Times are shown, but labelled as what they are: QEMU
//! TCG wall time.

use std::fmt::Write as _;

use crate::bench::{self, Cell, FaultPath, Measurement, Pipeline, Placement};
use crate::config::{Config, Pages};
use crate::mmap::Mmap;
use crate::pattern;
use crate::verbs::{self, Device, SendOp, Side};
use crate::vram::{self, AliasSwitch, Vram};

const SEED: u32 = 0xdec0_de00;

/// Where the projection of the counted savings to hardware is documented.
pub const PROJECTION_DOC: &str = "Documentation/misc-devices/rvram.rst";

/// Runs the demo on `cfg.vram`'s GPU with a buffer of `cfg.size` bytes;
/// prints as it goes. Errors say which step or check failed.
pub fn run_demo(cfg: &Config) -> Result<(), String> {
    let vram_cfg = cfg.vram.as_ref().ok_or("--demo needs --vram /dev/rvramN")?;
    // Restores the switches when the demo ends, however it ends.
    let aliases = AliasSwitch::open()?;
    aliases.set(true)?;
    story(cfg, &vram_cfg.device)?;

    let len = cfg.size;
    println!(
        "\n6. what the alias saves against migration (p2p_alias off, Linux 7.3 as\n   \
         released): fresh {} buffers in VRAM, measured by the bench's code\n   \
         (rvram-rdma-test --bench; make bench has more sizes, THP, a GPU peer)",
        bench::size_text(len)
    );
    let cell = |placement| Cell {
        size: len,
        pages: Pages::Small,
        placement,
    };
    let (alias, migrate) = bench::with_rig(cfg, len, |rig| {
        let alias = rig.measure_cell(cell(Placement::Alias), SEED + 1);
        let migrate = rig.measure_cell(cell(Placement::Migrate), SEED + 2);
        (alias, migrate)
    })?;
    let mut failures = Vec::new();
    let fault_alias = take(&mut failures, "alias, fault path", alias.0)?;
    let fault_migrate = take(&mut failures, "migration, fault path", migrate.0)?;
    let pipe_alias = take(&mut failures, "alias, pipeline", alias.1)?;
    let pipe_migrate = take(&mut failures, "migration, pipeline", migrate.1)?;
    print!(
        "{}",
        savings_table(&fault_alias, &fault_migrate, &pipe_alias, &pipe_migrate)
    );
    println!("{}", tcg_sentence(&fault_alias, &pipe_migrate));
    if failures.is_empty() {
        println!(
            "   checks: every count as expected, every byte right (RDMA READ and GPU read-back)"
        );
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

/// The measurement of `outcome`; its counter and data failures, prefixed
/// with `what`, go to `failures`.
fn take<T: Measurement>(
    failures: &mut Vec<String>,
    what: &str,
    outcome: bench::Measured<T>,
) -> Result<T, String> {
    let (m, errors) = outcome.map_err(|e| format!("{what}: {e}"))?;
    failures.extend(
        m.check()
            .into_iter()
            .chain(errors)
            .map(|w| format!("{what}: {w}")),
    );
    Ok(m)
}

/// Steps 1 to 5: the buffer in VRAM, written by the NIC through plain ODP.
fn story(cfg: &Config, device: &std::path::Path) -> Result<(), String> {
    let mtu = *cfg.mtus.first().ok_or("no MTU")?;
    let mut gpu = Vram::open(device)?;
    let len = cfg.size;
    let pages = vram::pages(len);
    println!(
        "{len} bytes ({pages} pages), {} at MTU {mtu}, p2p_alias on \
         (rvram counts folios in migrated_to_*: a 2 MiB folio is one migration or alias grant)",
        cfg.device
    );

    let mut target = Mmap::anonymous(len).map_err(|e| format!("map target: {e}"))?;
    let mut local = Mmap::anonymous(len).map_err(|e| format!("map source: {e}"))?;
    target.as_mut_slice().fill(0);
    gpu.migrate_to_dev(target.as_slice(), &mut |_, _| {})?;
    let snap = gpu.snapshot(target.as_slice())?;
    println!(
        "1. moved into {}: {}/{pages} pages in VRAM",
        device.display(),
        vram::resident(&snap)
    );

    pattern::fill(local.as_mut_slice(), 0, SEED);
    let before = gpu.stats()?;
    let dev = Device::open(cfg).map_err(|e| format!("open {}: {e}", cfg.device))?;
    let local = dev
        .register(local.as_mut_slice(), verbs::local_access())
        .map_err(|e| format!("register source: {e}"))?;
    let target = dev
        .register(target.as_mut_slice(), verbs::target_access(true))
        .map_err(|e| format!("register target: {e}"))?;
    let mut ep = dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
    // rxe maps what is present when the MR is registered: with aliases,
    // the VRAM pages through their aliases.
    let delta = gpu.stats()?.since(&before);
    let snap = gpu.snapshot(target.bytes())?;
    println!(
        "2. registered with IBV_ACCESS_ON_DEMAND (rxe maps it at once): \
         {}/{pages} pages still in VRAM; rvram: {delta}",
        vram::resident(&snap)
    );

    let before = gpu.stats()?;
    let op = SendOp::Write(target.remote(0, len).map_err(|e| e.to_string())?);
    let sge = local.sge(0, len).map_err(|e| e.to_string())?;
    ep.post_and_wait(Side::A, 1, op, sge, cfg.timeout)
        .map_err(|e| e.to_string())?;
    let delta = gpu.stats()?.since(&before);
    let snap = gpu.snapshot(target.bytes())?;
    let resident = vram::resident(&snap);
    println!(
        "3. the NIC wrote all {len} bytes: {resident}/{pages} pages still in VRAM; \
         rvram: pages_to_ram {:+}, {delta}",
        delta.pages_to_ram
    );
    if resident != pages || delta.pages_to_ram != 0 {
        return Err(format!(
            "after the NIC's write {resident} of {pages} pages are in VRAM and \
             pages_to_ram moved by {:+}: want all pages in VRAM, +0",
            delta.pages_to_ram
        ));
    }

    // Read back by the NIC into the (now overwritten) source buffer.
    let mut local = local;
    local.bytes_mut().fill(0);
    let op = SendOp::Read(target.remote(0, len).map_err(|e| e.to_string())?);
    let sge = local.sge(0, len).map_err(|e| e.to_string())?;
    ep.post_and_wait(Side::A, 2, op, sge, cfg.timeout)
        .map_err(|e| e.to_string())?;
    if let Some(why) = pattern::check(local.bytes(), 0, SEED).describe("RDMA READ back") {
        return Err(why);
    }
    println!("4. RDMA READ back: every byte as written");

    let before = gpu.stats()?;
    if let Some(why) = pattern::check(target.bytes(), 0, SEED).describe("CPU read") {
        return Err(why);
    }
    let delta = gpu.stats()?.since(&before);
    println!(
        "5. the CPU reads it (its faults bring it back to RAM): every byte right; rvram: {delta}"
    );
    Ok(())
}

/// The side-by-side table of step 6: alias against migration, counts
/// first, times labelled as QEMU TCG wall time.
pub fn savings_table(
    fault_alias: &FaultPath,
    fault_migrate: &FaultPath,
    pipe_alias: &Pipeline,
    pipe_migrate: &Pipeline,
) -> String {
    let n = fault_alias.cell.npages();
    let mib = |bytes: i64| format!("{:.1}", bytes as f64 / (1 << 20) as f64);
    let ms = |d: std::time::Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    let per_fault = |f: &FaultPath| {
        f.delta
            .us_per_fault()
            .map_or_else(|| "-".to_owned(), |us| format!("{us:.1} us"))
    };
    let rows: Vec<(&str, String, String)> = vec![
        (
            "NIC fault path (ODP prefetch of the whole MR)",
            String::new(),
            String::new(),
        ),
        (
            "  pages copied VRAM -> RAM",
            fault_alias.delta.pages_to_ram.to_string(),
            fault_migrate.delta.pages_to_ram.to_string(),
        ),
        (
            "  MiB through system RAM",
            mib(fault_alias.delta.bytes_copied()),
            mib(fault_migrate.delta.bytes_copied()),
        ),
        (
            "  pages still in VRAM afterwards",
            format!("{}/{n}", fault_alias.resident_after),
            format!("{}/{n}", fault_migrate.resident_after),
        ),
        (
            "  kernel time per migration fault",
            per_fault(fault_alias),
            per_fault(fault_migrate),
        ),
        (
            "  wall time (QEMU TCG)",
            ms(fault_alias.elapsed),
            ms(fault_migrate.elapsed),
        ),
        (
            "NIC RDMA WRITEs it, then the GPU uses it",
            String::new(),
            String::new(),
        ),
        (
            "  migrations per page",
            format!("{:.0}", pipe_alias.migrations_per_page()),
            format!("{:.0}", pipe_migrate.migrations_per_page()),
        ),
        (
            "  MiB through system RAM",
            mib(pipe_alias.delta().bytes_copied()),
            mib(pipe_migrate.delta().bytes_copied()),
        ),
        (
            "  NIC write, wall time (QEMU TCG)",
            ms(pipe_alias.nic),
            ms(pipe_migrate.nic),
        ),
        (
            "  GPU MIGRATE_TO_DEV, wall time (QEMU TCG)",
            ms(pipe_alias.gpu),
            ms(pipe_migrate.gpu),
        ),
    ];
    let heads = ("P2P alias", "migration (7.3)");
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let w1 = rows
        .iter()
        .map(|r| r.1.len())
        .chain([heads.0.len()])
        .max()
        .unwrap_or(0);
    let w2 = rows
        .iter()
        .map(|r| r.2.len())
        .chain([heads.1.len()])
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(out, "   {:w0$}  {:>w1$}  {:>w2$}", "", heads.0, heads.1);
    for (label, a, m) in rows {
        let line = format!("   {label:w0$}  {a:>w1$}  {m:>w2$}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

/// What the table means, in words: the times are emulation, the counts
/// are what transfers to hardware.
/// Indented and wrapped at 78 columns.
pub fn tcg_sentence(fault_alias: &FaultPath, pipe_migrate: &Pipeline) -> String {
    let n = fault_alias.cell.npages();
    let text = format!(
        "Under QEMU TCG, wall time is dominated by emulation (the CPU, Soft-RoCE's \
         packet processing, the emulated BAR): the times above compare code paths on an \
         emulator, not hardware speeds. What transfers to hardware is the count: with \
         the alias, none of the {n} pages crosses system RAM when the NIC faults them \
         in, and the NIC-then-GPU round trip copies 0 pages instead of {} ({:.0} per \
         page). The projection to hardware is in {PROJECTION_DOC}.",
        pipe_migrate.delta().pages_copied(),
        pipe_migrate.migrations_per_page()
    );
    wrap(&text, "   ", 78)
}

/// `text` wrapped at `width` columns, each line starting with `indent`.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::from(indent);
    for word in text.split_whitespace() {
        if line.len() > indent.len() && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line = String::from(indent);
        }
        if line.len() > indent.len() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vram::StatsDelta;
    use std::time::Duration;

    fn cell(placement: Placement) -> Cell {
        Cell {
            size: 4 << 20,
            pages: Pages::Small,
            placement,
        }
    }

    fn measured() -> (FaultPath, FaultPath, Pipeline, Pipeline) {
        let fault_alias = FaultPath {
            cell: cell(Placement::Alias),
            elapsed: Duration::from_millis(12),
            delta: StatsDelta {
                alias_grants: 1024,
                ..StatsDelta::default()
            },
            read_delta: StatsDelta::default(),
            resident_after: 1024,
            huge_before: 0,
            round: 0,
        };
        let fault_migrate = FaultPath {
            cell: cell(Placement::Migrate),
            elapsed: Duration::from_millis(480),
            delta: StatsDelta {
                pages_to_ram: 1024,
                cpu_faults: 1024,
                fault_ns: 1024 * 300_000,
                ..StatsDelta::default()
            },
            resident_after: 0,
            ..fault_alias.clone()
        };
        let pipe_alias = Pipeline {
            cell: cell(Placement::Alias),
            nic: Duration::from_millis(900),
            gpu: Duration::from_millis(30),
            nic_delta: StatsDelta::default(),
            gpu_delta: StatsDelta::default(),
            resident_after: 1024,
        };
        let pipe_migrate = Pipeline {
            cell: cell(Placement::Migrate),
            nic_delta: StatsDelta {
                pages_to_ram: 1024,
                ..StatsDelta::default()
            },
            gpu_delta: StatsDelta {
                pages_to_vram: 1024,
                ..StatsDelta::default()
            },
            ..pipe_alias.clone()
        };
        (fault_alias, fault_migrate, pipe_alias, pipe_migrate)
    }

    #[test]
    fn table_puts_counts_side_by_side() {
        let (fa, fm, pa, pm) = measured();
        let t = savings_table(&fa, &fm, &pa, &pm);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 12, "{t}");
        assert!(lines[0].ends_with("P2P alias  migration (7.3)"), "{t}");
        let row = |label: &str| {
            lines
                .iter()
                .find(|l| l.trim_start().starts_with(label))
                .map(|l| l.split_whitespace().rev().take(2).collect::<Vec<_>>())
                .unwrap_or_else(|| panic!("no {label:?} in\n{t}"))
        };
        assert_eq!(row("pages copied VRAM -> RAM"), ["1024", "0"]);
        assert_eq!(row("pages still in VRAM"), ["0/1024", "1024/1024"]);
        assert_eq!(row("migrations per page"), ["2", "0"]);
        assert!(t.contains("300.0 us"), "{t}");
        assert!(t.contains("480.0 ms"), "{t}");
        // Both MiB rows: 0.0 against 4.0 and 8.0.
        let mib: Vec<&&str> = lines.iter().filter(|l| l.contains("MiB through")).collect();
        assert!(mib[0].ends_with("0.0              4.0"), "{t}");
        assert!(mib[1].ends_with("0.0              8.0"), "{t}");
        // Every time is labelled as emulated wall time.
        assert!(lines
            .iter()
            .filter(|l| l.ends_with(" ms"))
            .all(|l| l.contains("QEMU TCG")));
        // Columns line up: every value row is as wide as the heading row.
        let width = lines[0].len();
        assert!(
            lines
                .iter()
                .filter(|l| l.ends_with(" ms") || l.contains('/'))
                .all(|l| l.len() == width),
            "{t}"
        );
    }

    #[test]
    fn sentence_says_what_the_times_measure() {
        let (fa, _, _, pm) = measured();
        let s = tcg_sentence(&fa, &pm);
        assert!(
            s.lines().all(|l| l.starts_with("   ") && l.len() <= 78),
            "{s}"
        );
        let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains("dominated by emulation"));
        assert!(flat.contains("none of the 1024 pages crosses system RAM"));
        assert!(flat.contains("copies 0 pages instead of 2048 (2 per page)"));
        assert!(flat.contains(PROJECTION_DOC));
    }

    #[test]
    fn wraps_words() {
        assert_eq!(wrap("a bb ccc dddd", "  ", 8), "  a bb\n  ccc\n  dddd");
        assert_eq!(wrap("", "  ", 8), "  ");
        assert_eq!(wrap("overlongword x", "", 4), "overlongword\nx");
    }
}
