// SPDX-License-Identifier: GPL-2.0

//! `rvram bench-plot DIR`: the RDMA ODP benchmark of one guest run, side by
//! side.
//!
//! `rvram-rdma-test --bench` prints `# bench NAME VALUE UNIT` lines into
//! its TAP. The `alias` run measures the target in system RAM and in VRAM
//! with P2P aliases, the `migrate` run (aliases disabled) in VRAM with
//! migration. This merges the three placements of the first-touch latency
//! and of the bandwidths into `bench-rdma.md` (with the ratios the project
//! targets) and `bench-rdma.svg` (bar charts), in DIR.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

/// The three placements, in column order: (heading, TAP file, metric prefix).
const PLACEMENTS: [(&str, &str, &str); 3] = [
    ("system RAM", "rdma-odp-alias.tap", "ram_"),
    ("VRAM, P2P alias", "rdma-odp-alias.tap", "vram_"),
    ("VRAM, migration", "rdma-odp-migrate.tap", "vram_"),
];

/// The metrics compared: (name without prefix, heading, unit).
const METRICS: [(&str, &str, &str); 3] = [
    ("first_read_median", "first touch per page (median)", "us"),
    ("write_bw", "RDMA WRITE bandwidth", "MB/s"),
    ("read_bw", "RDMA READ bandwidth", "MB/s"),
];

/// `NAME -> value` of the `# bench` lines of a TAP text, and its context.
pub fn parse(tap: &str) -> (HashMap<String, f64>, Option<String>) {
    let mut values = HashMap::new();
    let mut context = None;
    for line in tap.lines() {
        if let Some(c) = line.strip_prefix("# bench: ") {
            context = Some(c.to_owned());
        } else if let Some(rest) = line.strip_prefix("# bench ") {
            let mut it = rest.split_whitespace();
            if let (Some(name), Some(value)) = (it.next(), it.next()) {
                if let Ok(v) = value.parse() {
                    values.insert(name.to_owned(), v);
                }
            }
        }
    }
    (values, context)
}

/// The values of every metric, per placement (`None`: not measured).
pub type Table = Vec<[Option<f64>; 3]>;

/// Collects [`METRICS`] for [`PLACEMENTS`] from the TAP texts by file name.
pub fn table(taps: &HashMap<&str, (HashMap<String, f64>, Option<String>)>) -> Table {
    METRICS
        .iter()
        .map(|(metric, _, _)| {
            let mut row = [None; 3];
            for (i, (_, file, prefix)) in PLACEMENTS.iter().enumerate() {
                row[i] = taps
                    .get(file)
                    .and_then(|(v, _)| v.get(&format!("{prefix}{metric}")).copied());
            }
            row
        })
        .collect()
}

fn cell(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".to_owned(),
    }
}

/// The markdown report.
pub fn markdown(t: &Table, contexts: &[String]) -> String {
    let mut out = String::from(
        "# RDMA ODP on Soft-RoCE: system RAM, VRAM with P2P alias, VRAM with migration\n\n",
    );
    for c in contexts {
        let _ = writeln!(out, "- {c}");
    }
    out.push_str("\n| metric | unit |");
    for (h, _, _) in PLACEMENTS {
        let _ = write!(out, " {h} |");
    }
    out.push_str(" ratio |\n|---|---|---:|---:|---:|---|\n");
    for (i, (_, heading, unit)) in METRICS.iter().enumerate() {
        let [a, b, c] = t[i];
        // First touch: how much faster the alias is than migration (target
        // >= 10x); bandwidth: alias relative to system RAM (target >= 0.9x).
        let r = if i == 0 {
            format!("migration / alias {}", ratio(c, b))
        } else {
            format!("alias / RAM {}", ratio(b, a))
        };
        let _ = writeln!(
            out,
            "| {heading} | {unit} | {} | {} | {} | {r} |",
            cell(a),
            cell(b),
            cell(c)
        );
    }
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One bar chart per metric, side by side.
pub fn svg(t: &Table) -> String {
    const W: f64 = 260.0;
    const H: f64 = 220.0;
    const TOP: f64 = 40.0;
    const BOTTOM: f64 = 50.0;
    const COLORS: [&str; 3] = ["#4e79a7", "#59a14f", "#e15759"];
    let width = W * METRICS.len() as f64 + 20.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{}\" \
         font-family=\"sans-serif\" font-size=\"11\">",
        H + 30.0
    );
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    for (i, (name, col)) in PLACEMENTS.iter().map(|p| p.0).zip(COLORS).enumerate() {
        let x = 10.0 + i as f64 * 150.0;
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{col}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            H + 12.0,
            x + 14.0,
            H + 21.0,
            esc(name)
        );
    }
    for (m, (_, heading, unit)) in METRICS.iter().enumerate() {
        let x0 = 10.0 + m as f64 * W;
        let max = t[m].iter().flatten().fold(0.0_f64, |a, &b| a.max(b));
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"16\" font-weight=\"bold\">{} ({})</text>",
            x0,
            esc(heading),
            esc(unit)
        );
        let plot_h = H - TOP - BOTTOM + 30.0;
        let base = TOP + plot_h;
        let _ = writeln!(
            s,
            "<line x1=\"{x0}\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\" stroke=\"black\"/>",
            x0 + W - 30.0
        );
        for (p, v) in t[m].iter().enumerate() {
            let bx = x0 + 10.0 + p as f64 * 75.0;
            let Some(v) = v else {
                let _ = writeln!(s, "<text x=\"{bx}\" y=\"{}\">n/a</text>", base - 4.0);
                continue;
            };
            let h = if max > 0.0 { v / max * plot_h } else { 0.0 };
            let _ = writeln!(
                s,
                "<rect x=\"{bx}\" y=\"{:.1}\" width=\"55\" height=\"{h:.1}\" fill=\"{}\"/>\
                 <text x=\"{bx}\" y=\"{:.1}\">{v:.1}</text>",
                base - h,
                COLORS[p],
                base - h - 4.0
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// Reads DIR/suites/rdma-odp-{alias,migrate}.tap and writes
/// DIR/bench-rdma.md and DIR/bench-rdma.svg; returns the markdown.
pub fn run(dir: &Path) -> std::io::Result<String> {
    let mut taps = HashMap::new();
    let mut contexts = Vec::new();
    for file in ["rdma-odp-alias.tap", "rdma-odp-migrate.tap"] {
        let text = std::fs::read_to_string(dir.join("suites").join(file))?;
        let parsed = parse(&text);
        if let Some(c) = &parsed.1 {
            contexts.push(c.clone());
        }
        taps.insert(file, parsed);
    }
    let t = table(&taps);
    if t.iter().all(|row| row.iter().all(Option::is_none)) {
        return Err(std::io::Error::other(
            "no `# bench` values in the RDMA suites",
        ));
    }
    let md = markdown(&t, &contexts);
    std::fs::write(dir.join("bench-rdma.md"), &md)?;
    std::fs::write(dir.join("bench-rdma.svg"), svg(&t))?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALIAS: &str = "ok 1 x\n# bench: device rxe0, alias Y\n\
        # bench ram_first_read_median 100.5 us\n# bench ram_write_bw 2.0 MB/s\n\
        # bench ram_read_bw 4.0 MB/s\n# bench vram_first_read_median 50.0 us\n\
        # bench vram_write_bw 1.0 MB/s\n# bench vram_read_bw 4.0 MB/s\n\
        # bench vram_first_read_alias_grants 1024 grants\n";
    const MIGRATE: &str = "# bench: device rxe0, alias N\n\
        # bench ram_first_read_median 99.0 us\n\
        # bench vram_first_read_median 500.0 us\n# bench vram_write_bw 0.5 MB/s\n";

    fn both() -> HashMap<&'static str, (HashMap<String, f64>, Option<String>)> {
        HashMap::from([
            ("rdma-odp-alias.tap", parse(ALIAS)),
            ("rdma-odp-migrate.tap", parse(MIGRATE)),
        ])
    }

    #[test]
    fn parses_values_and_context() {
        let (v, c) = parse(ALIAS);
        assert_eq!(c.as_deref(), Some("device rxe0, alias Y"));
        assert_eq!(v["ram_first_read_median"], 100.5);
        assert_eq!(v["vram_first_read_alias_grants"], 1024.0);
        assert!(!v.contains_key("x"));
    }

    #[test]
    fn placements_come_from_the_right_run() {
        let t = table(&both());
        // RAM and alias from the alias run; migration from the migrate run.
        assert_eq!(t[0], [Some(100.5), Some(50.0), Some(500.0)]);
        assert_eq!(t[1], [Some(2.0), Some(1.0), Some(0.5)]);
        assert_eq!(t[2], [Some(4.0), Some(4.0), None]);
    }

    #[test]
    fn markdown_has_the_ratios() {
        let md = markdown(&table(&both()), &["ctx".to_owned()]);
        assert!(md.contains("| first touch per page (median) | us | 100.5 | 50.0 | 500.0 | migration / alias 10.00x |"));
        assert!(
            md.contains("| RDMA WRITE bandwidth | MB/s | 2.0 | 1.0 | 0.5 | alias / RAM 0.50x |")
        );
        assert!(md.contains("| RDMA READ bandwidth | MB/s | 4.0 | 4.0 | - | alias / RAM 1.00x |"));
        assert!(md.contains("- ctx"));
    }

    #[test]
    fn svg_scales_bars_to_the_largest() {
        let s = svg(&table(&both()));
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        // The largest first-touch value gets the full plot height (160).
        assert!(s.contains("height=\"160.0\" fill=\"#e15759\""));
        // 50 of 500: a tenth.
        assert!(s.contains("height=\"16.0\" fill=\"#59a14f\""));
        assert!(s.contains(">n/a<"));
    }
}
