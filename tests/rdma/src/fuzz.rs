// SPDX-License-Identifier: GPL-2.0
//! Random RDMA WRITEs and READs through an ODP MR whose memory a second
//! thread keeps moving, unmapping and write-protecting.
//!
//! The target has [`STABLE`] pages whose data only the NIC changes, and
//! [`CHAOS`] pages after them. While the main thread posts operations, a
//! chaos thread migrates random ranges of the whole target into the GPU's
//! VRAM and back, and unmaps, remaps, zaps and write- or read-protects
//! ranges of the chaos pages. The operations, each a function of the seed:
//!
//! - on stable pages, random offsets and lengths (0 to three pages): every
//!   one must complete successfully, and every READ returns what the
//!   model of the stable pages holds, wherever the pages live meanwhile;
//! - on chaos pages (READs may start in the stable ones): success, or
//!   `IBV_WC_REM_ACCESS_ERR` for a hole or a protection the operation hits;
//! - before the start or across the end of the MR, or with a wrong rkey:
//!   must fail with `IBV_WC_REM_ACCESS_ERR`, and a WRITE must not change a
//!   byte.
//!
//! A failed operation moves the QPs to the error state: the case connects
//! new ones. At the end the NIC and the CPU read the stable pages back,
//! rvram's counters show the NIC reached VRAM through P2P aliases, and the
//! guest's kernel log must show no splat (checked by `rvram-report summary`).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::config::{Config, PathMtu, VramMode, PAGE_SIZE};
use crate::mmap::Mmap;
use crate::report::TestResult;
use crate::verbs::{self, Device, Endpoints, OpError, Region, Remote, SendOp, Side};
use crate::vram::Vram;

/// Pages only the NIC writes.
pub const STABLE: usize = 32;
/// Pages the chaos thread unmaps and protects.
pub const CHAOS: usize = 32;
const PAGES: usize = STABLE + CHAOS;
/// The longest operation.
const MAX_LEN: usize = 3 * PAGE_SIZE;
/// `ibv_wc_status` of a remote access error.
const REM_ACCESS_ERR: u32 = 10;

/// xorshift64*: every choice of the case is a function of the seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for stream `k` of `seed`.
    pub fn new(seed: u64, k: u64) -> Self {
        let s = (seed.wrapping_add(1)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (k + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        Self(if s == 0 { 1 } else { s })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `[0, n)`; 0 for `n == 0`.
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// What an operation aims at, and so what its completion may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aim {
    /// Stable pages: must succeed.
    Stable,
    /// Chaos pages: success or a remote access error.
    Chaos,
    /// Outside the MR, or a wrong rkey: must fail with a remote access error.
    Outside,
}

/// One operation: WRITE or READ of `len` bytes at byte `at` of the target
/// (negative: before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// What it aims at.
    pub aim: Aim,
    /// An RDMA WRITE, else a READ.
    pub write: bool,
    /// Offset from the start of the target.
    pub at: i64,
    /// Length in bytes.
    pub len: usize,
    /// Use a wrong rkey.
    pub bad_key: bool,
}

impl Op {
    /// A random operation; always inside `[-2 * MAX_LEN, len + MAX_LEN)`.
    /// Six in ten aim at stable pages, a quarter at chaos pages, one in
    /// ten outside the MR and one in twenty has a bad rkey: a failure
    /// costs a reconnect, the stable pages are where the data is checked.
    pub fn random(rng: &mut Rng) -> Self {
        let write = rng.below(2) == 1;
        let stable = STABLE * PAGE_SIZE;
        let total = PAGES * PAGE_SIZE;
        match rng.below(20) {
            0..=11 => {
                let at = rng.below(stable);
                let len = if rng.below(20) == 0 {
                    0
                } else {
                    1 + rng.below(MAX_LEN.min(stable - at))
                };
                Op {
                    aim: Aim::Stable,
                    write,
                    at: at as i64,
                    len,
                    bad_key: false,
                }
            }
            12..=16 => {
                // A failed multi-packet WRITE may have written its first
                // packets: WRITEs stay out of the stable pages.
                let first = if write { stable } else { stable - PAGE_SIZE };
                let at = first + rng.below(total - first);
                let len = 1 + rng.below(MAX_LEN.min(total - at));
                Op {
                    aim: Aim::Chaos,
                    write,
                    at: at as i64,
                    len,
                    bad_key: false,
                }
            }
            17..=18 => {
                if rng.below(2) == 0 {
                    // Starts before the MR, maybe reaching into it.
                    let before = 1 + rng.below(2 * MAX_LEN);
                    let len = 1 + rng.below((before + PAGE_SIZE).min(MAX_LEN));
                    Op {
                        aim: Aim::Outside,
                        write,
                        at: -(before as i64),
                        len,
                        bad_key: false,
                    }
                } else {
                    // Runs over its end.
                    let left = rng.below(PAGE_SIZE);
                    let len = left + 1 + rng.below(MAX_LEN - left);
                    Op {
                        aim: Aim::Outside,
                        write,
                        at: (total - left) as i64,
                        len,
                        bad_key: false,
                    }
                }
            }
            _ => {
                let at = rng.below(stable - PAGE_SIZE);
                let len = 1 + rng.below(PAGE_SIZE);
                Op {
                    aim: Aim::Outside,
                    write,
                    at: at as i64,
                    len,
                    bad_key: true,
                }
            }
        }
    }

    /// Whether a completion with `status` is what this operation may get.
    pub fn allows(&self, status: u32) -> bool {
        match self.aim {
            Aim::Stable => status == 0,
            Aim::Chaos => status == 0 || status == REM_ACCESS_ERR,
            Aim::Outside => status == REM_ACCESS_ERR,
        }
    }
}

/// Counts of what happened.
#[derive(Debug, Default)]
struct Tally {
    ops: [u64; 3],
    ok: [u64; 3],
    rem_access: [u64; 3],
    wrong: Vec<String>,
    bad_bytes: usize,
    reconnects: u64,
}

impl Tally {
    fn wrong(&mut self, why: String) {
        if self.wrong.len() < 5 {
            self.wrong.push(why);
        } else if self.wrong.len() == 5 {
            self.wrong.push("...".to_owned());
        }
    }
}

fn aim_index(aim: Aim) -> usize {
    match aim {
        Aim::Stable => 0,
        Aim::Chaos => 1,
        Aim::Outside => 2,
    }
}

/// The chaos pages as the chaos thread left them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Page {
    /// Mapped, maybe protected.
    Mapped,
    /// Unmapped.
    Hole,
    /// Unmapped, and something else was mapped there meanwhile: never
    /// touched again.
    Lost,
}

/// The chaos thread's work on the target at `base` until `stop`, counting
/// its changes in `count`; maps the chaos pages read-write again at the
/// end and returns how many were lost to other mappings.
fn chaos(base: usize, vram: &mut Vram, seed: u64, stop: &AtomicBool, count: &AtomicU64) -> usize {
    let mut rng = Rng::new(seed, 1);
    let mut pages = [Page::Mapped; CHAOS];
    let chaos0 = base + STABLE * PAGE_SIZE;
    while !stop.load(Ordering::Relaxed) {
        let first = rng.below(PAGES);
        let n = 1 + rng.below((PAGES - first).min(16));
        let cfirst = rng.below(CHAOS);
        let cn = 1 + rng.below((CHAOS - cfirst).min(4));
        let action = rng.below(8);
        // Holes, protections and migrations fail as they may: the point is
        // what the NIC does meanwhile.
        match action {
            0 | 1 => {
                let _ = vram.migrate_range(true, base + first * PAGE_SIZE, n);
            }
            2 => {
                let _ = vram.migrate_range(false, base + first * PAGE_SIZE, n);
            }
            _ => {
                for (i, page) in pages.iter_mut().enumerate().skip(cfirst).take(cn) {
                    *page = change(chaos0 + i * PAGE_SIZE, *page, action);
                }
            }
        }
        count.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_micros(200 + rng.below(2000) as u64));
    }
    for (i, page) in pages.iter_mut().enumerate() {
        *page = change(chaos0 + i * PAGE_SIZE, *page, 7);
    }
    pages.iter().filter(|&&p| p == Page::Lost).count()
}

/// Applies `action` (3 to 7) to the chaos page at `addr`: read-only, no
/// access, zapped, unmapped, mapped afresh read-write. Returns its state.
fn change(addr: usize, page: Page, action: usize) -> Page {
    let ptr = addr as *mut libc::c_void;
    let len = PAGE_SIZE;
    // Every unsafe block below changes the mapping of one chaos page that
    // this thread mapped, or unmapped (then MAP_FIXED_NOREPLACE keeps any
    // other mapping there). No Rust code reads or writes chaos pages: the
    // main thread reaches them through the NIC alone.
    match (page, action) {
        (Page::Lost, _) => Page::Lost,
        (Page::Mapped, 3) => {
            // SAFETY: a mapped chaos page of ours (above).
            unsafe { libc::mprotect(ptr, len, libc::PROT_READ) };
            page
        }
        (Page::Mapped, 4) => {
            // SAFETY: a mapped chaos page of ours (above).
            unsafe { libc::mprotect(ptr, len, libc::PROT_NONE) };
            page
        }
        (Page::Mapped, 5) => {
            // SAFETY: a mapped chaos page of ours (above).
            unsafe { libc::madvise(ptr, len, libc::MADV_DONTNEED) };
            page
        }
        (Page::Mapped, 6) => {
            // SAFETY: a mapped chaos page of ours (above).
            if unsafe { libc::munmap(ptr, len) } == 0 {
                Page::Hole
            } else {
                page
            }
        }
        (Page::Hole, 3..=6) => page,
        (_, _) => {
            let fixed = if page == Page::Hole {
                libc::MAP_FIXED_NOREPLACE
            } else {
                libc::MAP_FIXED
            };
            // SAFETY: ours, or a hole that NOREPLACE leaves to whoever took it.
            let p = unsafe {
                libc::mmap(
                    ptr,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed,
                    -1,
                    0,
                )
            };
            if p == ptr {
                Page::Mapped
            } else if p == libc::MAP_FAILED
                && io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST)
            {
                Page::Lost
            } else {
                if p != libc::MAP_FAILED {
                    // A kernel that took NOREPLACE for a hint: not ours.
                    // SAFETY: the kernel just mapped it for us at `p`.
                    unsafe { libc::munmap(p, len) };
                }
                page
            }
        }
    }
}

struct Case<'a> {
    cfg: &'a Config,
    mtu: PathMtu,
    dev: &'a Device,
    target: Region<'a>,
    local: Region<'a>,
    ep: Endpoints,
    /// The stable pages as the NIC last wrote them.
    model: Vec<u8>,
    rng: Rng,
    tally: Tally,
}

impl Case<'_> {
    fn remote(&self, op: &Op) -> Remote {
        // Inside the MR, `Region::remote` bounds-checks; outside, the
        // address is made by hand, as a buggy or hostile peer would.
        let start = self.target.bytes().as_ptr() as i64;
        let rkey = self.target.remote(0, 1).map(|r| r.rkey).unwrap_or_default();
        Remote {
            rkey: if op.bad_key { rkey ^ 0x5a } else { rkey },
            addr: (start + op.at) as u64,
        }
    }

    /// Runs `op`; checks its completion and data.
    fn run(&mut self, i: usize, op: Op) -> Result<(), String> {
        let a = aim_index(op.aim);
        self.tally.ops[a] += 1;
        if op.write {
            let seed = self.rng.next_u64();
            let mut r = Rng::new(seed, 0);
            for b in &mut self.local.bytes_mut()[..op.len] {
                *b = r.next_u64() as u8;
            }
        } else {
            self.local.bytes_mut()[..op.len].fill(0);
        }
        let remote = self.remote(&op);
        let send = if op.write {
            SendOp::Write(remote)
        } else {
            SendOp::Read(remote)
        };
        let sge = self.local.sge(0, op.len).map_err(|e| e.to_string())?;
        let status = match self
            .ep
            .post_and_wait(Side::A, i as u64, send, sge, self.cfg.timeout)
        {
            Ok(_) => 0,
            Err(OpError::Status { status, .. }) => status,
            Err(e) => return Err(format!("operation {i} {op:?}: {e}")),
        };
        if status == 0 {
            self.tally.ok[a] += 1;
        } else if status == REM_ACCESS_ERR {
            self.tally.rem_access[a] += 1;
        }
        if !op.allows(status) {
            self.tally.wrong(format!(
                "operation {i} {op:?}: status {status} ({})",
                verbs::wc_status_name(status)
            ));
        }
        if status != 0 {
            // The QPs are in the error state now.
            self.tally.reconnects += 1;
            self.ep = self
                .dev
                .connect(self.mtu)
                .map_err(|e| format!("reconnect: {e}"))?;
            return Ok(());
        }
        let stable = STABLE * PAGE_SIZE;
        let at = usize::try_from(op.at).unwrap_or(0);
        let in_stable = at.min(stable)..(at + op.len).min(stable);
        let local = &self.local.bytes()[..op.len];
        if op.write && op.aim == Aim::Stable {
            self.model[in_stable].copy_from_slice(local);
        } else if !op.write && !in_stable.is_empty() {
            let want = &self.model[in_stable.clone()];
            let got = &local[..in_stable.len()];
            let bad = want.iter().zip(got).filter(|(a, b)| a != b).count();
            if bad != 0 {
                self.tally.bad_bytes += bad;
                self.tally.wrong(format!(
                    "operation {i} {op:?}: READ: {bad} of {} bytes of stable pages differ",
                    in_stable.len()
                ));
            }
        }
        Ok(())
    }
}

/// Runs the case at `mtu`: `ops` operations with seed `seed`; one TAP
/// point per claim.
pub fn run_fuzz(
    cfg: &Config,
    mtu: PathMtu,
    vram: &VramMode,
    ops: usize,
    seed: u64,
) -> Vec<TestResult> {
    let mut results = Vec::new();
    let mut point = |name: &str, r: Result<Vec<String>, String>| {
        results.push(TestResult::invalidation(
            format!("mtu {mtu}: fuzz: {name}"),
            mtu,
            r,
        ));
    };
    match fuzz(cfg, mtu, vram, ops, seed) {
        Ok(points) => {
            for (name, r) in points {
                point(&name, r);
            }
        }
        Err(why) => point("setup", Err(why)),
    }
    results
}

type Points = Vec<(String, Result<Vec<String>, String>)>;

fn fuzz(
    cfg: &Config,
    mtu: PathMtu,
    vram: &VramMode,
    ops: usize,
    seed: u64,
) -> Result<Points, String> {
    let len = PAGES * PAGE_SIZE;
    // Low: the chaos thread's holes must not fill with the verbs library's
    // queue mappings when it reconnects.
    let mut target = Mmap::anonymous_low(len).map_err(|e| format!("map target: {e}"))?;
    let mut local = Mmap::anonymous(MAX_LEN).map_err(|e| format!("map local: {e}"))?;
    let mut rng = Rng::new(seed, 0);
    let mut model = vec![0u8; STABLE * PAGE_SIZE];
    for b in &mut model {
        *b = rng.next_u64() as u8;
    }
    target.as_mut_slice()[..model.len()].copy_from_slice(&model);
    let base = target.as_slice().as_ptr() as usize;
    let mut gpu = Vram::open(&vram.device)?;
    let mut chaos_gpu = Vram::open(&vram.device)?;
    gpu.migrate_to_dev(target.as_slice(), &mut |_, _| {})?;
    let before = gpu.stats()?;

    let dev = Device::open(cfg).map_err(|e| format!("open device: {e}"))?;
    let local = dev
        .register(local.as_mut_slice(), verbs::local_access())
        .map_err(|e| format!("register local: {e}"))?;
    let target_region = dev
        .register(target.as_mut_slice(), verbs::target_access(true))
        .map_err(|e| format!("register target: {e}"))?;
    let ep = dev.connect(mtu).map_err(|e| format!("connect: {e}"))?;
    let mut case = Case {
        cfg,
        mtu,
        dev: &dev,
        target: target_region,
        local,
        ep,
        model,
        rng,
        tally: Tally::default(),
    };

    let stop = AtomicBool::new(false);
    let changes = AtomicU64::new(0);
    let (run, lost) = std::thread::scope(|s| {
        let chaos = s.spawn(|| chaos(base, &mut chaos_gpu, seed, &stop, &changes));
        let mut result = Ok(());
        for i in 0..ops {
            let op = Op::random(&mut case.rng);
            if let Err(why) = case.run(i, op) {
                result = Err(why);
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        (result, chaos.join().unwrap_or(CHAOS))
    });
    let mut points = Points::new();
    let t = &case.tally;
    let names = [
        "stable pages",
        "chaos pages",
        "outside the MR or with a bad rkey",
    ];
    let counts: Vec<String> = (0..3)
        .map(|a| {
            format!(
                "{}: {} operations, {} succeeded, {} IBV_WC_REM_ACCESS_ERR",
                names[a], t.ops[a], t.ok[a], t.rem_access[a]
            )
        })
        .collect();
    let mut notes = counts.clone();
    notes.push(format!(
        "seed {seed}: {ops} operations, {} reconnects, {} chaos changes, {lost} chaos pages lost to other mappings",
        t.reconnects,
        changes.load(Ordering::Relaxed)
    ));
    points.push((
        format!(
            "{ops} random RDMA WRITEs and READs while the memory moves, is unmapped and protected"
        ),
        match (&run, t.wrong.is_empty()) {
            (Ok(()), true) => Ok(notes),
            (Err(why), _) => Err(why.clone()),
            (Ok(()), false) => Err(format!("{}; {}", t.wrong.join("; "), counts.join("; "))),
        },
    ));
    points.push((
        "every operation on stable pages succeeded and every READ matched".to_owned(),
        if t.ok[0] == t.ops[0] && t.bad_bytes == 0 && t.ops[0] > 0 {
            Ok(vec![])
        } else {
            Err(format!(
                "{} of {} succeeded, {} bytes differ",
                t.ok[0], t.ops[0], t.bad_bytes
            ))
        },
    ));
    points.push((
        "no operation outside the MR or with a bad rkey succeeded".to_owned(),
        if t.ok[2] == 0 && t.ops[2] > 0 {
            Ok(vec![])
        } else {
            Err(format!("{} of {} succeeded", t.ok[2], t.ops[2]))
        },
    ));

    // The stable pages, read back by the NIC and then by the CPU.
    let stable = STABLE * PAGE_SIZE;
    let mut nic_bad = 0;
    let mut readback = Ok(());
    if run.is_ok() {
        for at in (0..stable).step_by(MAX_LEN) {
            let n = MAX_LEN.min(stable - at);
            let op = Op {
                aim: Aim::Stable,
                write: false,
                at: at as i64,
                len: n,
                bad_key: false,
            };
            if let Err(why) = case.run(ops + at, op) {
                readback = Err(why);
                break;
            }
        }
        nic_bad = case.tally.bad_bytes;
    }
    let cpu_bad = case
        .target
        .bytes()
        .iter()
        .zip(&case.model)
        .filter(|(a, b)| a != b)
        .count();
    points.push((
        "afterwards the NIC and the CPU read every stable byte as the NIC wrote it".to_owned(),
        match readback {
            Ok(()) if nic_bad == 0 && cpu_bad == 0 && case.tally.wrong.is_empty() => Ok(vec![]),
            Ok(()) => Err(format!(
                "NIC: {nic_bad} bytes differ; CPU: {cpu_bad} bytes differ"
            )),
            Err(why) => Err(why),
        },
    ));
    let delta = gpu.stats()?.since(&before);
    points.push((
        "rxe reached the VRAM-resident pages through P2P aliases".to_owned(),
        if delta.alias_grants > 0 {
            Ok(vec![format!("{delta}")])
        } else {
            Err(format!("{delta}"))
        },
    ));
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_stay_in_their_ranges() {
        let mut rng = Rng::new(42, 0);
        let (stable, total) = ((STABLE * PAGE_SIZE) as i64, (PAGES * PAGE_SIZE) as i64);
        let mut seen = [0; 3];
        for _ in 0..100_000 {
            let op = Op::random(&mut rng);
            let end = op.at + op.len as i64;
            seen[aim_index(op.aim)] += 1;
            assert!(op.len <= MAX_LEN, "{op:?}");
            match op.aim {
                Aim::Stable => assert!(op.at >= 0 && end <= stable, "{op:?}"),
                Aim::Chaos => {
                    assert!(end <= total && op.len > 0, "{op:?}");
                    assert!(
                        op.at >= if op.write { stable } else { stable - 4096 },
                        "{op:?}"
                    );
                }
                Aim::Outside => assert!(
                    op.len > 0 && (op.bad_key || op.at < 0 || end > total),
                    "{op:?}"
                ),
            }
        }
        assert!(seen.iter().all(|&n| n > 10_000), "{seen:?}");
    }

    #[test]
    fn completions_allowed_by_aim() {
        let op = |aim| Op {
            aim,
            write: true,
            at: 0,
            len: 1,
            bad_key: false,
        };
        assert!(op(Aim::Stable).allows(0));
        assert!(!op(Aim::Stable).allows(REM_ACCESS_ERR));
        assert!(op(Aim::Chaos).allows(0) && op(Aim::Chaos).allows(REM_ACCESS_ERR));
        assert!(!op(Aim::Chaos).allows(5));
        assert!(!op(Aim::Outside).allows(0) && op(Aim::Outside).allows(REM_ACCESS_ERR));
    }

    #[test]
    fn rng_replays() {
        let (mut a, mut b) = (Rng::new(7, 3), Rng::new(7, 3));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        assert_ne!(Rng::new(7, 3).next_u64(), Rng::new(8, 3).next_u64());
    }
}
