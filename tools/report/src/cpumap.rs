// SPDX-License-Identifier: GPL-2.0

//! The CPU-mapping benchmark of a run as a chart: `DIR/bench-cpumap.svg`.
//!
//! `rvram-cpumap-bench` (tests/vm/src/rvram-cpumap-bench.c) prints one
//! `# cpumap SIZE TO_VRAM_NS FROM_VRAM_NS TO_RAM_NS FROM_RAM_NS` line per
//! copy size. This draws the four series as lines of copy time against
//! size, both axes logarithmic, so that small-copy latency and large-copy
//! bandwidth show on one chart.

use std::fmt::Write as _;

/// One size's times, in ns: to VRAM, from VRAM, to RAM, from RAM.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// Bytes per copy.
    pub size: u64,
    /// Median ns of one copy, in [`SERIES`] order.
    pub ns: [f64; 4],
}

/// The series, in line order: (legend, colour, dashed).
pub const SERIES: [(&str, &str, bool); 4] = [
    ("CPU -> VRAM (mapping)", "#e15759", false),
    ("VRAM -> CPU (mapping)", "#4e79a7", false),
    ("CPU -> RAM", "#e15759", true),
    ("RAM -> CPU", "#4e79a7", true),
];

/// The `# cpumap` lines of a TAP text, in order; malformed ones skipped.
pub fn parse(tap: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for line in tap.lines() {
        let Some(rest) = line.strip_prefix("# cpumap ") else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() != 5 {
            continue;
        }
        let Ok(size) = f[0].parse::<u64>() else {
            continue;
        };
        let ns: Vec<f64> = f[1..].iter().filter_map(|v| v.parse().ok()).collect();
        if size == 0 || ns.len() != 4 || ns.iter().any(|v| !v.is_finite() || *v <= 0.0) {
            continue;
        }
        rows.push(Row {
            size,
            ns: [ns[0], ns[1], ns[2], ns[3]],
        });
    }
    rows
}

/// Human size: `4 B`, `16 KiB`, `4 MiB`.
fn size_label(b: u64) -> String {
    match b {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

const W: f64 = 640.0;
const H: f64 = 360.0;
const L: f64 = 70.0;
const R: f64 = 20.0;
const T: f64 = 50.0;
const B: f64 = 50.0;

/// The chart of `rows` (at least one), time per copy against size.
pub fn svg(rows: &[Row]) -> String {
    let (x0, x1) = (
        (rows.iter().map(|r| r.size).min().unwrap_or(1) as f64).log10(),
        (rows.iter().map(|r| r.size).max().unwrap_or(1) as f64).log10(),
    );
    let all = rows.iter().flat_map(|r| r.ns);
    let lo = all.clone().fold(f64::INFINITY, f64::min).log10().floor();
    let hi = all.fold(0.0, f64::max).log10().ceil().max(lo + 1.0);
    let xs = |s: u64| L + ((s as f64).log10() - x0) / (x1 - x0).max(1e-9) * (W - L - R);
    let ys = |ns: f64| T + (hi - ns.log10()) / (hi - lo) * (H - T - B);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    );
    for (i, (name, colour, dashed)) in SERIES.iter().enumerate() {
        let x = L + i as f64 * 140.0;
        let dash = if *dashed {
            " stroke-dasharray=\"4 3\""
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "<line x1=\"{x}\" y1=\"16\" x2=\"{}\" y2=\"16\" stroke=\"{colour}\" \
             stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"20\">{name}</text>",
            x + 16.0,
            x + 20.0,
            name = name.replace('>', "&gt;")
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{L}\" y=\"38\">ns per memcpy(), median (log scale) against copy size</text>"
    );
    let mut e = lo;
    while e <= hi {
        let y = ys(10f64.powf(e));
        let _ = writeln!(
            s,
            "<line x1=\"{L}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - R,
            L - 6.0,
            y + 4.0,
            10f64.powf(e)
        );
        e += 1.0;
    }
    for r in rows {
        let x = xs(r.size);
        let _ = writeln!(
            s,
            "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            H - B + 16.0,
            size_label(r.size)
        );
    }
    for (i, (_, colour, dashed)) in SERIES.iter().enumerate() {
        let pts: Vec<String> = rows
            .iter()
            .map(|r| format!("{:.1},{:.1}", xs(r.size), ys(r.ns[i])))
            .collect();
        let dash = if *dashed {
            " stroke-dasharray=\"4 3\""
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>",
            pts.join(" ")
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{L}\" y=\"{}\">QEMU TCG: the BAR is host RAM; compare code paths, not PCIe.</text>\n</svg>",
        H - 12.0
    );
    s
}

/// Reads the `# cpumap` lines of every `*.tap` in DIR/suites and writes
/// DIR/bench-cpumap.svg: `Ok(None)` when the run had none.
pub fn run(dir: &std::path::Path) -> Result<Option<std::path::PathBuf>, String> {
    let suites = dir.join("suites");
    let Ok(entries) = std::fs::read_dir(&suites) else {
        return Ok(None);
    };
    let mut taps: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "tap"))
        .collect();
    taps.sort();
    let mut rows = Vec::new();
    for t in &taps {
        let text = std::fs::read_to_string(t).map_err(|e| format!("{}: {e}", t.display()))?;
        rows.extend(parse(&text));
    }
    if rows.is_empty() {
        return Ok(None);
    }
    let path = dir.join("bench-cpumap.svg");
    std::fs::write(&path, svg(&rows)).map_err(|e| format!("write {}: {e}", path.display()))?;
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAP: &str = "ok 1 setup\n# cpumap 4 10.0 12.0 5.0 6.0\n# cpumap 16 oops\n\
                       # cpumap 4194304 1000000 2000000 900000 950000\n# cpumap 64 0 1 1 1\n";

    #[test]
    fn parse_keeps_well_formed_positive_rows() {
        let rows = parse(TAP);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].size, 4);
        assert_eq!(rows[0].ns, [10.0, 12.0, 5.0, 6.0]);
        assert_eq!(rows[1].size, 4 << 20);
    }

    #[test]
    fn svg_has_one_line_per_series_and_every_size() {
        let s = svg(&parse(TAP));
        assert_eq!(s.matches("<polyline").count(), 4);
        assert!(s.contains(">4 B<") && s.contains(">4 MiB<"));
        assert!(s.contains("CPU -&gt; VRAM"));
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(4), "4 B");
        assert_eq!(size_label(16 << 10), "16 KiB");
        assert_eq!(size_label(4 << 20), "4 MiB");
        assert_eq!(size_label(1000), "1000 B");
    }
}
