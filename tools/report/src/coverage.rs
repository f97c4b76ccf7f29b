// SPDX-License-Identifier: GPL-2.0

//! `rvram-report coverage DIR KOBJ RVRAM_KO`: which basic blocks of the migration
//! code the fuzz and stress suites of a `make coverage` run reached.
//!
//! The suites ran with `RVRAM_KCOV_DIR` (tests/vm/src/kcov.h) and left, per
//! suite, `DIR/kcov/<suite>/*.pcs`: the unique PCs KCOV recorded. A KCOV PC
//! is the return address of a call to `__sanitizer_cov_trace_pc`, one per
//! basic block the compiler instrumented, less the KASLR offset. The
//! instrumented blocks of a unit are found in the binaries themselves:
//! calls to that function in vmlinux's code (rel32 `call`s that land on it),
//! relocations against it in a module. Coverage is reached blocks over
//! instrumented blocks, per unit:
//!
//! - a C file of the kernel: the functions its object defines, found by
//!   name and size in vmlinux;
//! - the kernel crate's mm abstractions: the functions of vmlinux and of
//!   rvram.ko (generic code is instantiated in the module) whose mangled
//!   path is `kernel::mm::{migrate,hmm,pagemap}`;
//! - rvram.ko and test_hmm.ko, all of their code.
//!
//! The method checks itself: a recorded PC inside a unit's functions that
//! is not one of its blocks fails the run, as does a module PC that no
//! recorded section of the module holds.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

const TRACE_PC: &str = "__sanitizer_cov_trace_pc";

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// A section of an ELF64 little-endian file.
struct Section {
    name: String,
    kind: u32,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
}

/// A function symbol.
#[derive(Clone)]
struct Func {
    name: String,
    shndx: usize,
    value: u64,
    size: u64,
}

struct Elf {
    data: Vec<u8>,
    sections: Vec<Section>,
    funcs: Vec<Func>,
    /// Every symbol's name and value, by index in the symbol table.
    sym_names: Vec<String>,
    sym_values: Vec<u64>,
}

fn u16_at(d: &[u8], o: usize) -> io::Result<u16> {
    d.get(o..o + 2)
        .map(|b| u16::from_le_bytes(b.try_into().unwrap()))
        .ok_or_else(|| bad("truncated ELF"))
}

fn u32_at(d: &[u8], o: usize) -> io::Result<u32> {
    d.get(o..o + 4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .ok_or_else(|| bad("truncated ELF"))
}

fn u64_at(d: &[u8], o: usize) -> io::Result<u64> {
    d.get(o..o + 8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .ok_or_else(|| bad("truncated ELF"))
}

fn cstr(d: &[u8], o: usize) -> String {
    let tail = d.get(o..).unwrap_or(&[]);
    let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
    String::from_utf8_lossy(&tail[..end]).into_owned()
}

impl Elf {
    fn open(path: &Path) -> io::Result<Self> {
        let data = fs::read(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        if data.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
            return Err(bad(format!(
                "{}: not a 64-bit little-endian ELF",
                path.display()
            )));
        }
        let shoff = u64_at(&data, 0x28)? as usize;
        let shentsize = u16_at(&data, 0x3a)? as usize;
        let shnum = u16_at(&data, 0x3c)? as usize;
        let shstrndx = u16_at(&data, 0x3e)? as usize;
        let mut raw = Vec::with_capacity(shnum);
        for i in 0..shnum {
            let o = shoff + i * shentsize;
            raw.push((
                u32_at(&data, o)?,
                Section {
                    name: String::new(),
                    kind: u32_at(&data, o + 4)?,
                    addr: u64_at(&data, o + 0x10)?,
                    offset: u64_at(&data, o + 0x18)?,
                    size: u64_at(&data, o + 0x20)?,
                    link: u32_at(&data, o + 0x28)?,
                    info: u32_at(&data, o + 0x2c)?,
                },
            ));
        }
        let stroff = raw
            .get(shstrndx)
            .ok_or_else(|| bad("no section names"))?
            .1
            .offset as usize;
        let mut sections = Vec::new();
        for (name, mut s) in raw {
            s.name = cstr(&data, stroff + name as usize);
            sections.push(s);
        }
        let mut funcs = Vec::new();
        let mut sym_names = Vec::new();
        let mut sym_values = Vec::new();
        if let Some(symtab) = sections.iter().find(|s| s.kind == 2) {
            let strtab = sections
                .get(symtab.link as usize)
                .ok_or_else(|| bad("no strtab"))?
                .offset;
            for i in 0..(symtab.size / 24) as usize {
                let o = symtab.offset as usize + i * 24;
                let name = cstr(&data, strtab as usize + u32_at(&data, o)? as usize);
                let info = data[o + 4];
                let shndx = u16_at(&data, o + 6)? as usize;
                let value = u64_at(&data, o + 8)?;
                let size = u64_at(&data, o + 16)?;
                if info & 0xf == 2 && size > 0 && shndx != 0 && shndx < 0xff00 {
                    funcs.push(Func {
                        name: name.clone(),
                        shndx,
                        value,
                        size,
                    });
                }
                sym_names.push(name);
                sym_values.push(value);
            }
        }
        Ok(Self {
            data,
            sections,
            funcs,
            sym_names,
            sym_values,
        })
    }

    fn symbol(&self, name: &str) -> Option<&Func> {
        self.funcs.iter().find(|f| f.name == name)
    }

    /// The bytes of a linked image at `addr..addr + len`.
    fn bytes_at(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let s = self
            .sections
            .iter()
            .find(|s| s.kind == 1 && s.addr <= addr && addr + len <= s.addr + s.size)?;
        let o = (s.offset + addr - s.addr) as usize;
        self.data.get(o..o + len as usize)
    }

    /// Instrumented blocks of a linked image's function: the addresses
    /// after each rel32 call to `target`.
    fn linked_sites(&self, f: &Func, target: u64) -> Vec<u64> {
        let Some(code) = self.bytes_at(f.value, f.size) else {
            return Vec::new();
        };
        let mut sites = Vec::new();
        for i in 0..code.len().saturating_sub(4) {
            if code[i] != 0xe8 {
                continue;
            }
            let rel = i32::from_le_bytes(code[i + 1..i + 5].try_into().unwrap()) as i64;
            let next = f.value + i as u64 + 5;
            if next.wrapping_add(rel as u64) == target {
                sites.push(next);
            }
        }
        sites
    }

    /// Instrumented blocks of a relocatable object (a module): per code
    /// section, the offsets after each call relocated against `target`.
    fn reloc_sites(&self, target: &str) -> io::Result<HashMap<usize, BTreeSet<u64>>> {
        let mut out: HashMap<usize, BTreeSet<u64>> = HashMap::new();
        for rela in self.sections.iter().filter(|s| s.kind == 4) {
            let applies_to = rela.info as usize;
            for i in 0..(rela.size / 24) as usize {
                let o = rela.offset as usize + i * 24;
                let offset = u64_at(&self.data, o)?;
                let info = u64_at(&self.data, o + 8)?;
                let sym = (info >> 32) as usize;
                // R_X86_64_PC32 (2) or R_X86_64_PLT32 (4) on a call's rel32.
                let kind = info & 0xffff_ffff;
                if (kind == 2 || kind == 4)
                    && self.sym_names.get(sym).map(String::as_str) == Some(target)
                {
                    out.entry(applies_to).or_default().insert(offset + 4);
                }
            }
        }
        Ok(out)
    }
}

/// A unit of code: its functions' ranges and instrumented blocks, as
/// canonical (vmlinux) or module-relative addresses.
#[derive(Default)]
struct Unit {
    name: String,
    /// (start, end, function) of each function, in the unit's address space.
    funcs: Vec<(u64, u64, String)>,
    sites: BTreeSet<u64>,
}

impl Unit {
    fn func_of(&self, pc: u64) -> Option<&str> {
        // A PC is a return address: it may be the first byte after the
        // function (a call to a noreturn function at its end).
        self.funcs
            .iter()
            .find(|(s, e, _)| *s < pc && pc <= *e)
            .map(|(_, _, n)| n.as_str())
    }
}

/// The PCs of one process, and where its modules were.
#[derive(Default)]
struct Trace {
    pcs: Vec<u64>,
    stext: Option<u64>,
    /// (module, section) -> address.
    sections: HashMap<(String, String), u64>,
    full: u64,
}

fn read_trace(path: &Path) -> io::Result<Trace> {
    let mut t = Trace::default();
    let text = fs::read_to_string(path)?;
    let mut lines = text.lines();
    if lines.next() != Some("kcov 1") {
        return Err(bad(format!("{}: not a kcov.h trace", path.display())));
    }
    for l in lines {
        let w: Vec<&str> = l.split_whitespace().collect();
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
        match w.as_slice() {
            ["stext", a] => t.stext = hex(a),
            ["section", m, s, a] => {
                if let Some(a) = hex(a) {
                    t.sections.insert((m.to_string(), s.to_string()), a);
                }
            }
            ["full", n] => t.full = n.parse().unwrap_or(0),
            ["threads" | "untraced", _] => {}
            [pc] => t
                .pcs
                .push(hex(pc).ok_or_else(|| bad(format!("{}: {l}", path.display())))?),
            _ => return Err(bad(format!("{}: {l}", path.display()))),
        }
    }
    Ok(t)
}

/// Mangled-path fragments of the kernel crate's mm abstractions (v0
/// mangling spells a path `6kernel2mm7migrate`).
const RUST_MM: [&str; 3] = ["6kernel2mm7migrate", "6kernel2mm3hmm", "6kernel2mm7pagemap"];

struct Module {
    name: &'static str,
    elf: Elf,
    sites: HashMap<usize, BTreeSet<u64>>,
}

/// A reached block: the unit's index and its address there.
type Hit = (usize, u64);

/// Per code section of a module: (start, end, unit) of its functions.
type SectionUnits = HashMap<usize, Vec<(u64, u64, usize)>>;

struct Coverage {
    units: Vec<Unit>,
    vmlinux_units: Vec<usize>,
    modules: Vec<Module>,
    /// Per module, per code section index: the units its functions are in.
    module_units: Vec<SectionUnits>,
    stext_link: u64,
}

impl Coverage {
    fn build(kobj: &Path, rvram_ko: &Path) -> io::Result<Self> {
        let vmlinux = Elf::open(&kobj.join("vmlinux"))?;
        let target = vmlinux
            .symbol(TRACE_PC)
            .ok_or_else(|| bad("vmlinux has no __sanitizer_cov_trace_pc: not a KCOV kernel"))?
            .value;
        let stext_link = vmlinux
            .sym_names
            .iter()
            .position(|n| n == "_stext")
            .map(|i| vmlinux.sym_values[i])
            .ok_or_else(|| bad("vmlinux has no _stext"))?;
        let mut units = Vec::new();
        let mut vmlinux_units = Vec::new();
        let by_name: HashMap<&str, Vec<&Func>> =
            vmlinux.funcs.iter().fold(HashMap::new(), |mut m, f| {
                m.entry(f.name.as_str()).or_default().push(f);
                m
            });
        for file in ["mm/migrate_device", "mm/hmm", "mm/memremap"] {
            let obj = Elf::open(&kobj.join(format!("{file}.o")))?;
            let mut u = Unit {
                name: format!("{file}.c"),
                ..Default::default()
            };
            for f in &obj.funcs {
                // The same static name may exist in other files: the one
                // of this size, if there is exactly one.
                let cands: Vec<&&Func> =
                    by_name.get(f.name.as_str()).into_iter().flatten().collect();
                let pick = if cands.len() == 1 {
                    cands.first().copied()
                } else {
                    let same: Vec<&&Func> =
                        cands.iter().copied().filter(|c| c.size == f.size).collect();
                    (same.len() == 1).then(|| same[0])
                };
                if let Some(v) = pick {
                    u.funcs.push((v.value, v.value + v.size, v.name.clone()));
                    u.sites.extend(vmlinux.linked_sites(v, target));
                }
            }
            vmlinux_units.push(units.len());
            units.push(u);
        }
        let mut rust = Unit {
            name: "kernel::mm::{migrate,hmm,pagemap} (vmlinux)".into(),
            ..Default::default()
        };
        for f in vmlinux
            .funcs
            .iter()
            .filter(|f| RUST_MM.iter().any(|p| f.name.contains(p)))
        {
            rust.funcs.push((f.value, f.value + f.size, f.name.clone()));
            rust.sites.extend(vmlinux.linked_sites(f, target));
        }
        vmlinux_units.push(units.len());
        units.push(rust);

        let mut modules = Vec::new();
        let mut module_units = Vec::new();
        for (name, path) in [
            ("rvram", rvram_ko.to_path_buf()),
            ("test_hmm", kobj.join("lib/test_hmm.ko")),
        ] {
            let elf = Elf::open(&path)?;
            let sites = elf.reloc_sites(TRACE_PC)?;
            let own = Unit {
                name: format!("{name}.ko"),
                ..Default::default()
            };
            let generic = (name == "rvram").then(|| Unit {
                name: "kernel::mm generics instantiated in rvram.ko".into(),
                ..Default::default()
            });
            let own_i = units.len();
            units.push(own);
            let gen_i = generic.map(|g| {
                units.push(g);
                units.len() - 1
            });
            let mut map = SectionUnits::new();
            for f in &elf.funcs {
                let ui = match gen_i {
                    Some(g) if RUST_MM.iter().any(|p| f.name.contains(p)) => g,
                    _ => own_i,
                };
                // Module addresses: (section index << 48) | offset.
                let key = (f.shndx as u64) << 48;
                let (s, e) = (key | f.value, key | (f.value + f.size));
                units[ui].funcs.push((s, e, f.name.clone()));
                if let Some(set) = sites.get(&f.shndx) {
                    units[ui]
                        .sites
                        .extend(set.range(f.value + 1..=f.value + f.size).map(|o| key | o));
                }
                map.entry(f.shndx)
                    .or_default()
                    .push((f.value, f.value + f.size, ui));
            }
            module_units.push(map);
            modules.push(Module { name, elf, sites });
        }
        Ok(Self {
            units,
            vmlinux_units,
            modules,
            module_units,
            stext_link,
        })
    }

    /// Places a trace's PCs in units. Returns the hits and the PCs that
    /// fell in a unit's functions without being one of its blocks, or in
    /// none of a loaded module's sections.
    fn place(&self, t: &Trace) -> (HashSet<Hit>, Vec<String>) {
        let mut hits = HashSet::new();
        let mut wrong = Vec::new();
        let kaslr = t.stext.map(|s| s.wrapping_sub(self.stext_link));
        for &pc in &t.pcs {
            let mut placed = false;
            for &ui in &self.vmlinux_units {
                let u = &self.units[ui];
                if let Some(f) = u.func_of(pc) {
                    if u.sites.contains(&pc) {
                        hits.insert((ui, pc));
                    } else {
                        wrong.push(format!(
                            "{pc:#x} in {f} ({}) is no instrumented block",
                            u.name
                        ));
                    }
                    placed = true;
                    break;
                }
            }
            if placed {
                continue;
            }
            let Some(kaslr) = kaslr else { continue };
            let real = pc.wrapping_add(kaslr);
            for (mi, m) in self.modules.iter().enumerate() {
                for (si, s) in m.elf.sections.iter().enumerate() {
                    let Some(&base) = t.sections.get(&(m.name.to_string(), s.name.clone())) else {
                        continue;
                    };
                    if s.size == 0
                        || real < base
                        || real > base + s.size
                        || !m.sites.contains_key(&si)
                    {
                        continue;
                    }
                    let off = real - base;
                    let Some(&(_, _, ui)) = self.module_units[mi]
                        .get(&si)
                        .and_then(|v| v.iter().find(|(a, b, _)| *a < off && off <= *b))
                    else {
                        continue;
                    };
                    if m.sites[&si].contains(&off) {
                        hits.insert((ui, ((si as u64) << 48) | off));
                    } else {
                        wrong.push(format!(
                            "{}+{off:#x} ({}) is no instrumented block",
                            s.name, m.name
                        ));
                    }
                }
            }
        }
        (hits, wrong)
    }
}

/// Reads `DIR/kcov/<suite>/*.pcs`, writes `DIR/coverage.md` and returns it
/// with the verdict: false when the method's self-checks failed.
pub fn run(dir: &Path, kobj: &Path, rvram_ko: &Path) -> io::Result<(String, bool)> {
    let cov = Coverage::build(kobj, rvram_ko)?;
    let mut suites: BTreeMap<String, (HashSet<Hit>, u64, usize)> = BTreeMap::new();
    let mut wrong = Vec::new();
    let kdir = dir.join("kcov");
    let mut names: Vec<PathBuf> = fs::read_dir(&kdir)
        .map_err(|e| bad(format!("{}: {e}", kdir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    names.sort();
    for sdir in names {
        let suite = sdir.file_name().unwrap().to_string_lossy().into_owned();
        let entry = suites.entry(suite).or_default();
        for f in fs::read_dir(&sdir)? {
            let p = f?.path();
            if p.extension().and_then(|e| e.to_str()) != Some("pcs") {
                continue;
            }
            let t = read_trace(&p)?;
            let (h, w) = cov.place(&t);
            entry.0.extend(h);
            entry.1 += t.full;
            entry.2 += 1;
            wrong.extend(w);
        }
    }
    let mut md = String::new();
    writeln!(
        md,
        "# Kernel coverage of the fuzz and stress suites (KCOV)\n"
    )
    .unwrap();
    writeln!(
        md,
        "Basic blocks reached over blocks instrumented, per unit of code; each suite alone, then all \
         suites. A suite's traces that filled up between two drains make its figures a lower bound \
         (`full`).\n"
    )
    .unwrap();
    let mut head = String::from("| unit | blocks |");
    let mut rule = String::from("|---|---:|");
    for (s, (_, full, procs)) in &suites {
        write!(
            head,
            " {s} ({procs} proc{}{}) |",
            if *procs == 1 { "" } else { "s" },
            if *full > 0 {
                format!(", full {full}")
            } else {
                String::new()
            }
        )
        .unwrap();
        rule.push_str("---:|");
    }
    // The stress and race suites, which were all the project had before
    // the dmirror fuzz, together: what the fuzz and the later cases add is
    // the "all" column less this one.
    head.push_str(" stress and race suites | all |");
    rule.push_str("---:|---:|");
    writeln!(md, "{head}\n{rule}").unwrap();
    for (ui, u) in cov.units.iter().enumerate() {
        let n = u.sites.len();
        let pct = |k: usize| {
            if n == 0 {
                "-".to_string()
            } else {
                format!("{k} ({:.1}%)", 100.0 * k as f64 / n as f64)
            }
        };
        let mut row = format!("| {} | {n} |", u.name);
        let mut all = HashSet::new();
        let mut older = HashSet::new();
        for (name, (hits, _, _)) in &suites {
            let mine: HashSet<u64> = hits
                .iter()
                .filter(|(i, _)| *i == ui)
                .map(|(_, a)| *a)
                .collect();
            write!(row, " {} |", pct(mine.len())).unwrap();
            if name.starts_with("rvram-stress") || name.starts_with("hmm-race") {
                older.extend(mine.iter().copied());
            }
            all.extend(mine);
        }
        write!(row, " {} | {} |", pct(older.len()), pct(all.len())).unwrap();
        writeln!(md, "{row}").unwrap();
    }
    // Functions of the C files no suite entered: the gaps, by name.
    writeln!(md, "\n## Functions no suite entered\n").unwrap();
    for (ui, u) in cov
        .units
        .iter()
        .enumerate()
        .filter(|(_, u)| u.name.ends_with(".c"))
    {
        let reached: HashSet<u64> = suites
            .values()
            .flat_map(|(h, _, _)| h.iter())
            .filter(|(i, _)| *i == ui)
            .map(|(_, a)| *a)
            .collect();
        let cold: Vec<&str> = u
            .funcs
            .iter()
            .filter(|(s, e, _)| {
                u.sites.range(s + 1..=*e).next().is_some()
                    && !reached.iter().any(|a| s < a && a <= e)
            })
            .map(|(_, _, n)| n.as_str())
            .collect();
        writeln!(
            md,
            "- {}: {}",
            u.name,
            if cold.is_empty() {
                "none".into()
            } else {
                cold.join(", ")
            }
        )
        .unwrap();
    }
    let ok = wrong.is_empty() && !suites.is_empty();
    if !wrong.is_empty() {
        writeln!(
            md,
            "\n## Method check failed: {} PCs are no instrumented block\n",
            wrong.len()
        )
        .unwrap();
        for w in wrong.iter().take(20) {
            writeln!(md, "- {w}").unwrap();
        }
    }
    if suites.is_empty() {
        writeln!(md, "\nNo traces under {}.", kdir.display()).unwrap();
    }
    fs::write(dir.join("coverage.md"), &md)?;
    Ok((md, ok))
}
