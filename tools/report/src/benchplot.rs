// SPDX-License-Identifier: GPL-2.0

//! `rvram-report bench-plot DIR`: the alias benchmark of one guest run as a chart.
//!
//! `rvram-rdma-test --bench` (tests/rdma/src/bench/) prints its values as
//! `# bench PART_SIZE_PAGES_PLACEMENT_METRIC VALUE UNIT` lines into its TAP,
//! e.g. `# bench fault_4M_4k_alias_us_per_page 9.77 us`, where PART is
//! `fault` (the NIC's fault path: an ODP prefetch), `pipeline` (NIC RDMA
//! WRITE, then the GPU's MIGRATE_TO_DEV), `peer` (a second GPU reads the
//! target) or `bw` (bandwidth), and PLACEMENT is `ram`, `alias` (VRAM with
//! P2P aliases) or `migrate` (VRAM, the `p2p_alias` switch off). This reads
//! them from every TAP file of DIR/suites (make bench: the alias-bench
//! suite; make check: rdma-odp-alias) and draws `DIR/bench-alias.svg`:
//! grouped bars per target size and page kind, alias next to migration
//! next to RAM, for the fault path per page, the pipeline per page, the
//! pages copied between VRAM and system RAM, and the GPU peer's read.
//! The same numbers are printed as markdown tables, with the ratio of
//! migration to alias.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The placements, in bar order: (metric key, legend, colour).
pub const PLACEMENTS: [(&str, &str, &str); 3] = [
    ("ram", "system RAM", "#4e79a7"),
    ("alias", "VRAM, P2P alias", "#59a14f"),
    ("migrate", "VRAM, migration (Linux 7.3)", "#e15759"),
];

/// The benchmark's parts, as in metric names.
const PARTS: [&str; 4] = ["fault", "pipeline", "peer", "bw"];

/// Where a value was measured: part, target size (`4M`), page kind
/// (`4k`, `thp`) and placement key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cell {
    /// `fault`, `pipeline`, `peer` or `bw`.
    pub part: String,
    /// Target size as in the name, e.g. `64M`.
    pub size: String,
    /// `4k` or `thp`.
    pub pages: String,
    /// `ram`, `alias` or `migrate`.
    pub placement: String,
}

/// Every value of the benchmark found, and the context lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Data {
    /// Metric name (without the cell) -> value, per cell.
    pub values: BTreeMap<Cell, BTreeMap<String, f64>>,
    /// The `# bench: ...` lines, each once.
    pub context: Vec<String>,
}

/// Splits a metric name into its cell and metric:
/// `fault_4M_4k_alias_us_per_page` -> (fault, 4M, 4k, alias), `us_per_page`.
/// `None` for names of other formats (e.g. an older bench's).
pub fn split_name(name: &str) -> Option<(Cell, String)> {
    let mut it = name.splitn(5, '_');
    let (part, size, pages, placement, metric) =
        (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    if !PARTS.contains(&part)
        || !PLACEMENTS.iter().any(|p| p.0 == placement)
        || !matches!(pages, "4k" | "thp")
        || size_bytes(size).is_none()
        || metric.is_empty()
    {
        return None;
    }
    Some((
        Cell {
            part: part.to_owned(),
            size: size.to_owned(),
            pages: pages.to_owned(),
            placement: placement.to_owned(),
        },
        metric.to_owned(),
    ))
}

/// Bytes of a size as written in metric names: `4M`, `512K`, `4096`.
pub fn size_bytes(size: &str) -> Option<u64> {
    let (digits, shift) = match size.as_bytes().last()? {
        b'M' => (&size[..size.len() - 1], 20),
        b'K' => (&size[..size.len() - 1], 10),
        _ => (size, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// Adds the `# bench` lines of a TAP text to `data`.
pub fn parse(tap: &str, data: &mut Data) {
    for line in tap.lines() {
        if let Some(c) = line.strip_prefix("# bench: ") {
            if !data.context.iter().any(|have| have == c) {
                data.context.push(c.to_owned());
            }
        } else if let Some(rest) = line.strip_prefix("# bench ") {
            let mut it = rest.split_whitespace();
            let (Some(name), Some(value)) = (it.next(), it.next()) else {
                continue;
            };
            let (Some((cell, metric)), Ok(value)) = (split_name(name), value.parse::<f64>()) else {
                continue;
            };
            data.values.entry(cell).or_default().insert(metric, value);
        }
    }
}

/// One group of bars: a target size and page kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// E.g. `4 MiB 4k`.
    pub label: String,
    /// One value per [`PLACEMENTS`] entry.
    pub values: [Option<f64>; 3],
}

/// A chart panel: a title and its groups.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Title, with the unit.
    pub title: String,
    /// Which placements the part has (the peer part has no RAM bar).
    pub placements: [bool; 3],
    /// The groups, smallest target first.
    pub groups: Vec<Group>,
}

impl Panel {
    /// Whether any value is there.
    pub fn is_empty(&self) -> bool {
        self.groups
            .iter()
            .all(|g| g.values.iter().all(Option::is_none))
    }
}

/// `4M` -> `4 MiB`.
fn size_label(size: &str) -> String {
    match size_bytes(size) {
        Some(b) if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        Some(b) if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        _ => size.to_owned(),
    }
}

/// The (size, pages) pairs of `part`, smallest size first, 4k before thp.
fn group_keys(data: &Data, part: &str) -> Vec<(String, String)> {
    let mut keys: Vec<(String, String)> = Vec::new();
    for cell in data.values.keys().filter(|c| c.part == part) {
        let key = (cell.size.clone(), cell.pages.clone());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys.sort_by_key(|(size, pages)| (size_bytes(size), pages.clone()));
    keys
}

/// A panel of `part`, each bar `value(metrics of the cell)`.
fn panel(
    data: &Data,
    part: &str,
    title: &str,
    placements: [bool; 3],
    value: impl Fn(&BTreeMap<String, f64>) -> Option<f64>,
) -> Panel {
    let groups = group_keys(data, part)
        .into_iter()
        .map(|(size, pages)| {
            let mut values = [None; 3];
            for (i, (key, _, _)) in PLACEMENTS.iter().enumerate() {
                let cell = Cell {
                    part: part.to_owned(),
                    size: size.clone(),
                    pages: pages.clone(),
                    placement: (*key).to_owned(),
                };
                values[i] = data.values.get(&cell).and_then(&value);
            }
            Group {
                label: format!("{} {pages}", size_label(&size)),
                values,
            }
        })
        .collect();
    Panel {
        title: title.to_owned(),
        placements,
        groups,
    }
}

/// Pages copied between VRAM and RAM over the fault path and the
/// pipeline of a cell: `pages_to_ram + pages_to_vram` of both parts.
fn pages_copied(data: &Data) -> Panel {
    let mut p = panel(
        data,
        "fault",
        "Pages copied between VRAM and system RAM (fault path + pipeline)",
        [true; 3],
        |m| Some(m.get("pages_to_ram")? + m.get("pages_to_vram")?),
    );
    for group in &mut p.groups {
        for (i, (key, _, _)) in PLACEMENTS.iter().enumerate() {
            let Some((size, pages)) = group_key_of(&group.label, data) else {
                continue;
            };
            let cell = Cell {
                part: "pipeline".to_owned(),
                size,
                pages,
                placement: (*key).to_owned(),
            };
            let pipe = data
                .values
                .get(&cell)
                .and_then(|m| Some(m.get("pages_to_ram")? + m.get("pages_to_vram")?));
            group.values[i] = match (group.values[i], pipe) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
        }
    }
    p
}

/// The (size, pages) key of a group label made by [`panel`].
fn group_key_of(label: &str, data: &Data) -> Option<(String, String)> {
    data.values
        .keys()
        .map(|c| (c.size.clone(), c.pages.clone()))
        .find(|(size, pages)| format!("{} {pages}", size_label(size)) == label)
}

/// The chart's panels, in order; empty ones left out.
pub fn panels(data: &Data) -> Vec<Panel> {
    // The median over the bench's rounds where there is one.
    let per_page = |m: &BTreeMap<String, f64>| {
        m.get("us_per_page_median")
            .or_else(|| m.get("us_per_page"))
            .copied()
    };
    [
        panel(
            data,
            "fault",
            "NIC fault path (ODP prefetch), us per page",
            [true; 3],
            per_page,
        ),
        panel(
            data,
            "pipeline",
            "NIC RDMA WRITE + GPU MIGRATE_TO_DEV, us per page",
            [true; 3],
            per_page,
        ),
        pages_copied(data),
        panel(
            data,
            "peer",
            "GPU peer reads the target (HMM_DMIRROR_READ), us per page",
            [false, true, true],
            per_page,
        ),
    ]
    .into_iter()
    .filter(|p| !p.is_empty())
    .collect()
}

/// A value as a bar label: whole numbers (page counts) as such, others to
/// three significant digits or so.
fn label(v: f64) -> String {
    if (v == v.trunc() && v.abs() < 1e15) || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Layout of the chart.
const BAR_W: f64 = 46.0;
const GROUP_GAP: f64 = 30.0;
const LEFT: f64 = 20.0;
const PLOT_H: f64 = 150.0;
/// Room above a panel's plot area: its title, and the tallest bar's label.
const PLOT_TOP: f64 = 36.0;
/// Title above, group labels below a panel's plot area.
const PANEL_H: f64 = PLOT_TOP + PLOT_H + 46.0;

/// The chart: a legend, then one panel of grouped bars per entry of
/// `panels`, each scaled to its own largest value; a note on what the
/// numbers mean at the bottom.
pub fn svg(panels: &[Panel]) -> String {
    let groups = panels.iter().map(|p| p.groups.len()).max().unwrap_or(0);
    let group_w = 3.0 * BAR_W + GROUP_GAP;
    let width = (LEFT * 2.0 + groups as f64 * group_w).max(640.0);
    let height = 40.0 + panels.len() as f64 * PANEL_H + 30.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    for (i, (_, name, colour)) in PLACEMENTS.iter().enumerate() {
        let x = LEFT + i as f64 * 190.0;
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"12\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\
             <text x=\"{}\" y=\"21\">{}</text>",
            x + 14.0,
            esc(name)
        );
    }
    for (n, p) in panels.iter().enumerate() {
        let top = 40.0 + n as f64 * PANEL_H;
        let base = top + PLOT_TOP + PLOT_H;
        let max = p
            .groups
            .iter()
            .flat_map(|g| g.values.iter().flatten())
            .fold(0.0_f64, |a, &b| a.max(b));
        let _ = writeln!(
            s,
            "<text x=\"{LEFT}\" y=\"{}\" font-weight=\"bold\">{}</text>",
            top + 14.0,
            esc(&p.title)
        );
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>",
            LEFT + p.groups.len() as f64 * group_w
        );
        for (g, group) in p.groups.iter().enumerate() {
            let gx = LEFT + g as f64 * group_w + GROUP_GAP / 2.0;
            for (i, v) in group.values.iter().enumerate() {
                if !p.placements[i] {
                    continue;
                }
                let bx = gx + i as f64 * BAR_W;
                let Some(v) = *v else {
                    let _ = writeln!(s, "<text x=\"{bx}\" y=\"{}\">n/a</text>", base - 4.0);
                    continue;
                };
                let h = if max > 0.0 { v / max * PLOT_H } else { 0.0 };
                let _ = writeln!(
                    s,
                    "<rect x=\"{bx}\" y=\"{:.1}\" width=\"{}\" height=\"{h:.1}\" fill=\"{}\"/>\
                     <text x=\"{bx}\" y=\"{:.1}\" font-size=\"10\">{}</text>",
                    base - h,
                    BAR_W - 4.0,
                    PLACEMENTS[i].2,
                    base - h - 3.0,
                    label(v)
                );
            }
            let _ = writeln!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                gx + 1.5 * BAR_W,
                base + 16.0,
                esc(&group.label)
            );
        }
    }
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"{}\" font-size=\"10\">Times: QEMU TCG wall time (emulation \
         dominates). Page counts are what transfers to hardware.</text>",
        height - 10.0
    );
    s.push_str("</svg>\n");
    s
}

/// The panels as markdown tables, with migration / alias.
pub fn markdown(panels: &[Panel], context: &[String]) -> String {
    let mut out = String::new();
    for c in context {
        let _ = writeln!(out, "- {c}");
    }
    for p in panels {
        let _ = write!(out, "\n{}\n\n| target |", p.title);
        for (i, (_, name, _)) in PLACEMENTS.iter().enumerate() {
            if p.placements[i] {
                let _ = write!(out, " {name} |");
            }
        }
        out.push_str(" migration / alias |\n|---|");
        for _ in p.placements.iter().filter(|&&on| on) {
            out.push_str("---:|");
        }
        out.push_str("---:|\n");
        for g in &p.groups {
            let _ = write!(out, "| {} |", g.label);
            for (i, v) in g.values.iter().enumerate() {
                if p.placements[i] {
                    let _ = write!(out, " {} |", v.map_or_else(|| "-".to_owned(), label));
                }
            }
            let r = match (g.values[2], g.values[1]) {
                (Some(m), Some(a)) if a > 0.0 => format!("{:.1}x", m / a),
                (Some(m), Some(_)) if m > 0.0 => "alias: none".to_owned(),
                _ => "-".to_owned(),
            };
            let _ = writeln!(out, " {r} |");
        }
    }
    out
}

/// What `run` did.
#[derive(Debug, Clone, PartialEq)]
pub struct Plotted {
    /// The tables, for stdout.
    pub text: String,
    /// What was missing, one line each (for stderr).
    pub notes: Vec<String>,
    /// The SVG written.
    pub svg: PathBuf,
}

/// Reads every `*.tap` of DIR/suites (and DIR), writes DIR/bench-alias.svg.
/// Fails if no benchmark value is found; missing parts become notes.
pub fn run(dir: &Path) -> Result<Plotted, String> {
    let mut files = Vec::new();
    let mut notes = Vec::new();
    for d in [dir.join("suites"), dir.to_owned()] {
        match std::fs::read_dir(&d) {
            Ok(entries) => {
                let mut taps: Vec<PathBuf> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "tap"))
                    .collect();
                taps.sort();
                files.extend(taps);
            }
            Err(e) => notes.push(format!("{}: {e}", d.display())),
        }
    }
    let mut data = Data::default();
    let mut sources = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let before = data.values.len();
        parse(&text, &mut data);
        if data.values.len() > before || text.contains("# bench ") {
            sources.push(f.display().to_string());
        }
    }
    let panels = panels(&data);
    if panels.is_empty() {
        let mut why = format!(
            "no values of the alias benchmark (`# bench fault_...` lines of rvram-rdma-test \
             --bench) in {} TAP file(s) of {}/suites",
            files.len(),
            dir.display()
        );
        for n in &notes {
            let _ = write!(why, "; {n}");
        }
        return Err(why);
    }
    for part in PARTS {
        if !data.values.keys().any(|c| c.part == part) {
            notes.push(format!("no `{part}` values (that part did not run)"));
        }
    }
    let svg_path = dir.join("bench-alias.svg");
    std::fs::write(&svg_path, svg(&panels))
        .map_err(|e| format!("write {}: {e}", svg_path.display()))?;
    let mut text = format!(
        "# Alias benchmark: {} (from {})\n",
        svg_path.display(),
        sources.join(", ")
    );
    text.push_str(&markdown(&panels, &data.context));
    Ok(Plotted {
        text,
        notes,
        svg: svg_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAP: &str = "TAP version 13\n\
        # bench: kernel 7.3, device rxe0\n\
        # bench fault_4M_4k_ram_us_per_page 1.50 us\n\
        # bench fault_4M_4k_alias_us_per_page 10.00 us\n\
        # bench fault_4M_4k_migrate_us_per_page 400.00 us\n\
        # bench fault_4M_4k_alias_pages_to_ram 0 pages\n\
        # bench fault_4M_4k_alias_pages_to_vram 0 pages\n\
        # bench fault_4M_4k_migrate_pages_to_ram 1024 pages\n\
        # bench fault_4M_4k_migrate_pages_to_vram 0 pages\n\
        # bench pipeline_4M_4k_migrate_pages_to_ram 1024 pages\n\
        # bench pipeline_4M_4k_migrate_pages_to_vram 1024 pages\n\
        # bench pipeline_4M_4k_alias_pages_to_ram 0 pages\n\
        # bench pipeline_4M_4k_alias_pages_to_vram 0 pages\n\
        # bench pipeline_4M_4k_alias_us_per_page 50.0 us\n\
        # bench fault_64M_thp_alias_us_per_page 2.00 us\n\
        # bench fault_64M_4k_alias_us_per_page 3.00 us\n\
        # bench peer_4M_4k_alias_us_per_page 20.0 us\n\
        # bench peer_4M_4k_migrate_us_per_page 200.0 us\n\
        # bench ram_first_read_median 12.5 us\n\
        # bench fault_4M_2m_alias_us_per_page 1 us\n\
        ok 1 - bench 4 MiB 4k alias\n1..1\n";

    fn data() -> Data {
        let mut d = Data::default();
        parse(TAP, &mut d);
        d
    }

    #[test]
    fn names_split_into_cell_and_metric() {
        let (cell, metric) = split_name("fault_64M_thp_migrate_kernel_us_per_fault").unwrap();
        assert_eq!(
            cell,
            Cell {
                part: "fault".into(),
                size: "64M".into(),
                pages: "thp".into(),
                placement: "migrate".into(),
            }
        );
        assert_eq!(metric, "kernel_us_per_fault");
        for bad in [
            "ram_first_read_median",
            "fault_4M_4k_alias",
            "fault_4M_2m_alias_ms",
            "fault_4X_4k_alias_ms",
            "other_4M_4k_alias_ms",
            "fault_4M_4k_vram_ms",
        ] {
            assert_eq!(split_name(bad), None, "{bad}");
        }
        assert_eq!(size_bytes("4M"), Some(4 << 20));
        assert_eq!(size_bytes("512K"), Some(512 << 10));
        assert_eq!(size_bytes("4096"), Some(4096));
        assert_eq!(size_bytes("M"), None);
    }

    #[test]
    fn parses_values_and_context() {
        let d = data();
        assert_eq!(d.context, ["kernel 7.3, device rxe0"]);
        // The old first-touch name and the unknown page kind are ignored.
        assert!(d.values.keys().all(|c| c.pages != "2m"));
        let alias = Cell {
            part: "fault".into(),
            size: "4M".into(),
            pages: "4k".into(),
            placement: "alias".into(),
        };
        assert_eq!(d.values[&alias]["us_per_page"], 10.0);
        let mut again = d.clone();
        parse(TAP, &mut again);
        assert_eq!(again.context.len(), 1);
    }

    #[test]
    fn panels_group_by_size_and_pages() {
        let p = panels(&data());
        let titles: Vec<&str> = p.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "NIC fault path (ODP prefetch), us per page",
                "NIC RDMA WRITE + GPU MIGRATE_TO_DEV, us per page",
                "Pages copied between VRAM and system RAM (fault path + pipeline)",
                "GPU peer reads the target (HMM_DMIRROR_READ), us per page",
            ]
        );
        let labels: Vec<&str> = p[0].groups.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(labels, ["4 MiB 4k", "64 MiB 4k", "64 MiB thp"]);
        assert_eq!(p[0].groups[0].values, [Some(1.5), Some(10.0), Some(400.0)]);
        assert_eq!(p[0].groups[2].values, [None, Some(2.0), None]);
        // Fault path + pipeline: migration copies each page three times.
        assert_eq!(p[2].groups[0].values, [None, Some(0.0), Some(3072.0)]);
        assert_eq!(p[3].placements, [false, true, true]);
        assert_eq!(p[3].groups[0].values, [None, Some(20.0), Some(200.0)]);
    }

    #[test]
    fn svg_scales_each_panel_to_its_largest() {
        let s = svg(&panels(&data()));
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        // 400 us is the fault panel's largest: full height; 10 us a 40th.
        assert!(
            s.contains("height=\"150.0\" fill=\"#e15759\"/><text"),
            "{s}"
        );
        assert!(s.contains("height=\"3.8\" fill=\"#59a14f\""), "{s}");
        // Zero pages copied with the alias: a bar of no height, labelled.
        assert!(s.contains("height=\"0.0\" fill=\"#59a14f\""), "{s}");
        assert!(s.contains(">n/a<"));
        assert!(s.contains("64 MiB thp"));
        assert!(s.contains("QEMU TCG"));
        // The peer panel draws no RAM bar, not even n/a.
        let peer = s.split("GPU peer reads").nth(1).unwrap_or_default();
        assert!(!peer.contains("n/a"), "{peer}");
        assert!(!peer.contains("fill=\"#4e79a7\""), "{peer}");
    }

    #[test]
    fn markdown_tables_have_ratios() {
        let md = markdown(&panels(&data()), &["ctx".to_owned()]);
        assert!(md.starts_with("- ctx\n"));
        assert!(
            md.contains("| 4 MiB 4k | 1.50 | 10 | 400 | 40.0x |"),
            "{md}"
        );
        assert!(
            md.contains("| 4 MiB 4k | - | 0 | 3072 | alias: none |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| target | VRAM, P2P alias | VRAM, migration (Linux 7.3) | migration / alias |"
            ),
            "{md}"
        );
        assert!(md.contains("| 4 MiB 4k | 20 | 200 | 10.0x |"), "{md}");
        assert_eq!(label(2.5), "2.50");
        assert_eq!(label(12.25), "12.2");
        assert_eq!(label(390.62), "391");
    }

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rvram-benchplot-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn run_writes_the_chart_or_says_what_is_missing() {
        let empty = temp_dir("empty");
        let err = run(&empty).unwrap_err();
        assert!(err.contains("no values of the alias benchmark"), "{err}");
        assert!(err.contains("suites"), "{err}");
        assert!(!empty.join("bench-alias.svg").exists());

        let dir = temp_dir("full");
        std::fs::create_dir_all(dir.join("suites")).unwrap();
        std::fs::write(dir.join("suites/rdma-bench.tap"), TAP).unwrap();
        std::fs::write(dir.join("suites/other.tap"), "ok 1 - x\n1..1\n").unwrap();
        let out = run(&dir).unwrap();
        assert_eq!(out.svg, dir.join("bench-alias.svg"));
        assert!(std::fs::read_to_string(&out.svg)
            .unwrap()
            .starts_with("<svg"));
        assert!(out.text.contains("rdma-bench.tap"), "{}", out.text);
        assert!(!out.text.contains("other.tap"), "{}", out.text);
        assert_eq!(out.notes, ["no `bw` values (that part did not run)"]);
        let _ = std::fs::remove_dir_all(&empty);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
