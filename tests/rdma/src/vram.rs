// SPDX-License-Identifier: GPL-2.0
//! An rvram GPU as the test sees it: its `/dev/rvramN` character device,
//! which speaks the `lib/test_hmm` dmirror ioctl ABI, and its debugfs
//! counters.
//!
//! VRAM mode moves the target into the GPU's VRAM (device-private pages)
//! with `HMM_DMIRROR_MIGRATE_TO_DEV`, reads the counters around the RDMA
//! operations of a case, and looks where the target's pages are with
//! `HMM_DMIRROR_SNAPSHOT`, which does not fault them. None of this touches
//! the target with the CPU: a CPU access to a page in VRAM would migrate it
//! back to RAM.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::config::PAGE_SIZE;

/// `struct hmm_dmirror_cmd` of `lib/test_hmm_uapi.h`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DmirrorCmd {
    /// Start of the range, page aligned.
    pub addr: u64,
    /// User buffer: page contents (MIGRATE_TO_DEV) or one byte per page
    /// (SNAPSHOT).
    pub ptr: u64,
    /// Pages in the range.
    pub npages: u64,
    /// Pages the command handled, on return.
    pub cpages: u64,
    /// Device faults, on return.
    pub faults: u64,
}

/// `_IOWR(ty, nr, size)` with the generic Linux ioctl number encoding:
/// direction (read | write) in bits 30-31, size in bits 16-29, type in bits
/// 8-15, number in bits 0-7.
pub const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
    const IOC_READ_WRITE: u32 = 3;
    (IOC_READ_WRITE << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32
}

/// `HMM_DMIRROR_READ`: the device reads `[addr, addr + npages pages)`
/// (faulting it into its page table) and copies it to `ptr`.
pub const READ: u32 = iowr(b'H', 0x00, std::mem::size_of::<DmirrorCmd>());
/// `HMM_DMIRROR_FLAGS`: sets the file's flags to `npages`.
pub const FLAGS: u32 = iowr(b'H', 0x08, std::mem::size_of::<DmirrorCmd>());
/// rvram's own `HMM_DMIRROR_FLAGS` bit: this GPU's READ and WRITE fault as
/// a DMA alias client, so pages in another GPU's VRAM are accessed through
/// their P2P alias when P2P is possible, instead of migrating.
pub const FLAG_ALIAS_DMA: u64 = 1 << 16;
/// `HMM_DMIRROR_MIGRATE_TO_DEV`: moves `[addr, addr + npages pages)` into
/// VRAM and copies it, as the device reads it back, to `ptr`.
pub const MIGRATE_TO_DEV: u32 = iowr(b'H', 0x02, std::mem::size_of::<DmirrorCmd>());
/// `HMM_DMIRROR_MIGRATE_TO_SYS`: moves the range back to system RAM.
pub const MIGRATE_TO_SYS: u32 = iowr(b'H', 0x03, std::mem::size_of::<DmirrorCmd>());
/// `HMM_DMIRROR_SNAPSHOT`: one byte per page of the range into `ptr`.
pub const SNAPSHOT: u32 = iowr(b'H', 0x04, std::mem::size_of::<DmirrorCmd>());

/// SNAPSHOT byte, high nibble: a device-private page of this GPU, i.e.
/// resident in its VRAM.
pub const SNAP_DEV_PRIVATE_LOCAL: u8 = 0x20;
/// SNAPSHOT byte, high nibble: a device-private page of another GPU.
pub const SNAP_DEV_PRIVATE_REMOTE: u8 = 0x30;
/// SNAPSHOT byte, high nibble: a device-coherent page of this GPU, i.e.
/// resident in its VRAM (rvram's `coherent` module parameter).
pub const SNAP_DEV_COHERENT_LOCAL: u8 = 0x40;

/// SNAPSHOT byte flag: the page is mapped by a PMD (part of a 2 MiB folio).
pub const SNAP_PMD: u8 = 0x04;

/// Whether a SNAPSHOT byte says the page is in this GPU's VRAM, as a
/// device-private or a device-coherent page.
pub fn in_vram(snapshot_byte: u8) -> bool {
    matches!(
        snapshot_byte & 0xf0,
        SNAP_DEV_PRIVATE_LOCAL | SNAP_DEV_COHERENT_LOCAL
    )
}

/// Pages MIGRATE_TO_DEV moves per command: 2 MiB, so the read-back buffer
/// stays small.
const MIGRATE_CHUNK_PAGES: usize = 512;

/// Pages SNAPSHOT looks at per command (rvram refuses more than 1 GiB).
const SNAPSHOT_CHUNK_PAGES: usize = 65536;

/// rvram's counters of one GPU, from `/sys/kernel/debug/rvram/rvramN/stats`.
///
/// `migrated_to_*` count folios (a 2 MiB folio counts once), `pages_to_*`
/// count the 4 KiB pages those folios hold.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Folios moved from system RAM into VRAM.
    pub migrated_to_vram: u64,
    /// Folios moved from VRAM back to system RAM by CPU (or non-alias
    /// device) faults.
    pub migrated_to_ram: u64,
    /// Faults on VRAM pages served by migration to RAM (`migrate_to_ram`
    /// calls: the CPU's, or a device's that is not using aliases).
    pub cpu_faults: u64,
    /// P2P aliases handed out for pages in VRAM (one per page-table entry
    /// HMM resolves: a page or a PMD).
    pub alias_grants: u64,
    /// Pages this GPU read or wrote through another GPU's alias.
    pub alias_accesses: u64,
    /// Pages of VRAM in use.
    pub pages_resident: u64,
    /// Pages copied into VRAM by migration.
    pub pages_to_vram: u64,
    /// Pages copied out of VRAM into system RAM, by any path (faults,
    /// `MIGRATE_TO_SYS`, eviction).
    pub pages_to_ram: u64,
    /// Nanoseconds spent in rvram's `migrate_to_ram`: the kernel's own
    /// accounting of what faults by migration cost.
    pub fault_ns: u64,
}

/// The stats file's line names, in [`Stats`] field order.
const STATS_NAMES: [&str; 9] = [
    "migrated_to_vram",
    "migrated_to_ram",
    "cpu_faults",
    "alias_grants",
    "alias_accesses",
    "pages_resident",
    "pages_to_vram",
    "pages_to_ram",
    "fault_ns",
];

impl Stats {
    /// Parses the `name value` lines of the stats file. Every field of
    /// [`Stats`] must be there; other lines are ignored.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut fields: [Option<u64>; STATS_NAMES.len()] = [None; STATS_NAMES.len()];
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(name), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            if let Some(i) = STATS_NAMES.iter().position(|n| *n == name) {
                fields[i] = Some(
                    value
                        .parse()
                        .map_err(|_| format!("{name}: invalid value {value:?}"))?,
                );
            }
        }
        let mut values = [0; STATS_NAMES.len()];
        for ((value, parsed), name) in values.iter_mut().zip(fields).zip(STATS_NAMES) {
            *value = parsed
                .ok_or_else(|| format!("no {name} line (an rvram module older than this test?)"))?;
        }
        let [migrated_to_vram, migrated_to_ram, cpu_faults, alias_grants, alias_accesses, pages_resident, pages_to_vram, pages_to_ram, fault_ns] =
            values;
        Ok(Self {
            migrated_to_vram,
            migrated_to_ram,
            cpu_faults,
            alias_grants,
            alias_accesses,
            pages_resident,
            pages_to_vram,
            pages_to_ram,
            fault_ns,
        })
    }

    /// The change from `before` to `self`, per counter.
    pub fn since(&self, before: &Stats) -> StatsDelta {
        let d = |after: u64, before: u64| after.wrapping_sub(before) as i64;
        StatsDelta {
            migrated_to_vram: d(self.migrated_to_vram, before.migrated_to_vram),
            migrated_to_ram: d(self.migrated_to_ram, before.migrated_to_ram),
            cpu_faults: d(self.cpu_faults, before.cpu_faults),
            alias_grants: d(self.alias_grants, before.alias_grants),
            alias_accesses: d(self.alias_accesses, before.alias_accesses),
            pages_resident: d(self.pages_resident, before.pages_resident),
            pages_to_vram: d(self.pages_to_vram, before.pages_to_vram),
            pages_to_ram: d(self.pages_to_ram, before.pages_to_ram),
            fault_ns: d(self.fault_ns, before.fault_ns),
        }
    }
}

/// How [`Stats`] changed over a window.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StatsDelta {
    /// Change of [`Stats::migrated_to_vram`] (folios).
    pub migrated_to_vram: i64,
    /// Change of [`Stats::migrated_to_ram`] (folios).
    pub migrated_to_ram: i64,
    /// Change of [`Stats::cpu_faults`].
    pub cpu_faults: i64,
    /// Change of [`Stats::alias_grants`].
    pub alias_grants: i64,
    /// Change of [`Stats::alias_accesses`].
    pub alias_accesses: i64,
    /// Change of [`Stats::pages_resident`].
    pub pages_resident: i64,
    /// Change of [`Stats::pages_to_vram`].
    pub pages_to_vram: i64,
    /// Change of [`Stats::pages_to_ram`].
    pub pages_to_ram: i64,
    /// Change of [`Stats::fault_ns`].
    pub fault_ns: i64,
}

impl StatsDelta {
    /// Pages copied between VRAM and system RAM, either way: each is a
    /// page's worth of data that crossed system RAM.
    pub fn pages_copied(&self) -> i64 {
        self.pages_to_ram + self.pages_to_vram
    }

    /// [`pages_copied`](Self::pages_copied) in bytes.
    pub fn bytes_copied(&self) -> i64 {
        self.pages_copied() * PAGE_SIZE as i64
    }

    /// The kernel's mean time per fault served by migration, in
    /// microseconds (`fault_ns / cpu_faults`); `None` without faults.
    pub fn us_per_fault(&self) -> Option<f64> {
        (self.cpu_faults > 0).then(|| self.fault_ns as f64 / self.cpu_faults as f64 / 1e3)
    }

    /// Every counter that moved, for logs: e.g. `pages_to_ram +1024,
    /// migrated_to_ram +1024, cpu_faults +1024, fault_ns +5000000`.
    pub fn detail(&self) -> String {
        let fields = [
            ("pages_to_ram", self.pages_to_ram),
            ("pages_to_vram", self.pages_to_vram),
            ("migrated_to_ram", self.migrated_to_ram),
            ("migrated_to_vram", self.migrated_to_vram),
            ("cpu_faults", self.cpu_faults),
            ("fault_ns", self.fault_ns),
            ("alias_grants", self.alias_grants),
            ("alias_accesses", self.alias_accesses),
            ("pages_resident", self.pages_resident),
        ];
        let moved: Vec<String> = fields
            .iter()
            .filter(|(_, v)| *v != 0)
            .map(|(name, v)| format!("{name} {v:+}"))
            .collect();
        if moved.is_empty() {
            "no counter changed".to_owned()
        } else {
            moved.join(", ")
        }
    }
}

impl std::ops::AddAssign for StatsDelta {
    fn add_assign(&mut self, other: Self) {
        self.migrated_to_vram += other.migrated_to_vram;
        self.migrated_to_ram += other.migrated_to_ram;
        self.cpu_faults += other.cpu_faults;
        self.alias_grants += other.alias_grants;
        self.alias_accesses += other.alias_accesses;
        self.pages_resident += other.pages_resident;
        self.pages_to_vram += other.pages_to_vram;
        self.pages_to_ram += other.pages_to_ram;
        self.fault_ns += other.fault_ns;
    }
}

impl fmt::Display for StatsDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "migrated_to_ram {:+}, alias_grants {:+}",
            self.migrated_to_ram, self.alias_grants
        )
    }
}

/// The debugfs stats file of the GPU behind `device` (`.../rvramN`):
/// `/sys/kernel/debug/rvram/rvramN/stats`.
pub fn stats_path(device: &Path) -> Result<PathBuf, String> {
    let name = device
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| {
            n.strip_prefix("rvram")
                .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
        })
        .ok_or_else(|| {
            format!(
                "{}: not an rvram device (expected /dev/rvramN)",
                device.display()
            )
        })?;
    Ok(Path::new("/sys/kernel/debug/rvram")
        .join(name)
        .join("stats"))
}

/// Pages of `len` bytes, rounded up.
pub fn pages(len: usize) -> usize {
    len.div_ceil(PAGE_SIZE)
}

/// The pages `[first, last]` a byte range of `len > 0` bytes at `offset`
/// lies on.
pub fn page_span(offset: usize, len: usize) -> std::ops::RangeInclusive<usize> {
    offset / PAGE_SIZE..=(offset + len.max(1) - 1) / PAGE_SIZE
}

/// An open rvram GPU.
#[derive(Debug)]
pub struct Vram {
    file: File,
    device: PathBuf,
    stats: PathBuf,
    readback: Vec<u8>,
}

impl Vram {
    /// Opens `device` (`/dev/rvramN`); the file mirrors this process's
    /// address space. Checks the stats file can be read.
    pub fn open(device: &Path) -> Result<Self, String> {
        let stats = stats_path(device)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(device)
            .map_err(|err| format!("open {}: {err}", device.display()))?;
        let vram = Self {
            file,
            device: device.to_owned(),
            stats,
            readback: Vec::new(),
        };
        vram.stats()?;
        Ok(vram)
    }

    /// The character device.
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// The debugfs stats file.
    pub fn stats_file(&self) -> &Path {
        &self.stats
    }

    /// Reads the GPU's counters.
    pub fn stats(&self) -> Result<Stats, String> {
        let text = std::fs::read_to_string(&self.stats).map_err(|err| {
            format!(
                "read {}: {err} (is debugfs mounted, and are we root?)",
                self.stats.display()
            )
        })?;
        Stats::parse(&text).map_err(|err| format!("{}: {err}", self.stats.display()))
    }

    fn ioctl(&self, name: &str, request: u32, cmd: &mut DmirrorCmd) -> io::Result<()> {
        // SAFETY: `cmd` is a valid, exclusively borrowed `hmm_dmirror_cmd`
        // the kernel reads and writes back; the buffer it points to was
        // sized by the caller for this request (see the callers).
        let ret =
            unsafe { libc::ioctl(self.file.as_raw_fd(), request as _, cmd as *mut DmirrorCmd) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            Err(io::Error::new(err.kind(), format!("{name}: {err}")))
        } else {
            Ok(())
        }
    }

    /// Moves every page of `target` into VRAM, 2 MiB at a time, checking
    /// each command migrated all its pages, and hands each chunk's device
    /// read-back to `readback(offset in target, bytes)`.
    ///
    /// `target` must start page aligned and be whole pages of anonymous
    /// memory. Its content does not change; only where it lives.
    pub fn migrate_to_dev(
        &mut self,
        target: &[u8],
        readback: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<(), String> {
        let addr = target.as_ptr() as usize;
        if !addr.is_multiple_of(PAGE_SIZE)
            || !target.len().is_multiple_of(PAGE_SIZE)
            || target.is_empty()
        {
            return Err(format!(
                "MIGRATE_TO_DEV needs whole pages: target of {} bytes at {addr:#x}",
                target.len()
            ));
        }
        let mut buf = std::mem::take(&mut self.readback);
        buf.resize(MIGRATE_CHUNK_PAGES * PAGE_SIZE, 0);
        let mut result = Ok(());
        for offset in (0..target.len()).step_by(MIGRATE_CHUNK_PAGES * PAGE_SIZE) {
            let npages = pages(target.len() - offset).min(MIGRATE_CHUNK_PAGES);
            let mut cmd = DmirrorCmd {
                addr: (addr + offset) as u64,
                ptr: buf.as_mut_ptr() as u64,
                npages: npages as u64,
                ..DmirrorCmd::default()
            };
            // `buf` holds MIGRATE_CHUNK_PAGES >= npages pages.
            if let Err(err) = self.ioctl("HMM_DMIRROR_MIGRATE_TO_DEV", MIGRATE_TO_DEV, &mut cmd) {
                result = Err(format!(
                    "{err} ({npages} pages at target offset {offset:#x})"
                ));
                break;
            }
            if cmd.cpages != cmd.npages {
                result = Err(format!(
                    "HMM_DMIRROR_MIGRATE_TO_DEV migrated {} of {npages} pages at target offset {offset:#x}",
                    cmd.cpages
                ));
                break;
            }
            readback(offset, &buf[..npages * PAGE_SIZE]);
        }
        self.readback = buf;
        result
    }

    /// Where each page of `target` is, one SNAPSHOT byte per page, without
    /// faulting any. `target` must start page aligned.
    pub fn snapshot(&self, target: &[u8]) -> Result<Vec<u8>, String> {
        let addr = target.as_ptr() as usize;
        if !addr.is_multiple_of(PAGE_SIZE) || target.is_empty() {
            return Err(format!(
                "SNAPSHOT needs a page-aligned range: {} bytes at {addr:#x}",
                target.len()
            ));
        }
        let mut out = vec![0u8; pages(target.len())];
        for (i, chunk) in out.chunks_mut(SNAPSHOT_CHUNK_PAGES).enumerate() {
            let first = i * SNAPSHOT_CHUNK_PAGES;
            let mut cmd = DmirrorCmd {
                addr: (addr + first * PAGE_SIZE) as u64,
                ptr: chunk.as_mut_ptr() as u64,
                npages: chunk.len() as u64,
                ..DmirrorCmd::default()
            };
            // `chunk` holds one byte per page of the command.
            self.ioctl("HMM_DMIRROR_SNAPSHOT", SNAPSHOT, &mut cmd)
                .map_err(|err| format!("{err} ({} pages from page {first})", chunk.len()))?;
        }
        Ok(out)
    }

    /// `HMM_DMIRROR_READ`: this GPU reads every page of `target` into
    /// `out` (of the same length), 2 MiB per command. The GPU faults the
    /// pages into its page table: pages in another GPU's VRAM migrate to
    /// RAM, or, after [`set_flags`](Self::set_flags) with
    /// [`FLAG_ALIAS_DMA`], are read through their P2P alias. `target` must
    /// start page aligned and be whole pages.
    pub fn read_into(&self, target: &[u8], out: &mut [u8]) -> Result<(), String> {
        let addr = target.as_ptr() as usize;
        if !addr.is_multiple_of(PAGE_SIZE)
            || !target.len().is_multiple_of(PAGE_SIZE)
            || target.is_empty()
            || out.len() != target.len()
        {
            return Err(format!(
                "HMM_DMIRROR_READ needs whole pages and an output of the same size: \
                 {} bytes at {addr:#x} into {} bytes",
                target.len(),
                out.len()
            ));
        }
        let chunk = MIGRATE_CHUNK_PAGES * PAGE_SIZE;
        for (i, dst) in out.chunks_mut(chunk).enumerate() {
            let offset = i * chunk;
            let npages = pages(dst.len());
            let mut cmd = DmirrorCmd {
                addr: (addr + offset) as u64,
                ptr: dst.as_mut_ptr() as u64,
                npages: npages as u64,
                ..DmirrorCmd::default()
            };
            // `dst` holds exactly `npages` pages.
            self.ioctl("HMM_DMIRROR_READ", READ, &mut cmd)
                .map_err(|err| format!("{err} ({npages} pages at target offset {offset:#x})"))?;
        }
        Ok(())
    }

    /// Migrates `npages` pages at `addr` into VRAM (`to_dev`) or back to
    /// system RAM, by address: the range need not be mapped, nor memory any
    /// Rust reference covers; the kernel checks it and only this file's own
    /// buffer receives the device's read-back. Returns the pages migrated.
    pub fn migrate_range(&mut self, to_dev: bool, addr: usize, npages: usize) -> io::Result<u64> {
        let npages = npages.min(MIGRATE_CHUNK_PAGES);
        self.readback.resize(MIGRATE_CHUNK_PAGES * PAGE_SIZE, 0);
        let mut cmd = DmirrorCmd {
            addr: addr as u64,
            ptr: self.readback.as_mut_ptr() as u64,
            npages: npages as u64,
            ..DmirrorCmd::default()
        };
        // `readback` holds MIGRATE_CHUNK_PAGES >= npages pages.
        if to_dev {
            self.ioctl("HMM_DMIRROR_MIGRATE_TO_DEV", MIGRATE_TO_DEV, &mut cmd)?;
        } else {
            self.ioctl("HMM_DMIRROR_MIGRATE_TO_SYS", MIGRATE_TO_SYS, &mut cmd)?;
        }
        Ok(cmd.cpages)
    }

    /// `HMM_DMIRROR_FLAGS`: sets this file's flags (not 0: the ABI refuses
    /// an empty command; open the device again for a file without flags).
    pub fn set_flags(&self, flags: u64) -> Result<(), String> {
        let mut cmd = DmirrorCmd {
            npages: flags,
            ..DmirrorCmd::default()
        };
        // No buffer: FLAGS reads only `npages`.
        self.ioctl("HMM_DMIRROR_FLAGS", FLAGS, &mut cmd)
            .map_err(|err| format!("{err} (flags {flags:#x})"))
    }
}

/// Counts the SNAPSHOT bytes that say "in this GPU's VRAM".
pub fn resident(snapshot: &[u8]) -> usize {
    snapshot.iter().filter(|&&b| in_vram(b)).count()
}

/// Counts the SNAPSHOT bytes that say "in this GPU's VRAM, in a 2 MiB
/// folio mapped by a PMD".
pub fn resident_huge(snapshot: &[u8]) -> usize {
    snapshot
        .iter()
        .filter(|&&b| in_vram(b) && b & SNAP_PMD != 0)
        .count()
}

/// rvram's debugfs directory: an `rvramN` directory for each bound GPU.
pub const DEBUGFS: &str = "/sys/kernel/debug/rvram";

/// The P2P alias switches of the device-private GPUs bound now,
/// `DEBUGFS/rvramN/p2p_alias`, in GPU order (device-coherent GPUs have
/// none). On (`Y`, the default), rvram gives its pages' P2P aliases and
/// the NIC maps an ODP MR's pages in VRAM through them; off (`N`), it
/// refuses them and ODP faults migrate the pages to system RAM, as Linux
/// 7.3 does.
pub fn p2p_alias_switches() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(DEBUGFS) else {
        return Vec::new();
    };
    let mut switches: Vec<(u32, PathBuf)> = dir
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let index = gpu_index(entry.file_name().to_str()?)?;
            let switch = entry.path().join("p2p_alias");
            switch.exists().then_some((index, switch))
        })
        .collect();
    switches.sort();
    switches.into_iter().map(|(_, switch)| switch).collect()
}

/// N of a debugfs directory `rvramN`.
fn gpu_index(name: &str) -> Option<u32> {
    name.strip_prefix("rvram")
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))?
        .parse()
        .ok()
}

/// What the P2P alias switches read, for the log: `rvram0 Y, rvram1 Y`,
/// or `none` if no GPU has one.
pub fn p2p_alias_state() -> String {
    let state: Vec<String> = p2p_alias_switches()
        .iter()
        .map(|switch| {
            let gpu = switch
                .parent()
                .and_then(Path::file_name)
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            let value = std::fs::read_to_string(switch)
                .map_or_else(|err| format!("({err})"), |v| v.trim().to_owned());
            format!("{gpu} {value}")
        })
        .collect();
    if state.is_empty() {
        "none".to_owned()
    } else {
        state.join(", ")
    }
}

/// Whether a debugfs bool's text (`Y`, `N`; also `1`, `0`) is on.
pub fn bool_is_on(text: &str) -> Option<bool> {
    match text.trim() {
        "Y" | "y" | "1" => Some(true),
        "N" | "n" | "0" => Some(false),
        _ => None,
    }
}

/// Reads the P2P alias switch at `path`.
fn read_switch(path: &Path) -> Result<bool, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("read {}: {err} (are we root?)", path.display()))?;
    bool_is_on(&text).ok_or_else(|| format!("{}: unexpected value {text:?}", path.display()))
}

/// The text that sets a switch.
fn switch_text(on: bool) -> &'static str {
    if on {
        "Y"
    } else {
        "N"
    }
}

/// The P2P alias switch of every device-private GPU
/// ([`p2p_alias_switches`]) for the life of the value: it remembers what
/// each read when opened and writes that back when dropped (also when a
/// measurement fails part way, or panics).
#[derive(Debug)]
pub struct AliasSwitch {
    found: Vec<(PathBuf, bool)>,
}

impl AliasSwitch {
    /// Reads every switch; fails if no GPU has one.
    pub fn open() -> Result<Self, String> {
        let switches = p2p_alias_switches();
        if switches.is_empty() {
            return Err(format!(
                "no {DEBUGFS}/rvramN/p2p_alias: no device-private rvram GPU bound, or \
                 debugfs not mounted"
            ));
        }
        let found = switches
            .into_iter()
            .map(|switch| read_switch(&switch).map(|on| (switch, on)))
            .collect::<Result<_, String>>()?;
        Ok(Self { found })
    }

    /// Sets every switch, each read back: `true` for aliases (the
    /// series), `false` for migration (Linux 7.3 as released). It applies
    /// to ODP faults from then on.
    pub fn set(&self, on: bool) -> Result<(), String> {
        let text = switch_text(on);
        for (switch, _) in &self.found {
            std::fs::write(switch, text).map_err(|err| {
                format!("write {text} to {}: {err} (are we root?)", switch.display())
            })?;
            let now = read_switch(switch)?;
            if now != on {
                return Err(format!(
                    "{} reads {} after writing {text}",
                    switch.display(),
                    switch_text(now)
                ));
            }
        }
        Ok(())
    }
}

impl Drop for AliasSwitch {
    fn drop(&mut self) {
        // Nothing to report to from here; the next reader sees the values.
        for (switch, on) in &self.found {
            let _ = std::fs::write(switch, switch_text(*on));
        }
    }
}

#[cfg(test)]
mod tests;
