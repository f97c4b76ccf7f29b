// SPDX-License-Identifier: GPL-2.0
//! Unbinding the GPU while the NIC reads and writes its VRAM through an ODP
//! MR.
//!
//! The target is moved into VRAM, registered with ODP and read once by the
//! NIC (with the GPU's `p2p_alias` switch on, rxe maps the VRAM pages
//! through their P2P aliases at registration). Then a second thread unbinds
//! the GPU through sysfs while this one keeps going in short rounds: an
//! RDMA WRITE of one page with new data, then an RDMA READ of another page,
//! checked against what the NIC wrote so far; after the unbind, a READ of
//! the whole target is checked too. Each round also queues an
//! asynchronous prefetch of the whole MR (`ibv_advise_mr()` without
//! `FLUSH`), whose work runs in the kernel while the unbind evicts the
//! pages under it: it must be accepted (0) before, while and after.
//!
//! Before the unbind, with the pages mapped through aliases, the GPU's
//! `p2p_alias` switch goes off: rounds without prefetches go on right (the
//! NIC's mappings still reach the pages, which have not moved), no alias
//! is handed out and nothing migrates; the next fault, a synchronous
//! prefetch of the whole MR, migrates every page to RAM instead. The
//! switch goes back on and the target back into VRAM before the unbind.
//!
//! rvram evacuates VRAM to system RAM before its device goes away, and each
//! page's migration invalidates the NIC's mapping of it first, so the NIC
//! faults again and finds the page in RAM. Every operation must therefore
//! complete successfully with the right data: before, while and after the
//! GPU goes away. No stale alias may be used: a READ through a revoked alias
//! would return whatever the BAR holds after the unbind, not the data.
//!
//! Afterwards the CPU reads every byte, the still-open dmirror file reports
//! `ENODEV`, and the GPU is bound again for whatever runs next.
//!
//! With `--rmmod`, the process closes its dmirror file after the first
//! steps, so that only its NIC's mappings and the pages in its address
//! space hold on to the GPU, and the second thread removes the whole module
//! (`rmmod rvram`) instead: the same rounds and asynchronous prefetches
//! run across the unload, which unbinds the GPU and evicts its pages while
//! the prefetches' work faults them; then the module must be gone and the
//! CPU must read every byte.
//!
//! rvram registers two PCI drivers, `rvram` (device-private VRAM) and
//! `rvram-coherent`, each binding only the devices assigned to it through
//! `driver_override`: the GPU is unbound through its own `driver/unbind`
//! and bound again through the `bind` file of the driver it is assigned
//! to.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::advise;
use crate::config::{Config, Expect, PathMtu, VramMode, PAGE_SIZE};
use crate::mmap::Mmap;
use crate::pattern::{self, Check};
use crate::report::TestResult;
use crate::verbs::{self, Device, Endpoints, OpError, Region, SendOp, Side};
use crate::vram::{self, Stats, Vram};

/// Pages of the target.
const PAGES: usize = 64;
/// Rounds before the unbind starts, so that the NIC has aliases mapped.
const ROUNDS_BEFORE: usize = 2;
/// Rounds after the unbind finished: the NIC works on RAM pages.
const ROUNDS_AFTER: usize = 4;
/// Rounds with the `p2p_alias` switch off.
const ROUNDS_OFF: usize = 8;
/// Upper bound on rounds, should the unbind never finish.
const MAX_ROUNDS: usize = 2000;
/// The data before any WRITE.
const SEED_INITIAL: u32 = 0x0b1d_0b1d;
/// `ENODEV`, as the dmirror ioctls of an unbound GPU report it.
const ENODEV: i32 = 19;
/// The name of the first TAP point, whose failure ends the case.
const SETUP: &str = "target in VRAM, registered, read by the NIC";
/// The sysfs directory of the PCI devices.
const DEVICES: &str = "/sys/bus/pci/devices";
/// The sysfs directory of the PCI drivers.
const DRIVERS: &str = "/sys/bus/pci/drivers";

/// What the NIC last wrote into each page of the target.
struct Model {
    seeds: Vec<u32>,
}

impl Model {
    fn new() -> Self {
        Self {
            seeds: vec![SEED_INITIAL; PAGES],
        }
    }

    /// The seed for round `round`'s WRITE; never the initial one.
    fn seed(round: usize) -> u32 {
        0x5eed_0000 ^ (round as u32).wrapping_mul(0x9e37_79b9) ^ 1
    }

    /// Checks `bytes`, the whole target as read by the NIC or the CPU.
    fn check(&self, bytes: &[u8]) -> Check {
        let mut check = Check::default();
        for (page, seed) in self.seeds.iter().enumerate() {
            let at = page * PAGE_SIZE;
            check.merge(pattern::check(&bytes[at..at + PAGE_SIZE], at, *seed));
        }
        check
    }
}

/// Runs the case at `mtu` against the GPU `/dev/rvramN` at PCI address
/// `gpu`; one TAP point per step.
pub fn run_unbind(cfg: &Config, mtu: PathMtu, vram: &VramMode, gpu: &str) -> Vec<TestResult> {
    let mut results = Vec::new();
    let mut point = |name: &str, r: Result<Vec<String>, String>| {
        let result = TestResult::invalidation(format!("mtu {mtu}: unbind: {name}"), mtu, r);
        let passed = result.passed;
        results.push(result);
        passed
    };
    let len = PAGES * PAGE_SIZE;
    // The local buffer has one more page: the sink of single-page READs.
    let maps = Mmap::anonymous(len)
        .and_then(|t| Ok((t, Mmap::anonymous(len + PAGE_SIZE)?)))
        .map_err(|e| format!("map target and local buffers: {e}"));
    let (mut target, mut local) = match maps {
        Ok(m) => m,
        Err(why) => {
            point(SETUP, Err(why));
            return results;
        }
    };
    let device = vram.device.as_path();
    let setup = (mtu, device, vram.expect);
    let (mut case, before) = match Case::new(cfg, setup, &mut target, &mut local) {
        Ok(c) => c,
        Err(why) => {
            point(SETUP, Err(why));
            return results;
        }
    };
    if !point(SETUP, case.first_read(before)) {
        return results;
    }
    if vram.expect == Expect::Alias
        && !point(
            "p2p_alias switched off under live alias mappings: rounds stay right, no alias handed out, the next faults migrate",
            case.alias_switched_off(),
        )
    {
        return results;
    }
    if cfg.rmmod {
        // Nothing of the process holds the module but its NIC's mappings.
        case.vram = None;
        let traffic = case.rounds_across_unbind(&Removal::Rmmod);
        let removed = traffic.as_ref().is_ok_and(|t| t.unbound);
        point(
            "RDMA WRITE and READ rounds and asynchronous prefetches while rmmod unbinds the GPU: every one completes, every byte right",
            traffic.map(|t| t.notes),
        );
        if removed {
            point("the module is gone", module_gone());
            point("the CPU reads every byte the NIC wrote", case.cpu_check());
        }
        return results;
    }
    let traffic = case.rounds_across_unbind(&Removal::Unbind(gpu.to_owned()));
    let unbound = traffic.as_ref().map_or(true, |t| t.unbound);
    point(
        "RDMA WRITE and READ rounds while the GPU unbinds: every one completes, every byte right",
        traffic.map(|t| t.notes),
    );
    if unbound {
        point(
            "the open dmirror file reports ENODEV after the unbind",
            case.enodev(),
        );
        point("the CPU reads every byte the NIC wrote", case.cpu_check());
        drop(case);
        point("bind the GPU again", bind(gpu, device));
    }
    results
}

/// How the GPU goes away under the traffic.
enum Removal {
    /// Through its driver's `unbind` file in sysfs.
    Unbind(String),
    /// With the whole module (`rmmod rvram`), which unbinds every GPU.
    Rmmod,
}

impl Removal {
    fn run(&self) -> Result<(), String> {
        match self {
            Self::Unbind(gpu) => unbind_gpu(gpu),
            Self::Rmmod => {
                let out = std::process::Command::new("rmmod")
                    .arg("rvram")
                    .output()
                    .map_err(|e| format!("run rmmod: {e}"))?;
                if out.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "rmmod rvram: {}: {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
            }
        }
    }
}

impl std::fmt::Display for Removal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unbind(gpu) => write!(f, "the unbind of {gpu}"),
            Self::Rmmod => write!(f, "rmmod rvram"),
        }
    }
}

/// The module is unloaded: `/sys/module/rvram` is gone.
fn module_gone() -> Result<Vec<String>, String> {
    if Path::new("/sys/module/rvram").exists() {
        Err("/sys/module/rvram still exists after rmmod".into())
    } else {
        Ok(vec!["/sys/module/rvram is gone".into()])
    }
}

/// What the traffic thread saw.
struct Traffic {
    /// Whether the GPU was unbound, so it must be bound again.
    unbound: bool,
    notes: Vec<String>,
}

struct Case<'a> {
    cfg: &'a Config,
    expect: Expect,
    /// The open `/dev/rvramN` file; closed before a module removal.
    vram: Option<Vram>,
    model: Model,
    local: Region<'a>,
    target: Region<'a>,
    ep: Endpoints,
    /// Asynchronous prefetches queued, and how many the kernel accepted.
    prefetches: (usize, usize),
    dev: Device,
}

impl<'a> Case<'a> {
    /// Moves the target into VRAM, registers it and connects; returns the
    /// GPU's counters from before the registration too.
    fn new(
        cfg: &'a Config,
        (mtu, device, expect): (PathMtu, &Path, Expect),
        target: &'a mut Mmap,
        local: &'a mut Mmap,
    ) -> Result<(Self, Stats), String> {
        let mut vram = Vram::open(device)?;
        pattern::fill(target.as_mut_slice(), 0, SEED_INITIAL);
        vram.migrate_to_dev(target.as_slice(), &mut |_, _| {})?;
        let n = vram::resident(&vram.snapshot(target.as_slice())?);
        if n != PAGES {
            return Err(format!("{n} of {PAGES} pages in VRAM after MIGRATE_TO_DEV"));
        }
        let before = vram.stats()?;
        let dev = Device::open(cfg).map_err(|e| format!("open device: {e}"))?;
        let local = dev
            .register(local.as_mut_slice(), verbs::local_access())
            .map_err(|e| format!("register local: {e}"))?;
        let target = dev
            .register(target.as_mut_slice(), verbs::target_access(true))
            .map_err(|e| format!("register target: {e}"))?;
        let ep = dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
        Ok((
            Self {
                cfg,
                expect,
                vram: Some(vram),
                model: Model::new(),
                local,
                target,
                ep,
                prefetches: (0, 0),
                dev,
            },
            before,
        ))
    }

    /// READs the whole target into the start of the local buffer and
    /// checks it.
    fn read_all(&mut self, what: &str) -> Result<(), String> {
        let len = PAGES * PAGE_SIZE;
        self.local.bytes_mut()[..len].fill(0);
        self.read(0, 0, len).map_err(|e| format!("{what}: {e}"))?;
        match self.model.check(&self.local.bytes()[..len]).describe(what) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// RDMA READs `len` bytes at `offset` of the target to `sink` of the
    /// local buffer.
    fn read(&mut self, offset: usize, sink: usize, len: usize) -> Result<(), OpError> {
        let op = SendOp::Read(self.target.remote(offset, len)?);
        let sge = self.local.sge(sink, len)?;
        self.ep
            .post_and_wait(Side::A, 1, op, sge, self.cfg.timeout)
            .map(|_| ())
    }

    fn write_page(&mut self, round: usize) -> Result<(), OpError> {
        let page = round % PAGES;
        let seed = Model::seed(round);
        let at = page * PAGE_SIZE;
        // The source is the local MR's page, filled with the target
        // position's pattern.
        pattern::fill(&mut self.local.bytes_mut()[at..at + PAGE_SIZE], at, seed);
        let op = SendOp::Write(self.target.remote(at, PAGE_SIZE)?);
        let sge = self.local.sge(at, PAGE_SIZE)?;
        self.ep
            .post_and_wait(Side::A, 2, op, sge, self.cfg.timeout)?;
        self.model.seeds[page] = seed;
        Ok(())
    }

    /// Queues an asynchronous prefetch of the whole target for writing;
    /// fails unless the kernel accepts it.
    fn prefetch_async(&mut self) -> Result<(), String> {
        let len = PAGES * PAGE_SIZE;
        let mut sges = advise::prefetch_sges(self.target.addr(0), len, self.target.lkey())?;
        self.prefetches.0 += 1;
        match self
            .dev
            .advise_mr(advise::ADVICE_PREFETCH_WRITE, 0, &mut sges)?
        {
            0 => {
                self.prefetches.1 += 1;
                Ok(())
            }
            e => Err(format!("asynchronous prefetch: {}", advise::errno_name(e))),
        }
    }

    /// One round: WRITE a page, queue a prefetch of the whole target, READ
    /// another page back and check it. Short, so that many rounds overlap
    /// the unbind.
    fn round(&mut self, round: usize) -> Result<(), String> {
        self.round_with(round, true)
    }

    /// [`Case::round`], with or without the prefetch.
    fn round_with(&mut self, round: usize, prefetch: bool) -> Result<(), String> {
        self.write_page(round)
            .map_err(|e| format!("round {round}: WRITE: {e}"))?;
        if prefetch {
            self.prefetch_async()
                .map_err(|e| format!("round {round}: {e}"))?;
        }
        let page = (round * 7 + 3) % PAGES;
        let at = page * PAGE_SIZE;
        let sink = PAGES * PAGE_SIZE;
        self.local.bytes_mut()[sink..].fill(0);
        self.read(at, sink, PAGE_SIZE)
            .map_err(|e| format!("round {round}: READ: {e}"))?;
        let check = pattern::check(&self.local.bytes()[sink..], at, self.model.seeds[page]);
        match check.describe(&format!("round {round}: READ of page {page}")) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Registration and the first READ: the NIC maps the VRAM pages as
    /// expected (aliases, or migration with aliases disabled).
    fn first_read(&mut self, before: Stats) -> Result<Vec<String>, String> {
        self.read_all("first READ")?;
        let delta = self.vram()?.stats()?.since(&before);
        let n = vram::resident(&self.vram()?.snapshot(self.target.bytes())?);
        let note = format!(
            "registration and first READ: {delta}; {n} of {PAGES} pages in VRAM afterwards"
        );
        let ok = match self.expect {
            Expect::Alias => delta.alias_grants > 0 && delta.migrated_to_ram == 0 && n == PAGES,
            Expect::Migrate => delta.migrated_to_ram > 0 && delta.alias_grants == 0 && n == 0,
            Expect::Coherent => delta.migrated_to_ram == 0 && delta.alias_grants == 0 && n == PAGES,
        };
        if ok {
            Ok(vec![note])
        } else {
            Err(format!("{note}; want what --expect {} means", self.expect))
        }
    }

    /// The `p2p_alias` switch off while the NIC maps the target through
    /// aliases (see the module's documentation); on again, and the target
    /// back in VRAM and mapped through aliases, at the end.
    fn alias_switched_off(&mut self) -> Result<Vec<String>, String> {
        let switch = vram::AliasSwitch::open()?;
        let before = self.vram()?.stats()?;
        switch.set(false)?;
        let off = self.rounds_with_alias_off(&before);
        switch.set(true)?;
        let mut notes = off?;
        // Back into VRAM, mapped through aliases, for the unbind.
        let addr = self.target.addr(0) as usize;
        self.vram
            .as_mut()
            .ok_or("the /dev/rvramN file is closed")?
            .migrate_range(true, addr, PAGES)
            .map_err(|e| format!("MIGRATE_TO_DEV with p2p_alias on again: {e}"))?;
        let before = self.vram()?.stats()?;
        self.read_all("READ with p2p_alias on again")?;
        let d = self.vram()?.stats()?.since(&before);
        let n = vram::resident(&self.vram()?.snapshot(self.target.bytes())?);
        if d.alias_grants == 0 || n != PAGES {
            return Err(format!(
                "p2p_alias on again: {d}; {n} of {PAGES} pages in VRAM"
            ));
        }
        notes.push(format!(
            "p2p_alias on again, target back in VRAM: READ through aliases ({d})"
        ));
        Ok(notes)
    }

    fn rounds_with_alias_off(&mut self, before: &Stats) -> Result<Vec<String>, String> {
        // No prefetch: a prefetch faults the whole range again.
        for round in 0..ROUNDS_OFF {
            self.round_with(MAX_ROUNDS + round, false)?;
        }
        let d = self.vram()?.stats()?.since(before);
        if d.alias_grants != 0 || d.migrated_to_ram != 0 {
            return Err(format!(
                "{ROUNDS_OFF} rounds with p2p_alias off: {d}; want no alias and no migration"
            ));
        }
        let mut notes = vec![format!(
            "{ROUNDS_OFF} rounds with p2p_alias off, the NIC's alias mappings still live: every byte right, no alias handed out, nothing migrated"
        )];
        // The next fault: a synchronous prefetch of the whole MR, which
        // finds the pages in VRAM with aliases refused.
        let before = self.vram()?.stats()?;
        let took = self.dev.prefetch_write(&self.target)?;
        self.read_all("READ after a prefetch with p2p_alias off")?;
        let d = self.vram()?.stats()?.since(&before);
        let n = vram::resident(&self.vram()?.snapshot(self.target.bytes())?);
        if d.alias_grants != 0 || d.migrated_to_ram == 0 || n != 0 {
            return Err(format!(
                "prefetch with p2p_alias off: {d}; {n} of {PAGES} pages in VRAM; want every page migrated to RAM, no alias"
            ));
        }
        notes.push(format!(
            "then a synchronous prefetch of the whole MR ({} us) and a READ: every page migrated to RAM, no alias, every byte right ({d})",
            took.as_micros()
        ));
        Ok(notes)
    }

    /// Rounds of traffic while another thread unbinds the GPU.
    fn rounds_across_unbind(&mut self, removal: &Removal) -> Result<Traffic, String> {
        let started = AtomicBool::new(false);
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::scope(|s| {
            let unbinder = s.spawn(|| {
                // Wait for the go from the traffic loop.
                while !started.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let t = Instant::now();
                let r = removal.run();
                let _ = done_tx.send(());
                (r, t.elapsed())
            });
            let mut rounds = 0;
            let mut during = 0;
            let mut after = 0;
            let mut result = Ok(());
            let mut finished = false;
            while rounds < MAX_ROUNDS {
                if rounds == ROUNDS_BEFORE {
                    started.store(true, Ordering::Release);
                }
                if !finished && done_rx.try_recv().is_ok() {
                    finished = true;
                }
                if let Err(why) = self.round(rounds) {
                    result = Err(why);
                    break;
                }
                rounds += 1;
                if finished {
                    after += 1;
                    if after == ROUNDS_AFTER {
                        break;
                    }
                } else if started.load(Ordering::Acquire) {
                    during += 1;
                }
            }
            // Never leave the unbinder waiting for its go.
            started.store(true, Ordering::Release);
            if result.is_ok() && finished {
                result = self.read_all(&format!("READ of the whole target after {removal}"));
            }
            let (unbind, took) = unbinder
                .join()
                .map_err(|_| "the unbind thread panicked".to_owned())?;
            let unbound = unbind.is_ok();
            let unbind = unbind.map_err(|e| format!("{removal}: {e}"));
            let notes = match (result, unbind) {
                (Ok(()), Ok(())) if finished => vec![format!(
                    "{rounds} rounds: {ROUNDS_BEFORE} before, {during} while {removal} ran ({} ms), {after} after, then a READ of the whole target; every byte matched; {} of {} asynchronous prefetches accepted",
                    took.as_millis(),
                    self.prefetches.1,
                    self.prefetches.0,
                )],
                (Ok(()), Ok(())) => {
                    return Err(format!("{removal} did not finish in {MAX_ROUNDS} rounds"))
                }
                (Err(why), _) | (_, Err(why)) => return Err(why),
            };
            Ok(Traffic { unbound, notes })
        })
    }

    /// The open `/dev/rvramN` file.
    fn vram(&self) -> Result<&Vram, String> {
        self.vram
            .as_ref()
            .ok_or_else(|| "the /dev/rvramN file is closed".to_owned())
    }

    fn enodev(&self) -> Result<Vec<String>, String> {
        match self.vram()?.snapshot(self.target.bytes()) {
            Ok(_) => Err("SNAPSHOT succeeded on the file of an unbound GPU".into()),
            Err(e) if e.contains(&format!("os error {ENODEV}")) => {
                Ok(vec![format!("SNAPSHOT: {e}")])
            }
            Err(e) => Err(format!("SNAPSHOT failed, but not with ENODEV: {e}")),
        }
    }

    fn cpu_check(&self) -> Result<Vec<String>, String> {
        match self
            .model
            .check(self.target.bytes())
            .describe("CPU read of the target")
        {
            Some(why) => Err(why),
            None => Ok(vec![format!(
                "{PAGES} pages, every byte as the NIC left it"
            )]),
        }
    }
}

fn sysfs_write(path: &Path, value: &str) -> Result<(), String> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| format!("write {value} to {}: {e}", path.display()))
}

/// Unbinds the GPU at PCI address `gpu` from its driver (`rvram` or
/// `rvram-coherent`), through the device's own `driver/unbind`.
pub(crate) fn unbind_gpu(gpu: &str) -> Result<(), String> {
    sysfs_write(&Path::new(DEVICES).join(gpu).join("driver/unbind"), gpu)
}

/// The driver a `driver_override` file's text assigns the device to, if
/// any: an unset one reads `(null)`.
fn override_driver(text: &str) -> Option<&str> {
    match text.trim() {
        "" | "(null)" => None,
        name => Some(name),
    }
}

/// The driver the GPU at `gpu` is assigned to (its `driver_override`).
fn assigned_driver(gpu: &str) -> Result<String, String> {
    let path = Path::new(DEVICES).join(gpu).join("driver_override");
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    override_driver(&text).map(str::to_owned).ok_or_else(|| {
        format!(
            "{gpu} is assigned to no driver ({} is {text:?})",
            path.display()
        )
    })
}

/// Binds `gpu` again to the driver it is assigned to and waits for
/// `device` to come back.
pub(crate) fn bind(gpu: &str, device: &Path) -> Result<Vec<String>, String> {
    let name = assigned_driver(gpu)?;
    sysfs_write(&Path::new(DRIVERS).join(&name).join("bind"), gpu)?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !device.exists() {
        if Instant::now() > deadline {
            return Err(format!("{} did not come back", device.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let driver: PathBuf = Path::new(DEVICES).join(gpu).join("driver");
    match std::fs::read_link(&driver) {
        Ok(p) if p.file_name() == Some(name.as_ref()) => Ok(vec![format!(
            "{gpu} bound to {name}, {} back",
            device.display()
        )]),
        Ok(p) => Err(format!("{gpu} is bound to {}, not {name}", p.display())),
        Err(e) => Err(format!("{}: {e}", driver.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_override_text() {
        assert_eq!(override_driver("rvram\n"), Some("rvram"));
        assert_eq!(override_driver("rvram-coherent\n"), Some("rvram-coherent"));
        assert_eq!(override_driver("(null)\n"), None);
        assert_eq!(override_driver("\n"), None);
        assert_eq!(override_driver(""), None);
    }
}
