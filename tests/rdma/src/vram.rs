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

/// Whether a SNAPSHOT byte says the page is in this GPU's VRAM.
pub fn in_vram(snapshot_byte: u8) -> bool {
    snapshot_byte & 0xf0 == SNAP_DEV_PRIVATE_LOCAL
}

/// Pages MIGRATE_TO_DEV moves per command: 2 MiB, so the read-back buffer
/// stays small.
const MIGRATE_CHUNK_PAGES: usize = 512;

/// Pages SNAPSHOT looks at per command (rvram refuses more than 1 GiB).
const SNAPSHOT_CHUNK_PAGES: usize = 65536;

/// rvram's counters of one GPU, from `/sys/kernel/debug/rvram/rvramN/stats`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Pages moved from system RAM into VRAM.
    pub migrated_to_vram: u64,
    /// Pages moved from VRAM back to system RAM by CPU (or non-alias
    /// device) faults.
    pub migrated_to_ram: u64,
    /// P2P aliases handed out for pages in VRAM (one per page-table entry
    /// HMM resolves).
    pub alias_grants: u64,
    /// Pages of VRAM in use.
    pub pages_resident: u64,
}

impl Stats {
    /// Parses the `name value` lines of the stats file. Every field of
    /// [`Stats`] must be there; other lines are ignored.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut fields: [(&str, Option<u64>); 4] = [
            ("migrated_to_vram", None),
            ("migrated_to_ram", None),
            ("alias_grants", None),
            ("pages_resident", None),
        ];
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(name), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            if let Some(field) = fields.iter_mut().find(|(n, _)| *n == name) {
                field.1 = Some(
                    value
                        .parse()
                        .map_err(|_| format!("{name}: invalid value {value:?}"))?,
                );
            }
        }
        let mut values = [0; 4];
        for (value, (name, parsed)) in values.iter_mut().zip(fields) {
            *value = parsed.ok_or_else(|| format!("no {name} line"))?;
        }
        let [migrated_to_vram, migrated_to_ram, alias_grants, pages_resident] = values;
        Ok(Self {
            migrated_to_vram,
            migrated_to_ram,
            alias_grants,
            pages_resident,
        })
    }

    /// The change from `before` to `self`, per counter.
    pub fn since(&self, before: &Stats) -> StatsDelta {
        let d = |after: u64, before: u64| after.wrapping_sub(before) as i64;
        StatsDelta {
            migrated_to_vram: d(self.migrated_to_vram, before.migrated_to_vram),
            migrated_to_ram: d(self.migrated_to_ram, before.migrated_to_ram),
            alias_grants: d(self.alias_grants, before.alias_grants),
            pages_resident: d(self.pages_resident, before.pages_resident),
        }
    }
}

/// How [`Stats`] changed over a window.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StatsDelta {
    /// Change of [`Stats::migrated_to_vram`].
    pub migrated_to_vram: i64,
    /// Change of [`Stats::migrated_to_ram`].
    pub migrated_to_ram: i64,
    /// Change of [`Stats::alias_grants`].
    pub alias_grants: i64,
    /// Change of [`Stats::pages_resident`].
    pub pages_resident: i64,
}

impl std::ops::AddAssign for StatsDelta {
    fn add_assign(&mut self, other: Self) {
        self.migrated_to_vram += other.migrated_to_vram;
        self.migrated_to_ram += other.migrated_to_ram;
        self.alias_grants += other.alias_grants;
        self.pages_resident += other.pages_resident;
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
}

/// Counts the SNAPSHOT bytes that say "in this GPU's VRAM".
pub fn resident(snapshot: &[u8]) -> usize {
    snapshot.iter().filter(|&&b| in_vram(b)).count()
}

/// The value of `ib_core`'s `odp_p2p_alias` module parameter, if the
/// running kernel has it.
pub fn odp_p2p_alias_param() -> Option<String> {
    std::fs::read_to_string("/sys/module/ib_core/parameters/odp_p2p_alias")
        .ok()
        .map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
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
                    alias_grants 17\nalias_accesses 0\n";
        let s = Stats::parse(text).unwrap();
        assert_eq!(
            s,
            Stats {
                migrated_to_vram: 4096,
                migrated_to_ram: 3072,
                alias_grants: 17,
                pages_resident: 1024,
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
        let err = Stats::parse(&text.replace("alias_grants 17", "alias_grants x")).unwrap_err();
        assert!(err.contains("alias_grants"), "{err}");
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
}
