//! A traced run drawn as a Gantt chart in standalone SVG (behind the `std` feature): what
//! `npu-sim trace --svg` writes.
//!
//! # What it shows
//!
//! One lane per execution unit (labelled `unit N`, with the unit's declared name when it has
//! one), one for the DMA queue and one for the CPU, over the run's cycles: each traced job is
//! a bar from its start to its end, coloured by operator family (transfers grey; a failed job
//! outlined in red), with a tooltip (`<title>`) giving what it was, its cycles and its span.
//! Beneath, on the same cycle axis, the arena's occupancy ([`occupancy`](mod@crate::occupancy))
//! as a step area in bytes, with its peak marked and the arena's size as a dashed line; last,
//! a legend of the families drawn.
//!
//! The cycle axis starts at the run's first cycle (the first traced job's start), which the
//! subtitle gives as an absolute cycle; tooltips and ticks count from it.
//!
//! # Output
//!
//! [`svg`] is a pure function of the [`Chart`]: the same trace gives the same bytes (no
//! clock, no randomness, no hash order; coordinates are printed with two decimals). The
//! document stands alone (`xmlns`, `width`, `height` and `viewBox` on the root, no external
//! style or script), so a browser opens it as a file or inlines it in a page. Text from the
//! trace and the caller (the title, unit names) is escaped.

use std::fmt::Write as _;

use npu_compute::hal::{Cycles, Space};
use npu_compute::ops::{DType, OpKind};

use crate::occupancy::{occupancy, Occupancy};
use crate::{Lane, TraceEntry, TraceKind, TraceRegions};

/// What to draw.
#[derive(Clone, Copy, Debug)]
pub struct Chart<'a> {
    /// The heading (the model's file name, say).
    pub title: &'a str,
    /// The traced jobs (CPU work included) with their regions, in any order.
    pub jobs: &'a [(TraceEntry, TraceRegions)],
    /// Each execution unit's name, by index; an empty name labels the unit by its index only.
    /// Units the trace uses beyond these get lanes too.
    pub units: &'a [&'a str],
    /// Bytes of device memory (the arena), drawn as a line over the occupancy.
    pub arena_bytes: u64,
}

/// The figures a chart shows, for a one-line summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Figures {
    /// The run's first cycle (the first job's start).
    pub start: Cycles,
    /// Cycles from the first job's start to the last job's end.
    pub makespan: Cycles,
    /// Each lane, in the chart's order, with the cycles it was busy (covered by a job).
    pub busy: Vec<(Lane, Cycles)>,
    /// The arena's occupancy.
    pub occupancy: Occupancy,
}

/// The lanes of a chart, top to bottom: the units (`units`, or more if the trace uses more),
/// then DMA, then the CPU.
pub fn lanes(jobs: &[(TraceEntry, TraceRegions)], units: usize) -> Vec<Lane> {
    let used = jobs
        .iter()
        .filter_map(|(e, _)| match e.lane() {
            Lane::Unit(n) => Some(usize::from(n) + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let units = units.max(used).min(usize::from(u8::MAX) + 1);
    (0..units)
        .filter_map(|n| u8::try_from(n).ok().map(Lane::Unit))
        .chain([Lane::Dma, Lane::Cpu])
        .collect()
}

/// A lane's label: `unit N` (with ` (name)` when `units` names it), `DMA` or `CPU`.
pub fn lane_label(lane: Lane, units: &[&str]) -> String {
    match lane {
        Lane::Unit(n) => match units.get(usize::from(n)).filter(|name| !name.is_empty()) {
            Some(name) => format!("unit {n} ({name})"),
            None => format!("unit {n}"),
        },
        Lane::Dma => "DMA".into(),
        Lane::Cpu => "CPU".into(),
    }
}

/// The chart's figures: makespan, busy cycles per lane, occupancy.
pub fn figures(chart: &Chart<'_>) -> Figures {
    let start = chart.jobs.iter().map(|(e, _)| e.start).min().unwrap_or(0);
    let end = chart.jobs.iter().map(|(e, _)| e.end).max().unwrap_or(start);
    let busy = lanes(chart.jobs, chart.units.len())
        .into_iter()
        .map(|lane| (lane, busy_cycles(chart.jobs, lane)))
        .collect();
    Figures {
        start,
        makespan: end - start,
        busy,
        occupancy: occupancy(chart.jobs),
    }
}

/// Cycles covered by at least one of `lane`'s jobs.
fn busy_cycles(jobs: &[(TraceEntry, TraceRegions)], lane: Lane) -> Cycles {
    let mut spans: Vec<(Cycles, Cycles)> = jobs
        .iter()
        .filter(|(e, _)| e.lane() == lane)
        .map(|(e, _)| (e.start, e.end))
        .collect();
    spans.sort_unstable();
    let (mut busy, mut reach) = (0, 0);
    for (start, end) in spans {
        let start = start.max(reach);
        if end > start {
            busy += end - start;
            reach = end;
        }
    }
    busy
}

// Layout, in SVG user units (pixels at 100 %).
const WIDTH: f64 = 1200.0;
const LEFT: f64 = 170.0;
const RIGHT: f64 = 40.0;
const TOP: f64 = 64.0;
const LANE_HEIGHT: f64 = 26.0;
const LANE_GAP: f64 = 8.0;
const OCCUPANCY_HEIGHT: f64 = 160.0;
const LEGEND_ITEM_WIDTH: f64 = 170.0;
const LEGEND_ROW_HEIGHT: f64 = 20.0;
const TRANSFER_COLOUR: &str = "#9aa0a6";
const FAILED_COLOUR: &str = "#d93025";

/// The chart as a standalone SVG document.
pub fn svg(chart: &Chart<'_>) -> String {
    let figures = figures(chart);
    let lanes = lanes(chart.jobs, chart.units.len());
    let t0 = figures.start;
    let span = figures.makespan.max(1);
    let plot = WIDTH - LEFT - RIGHT;
    let x = |t: Cycles| LEFT + (t.saturating_sub(t0)) as f64 * plot / span as f64;
    let lane_top = |i: usize| TOP + i as f64 * (LANE_HEIGHT + LANE_GAP);
    let lanes_bottom = lane_top(lanes.len()) - LANE_GAP;
    let occupancy_top = lanes_bottom + 72.0;
    let occupancy_bottom = occupancy_top + OCCUPANCY_HEIGHT;
    let legend = legend_items(chart.jobs);
    let per_row = ((WIDTH - 40.0) / LEGEND_ITEM_WIDTH).floor().max(1.0) as usize;
    let legend_top = occupancy_bottom + 56.0;
    let height = legend_top + legend.len().div_ceil(per_row) as f64 * LEGEND_ROW_HEIGHT + 16.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" font-family="sans-serif" font-size="12">"#,
        h = num(height)
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r#"<text x="20" y="24" font-size="16" font-weight="bold">{}</text>"#,
        escape(chart.title)
    );
    let busy = figures
        .busy
        .iter()
        .map(|&(lane, cycles)| format!("{} {cycles}", lane_label(lane, chart.units)))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        s,
        r##"<text x="20" y="44" fill="#444444">makespan {} cycles from cycle {t0}; busy cycles: {}; peak occupancy {} B</text>"##,
        figures.makespan,
        escape(&busy),
        figures.occupancy.peak_bytes
    );

    // Lanes and their jobs.
    for (i, &lane) in lanes.iter().enumerate() {
        let top = lane_top(i);
        let label = lane_label(lane, chart.units);
        let fill = if i % 2 == 0 { "#f4f6f8" } else { "#eceff2" };
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="{}" height="{LANE_HEIGHT}" fill="{fill}"/>"#,
            num(LEFT),
            num(top),
            num(plot)
        );
        let _ = writeln!(
            s,
            r#"<text class="lane-label" data-lane="{}" x="{}" y="{}" text-anchor="end" dominant-baseline="middle">{}</text>"#,
            escape(&label),
            num(LEFT - 10.0),
            num(top + LANE_HEIGHT / 2.0),
            escape(&label)
        );
        let mut jobs: Vec<&TraceEntry> = chart
            .jobs
            .iter()
            .map(|(e, _)| e)
            .filter(|e| e.lane() == lane)
            .collect();
        jobs.sort_by_key(|e| (e.start, e.end, e.fence));
        for e in jobs {
            job(&mut s, e, lane, chart.units, t0, x(e.start), x(e.end), top);
        }
    }
    axis(&mut s, lanes_bottom + 6.0, t0, figures.makespan, &x);

    occupancy_chart(
        &mut s,
        &figures,
        chart.arena_bytes,
        occupancy_top,
        &x,
        x(t0 + figures.makespan),
    );
    axis(&mut s, occupancy_bottom, t0, figures.makespan, &x);

    for (i, (name, colour)) in legend.iter().enumerate() {
        let lx = 20.0 + (i % per_row) as f64 * LEGEND_ITEM_WIDTH;
        let ly = legend_top + (i / per_row) as f64 * LEGEND_ROW_HEIGHT;
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="12" height="12" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
            num(lx),
            num(ly),
            num(lx + 18.0),
            num(ly + 10.5),
            escape(name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// One job's bar, its tooltip, and its family's name inside when it fits.
#[allow(clippy::too_many_arguments)] // the bar's geometry
fn job(
    s: &mut String,
    e: &TraceEntry,
    lane: Lane,
    units: &[&str],
    t0: Cycles,
    x0: f64,
    x1: f64,
    top: f64,
) {
    let (what, colour) = match e.kind {
        TraceKind::Transfer { from, to, bytes } => (
            format!("transfer {}→{} {bytes} B", space(from), space(to)),
            TRANSFER_COLOUR.to_string(),
        ),
        TraceKind::Compute { op, dtype } | TraceKind::Cpu { op, dtype } => {
            (format!("{op:?} {}", dtype_name(dtype)), colour_of(op))
        }
    };
    let failed = match e.failure {
        Some(code) => format!(", failed (code {code})"),
        None => String::new(),
    };
    let title = format!(
        "{what} on {}: {} cycles, {}–{}{failed}",
        lane_label(lane, units),
        e.end - e.start,
        e.start - t0,
        e.end - t0
    );
    let width = (x1 - x0).max(0.5);
    let stroke = if e.failure.is_some() {
        format!(r#" stroke="{FAILED_COLOUR}" stroke-width="2""#)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        r#"<rect class="job" x="{}" y="{}" width="{}" height="{}" fill="{colour}"{stroke}><title>{}</title></rect>"#,
        num(x0),
        num(top + 3.0),
        num(width),
        num(LANE_HEIGHT - 6.0),
        escape(&title)
    );
    let name = match e.kind {
        TraceKind::Transfer { .. } => String::new(),
        TraceKind::Compute { op, .. } | TraceKind::Cpu { op, .. } => format!("{op:?}"),
    };
    // About 6.5 units per character at font size 10.
    if !name.is_empty() && width > name.len() as f64 * 6.5 + 6.0 {
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" font-size="10" fill="#ffffff" dominant-baseline="middle" pointer-events="none">{}</text>"##,
            num(x0 + 3.0),
            num(top + LANE_HEIGHT / 2.0),
            escape(&name)
        );
    }
}

/// The cycle axis along `y`: a line, ticks at a round step, and their labels.
fn axis(s: &mut String, y: f64, t0: Cycles, makespan: Cycles, x: &dyn Fn(Cycles) -> f64) {
    let _ = writeln!(
        s,
        r##"<line x1="{}" y1="{y0}" x2="{}" y2="{y0}" stroke="#555555"/>"##,
        num(LEFT),
        num(x(t0 + makespan)),
        y0 = num(y)
    );
    let step = nice_step(makespan.max(1), 10);
    let mut t = 0;
    while t <= makespan {
        let tx = num(x(t0 + t));
        let _ = writeln!(
            s,
            r##"<line x1="{tx}" y1="{}" x2="{tx}" y2="{}" stroke="#555555"/><text x="{tx}" y="{}" text-anchor="middle" font-size="10">{t}</text>"##,
            num(y),
            num(y + 5.0),
            num(y + 17.0)
        );
        t += step;
    }
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" text-anchor="end" font-size="10" fill="#444444">cycles</text>"##,
        num(LEFT - 10.0),
        num(y + 17.0)
    );
}

/// The occupancy as a step area from `top` down, with the arena line, the peak and a byte
/// axis.
fn occupancy_chart(
    s: &mut String,
    figures: &Figures,
    arena_bytes: u64,
    top: f64,
    x: &dyn Fn(Cycles) -> f64,
    right: f64,
) {
    let occ = &figures.occupancy;
    let bottom = top + OCCUPANCY_HEIGHT;
    let scale = arena_bytes.max(occ.peak_bytes).max(1) as f64;
    let y = |bytes: u64| bottom - bytes as f64 * OCCUPANCY_HEIGHT / scale;
    let _ = writeln!(
        s,
        r#"<text x="20" y="{}" font-weight="bold">arena occupancy (bytes holding live data)</text>"#,
        num(top - 14.0)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{}" width="{}" height="{OCCUPANCY_HEIGHT}" fill="#f4f6f8"/>"##,
        num(LEFT),
        num(top),
        num(right - LEFT)
    );
    // Byte ticks at a round step (whole KiB above 4 KiB).
    let kib = if scale >= 4096.0 { 1024 } else { 1 };
    let step = nice_step((scale as u64).div_ceil(kib), 4) * kib;
    let mut b = 0;
    while b as f64 <= scale {
        let _ = writeln!(
            s,
            r##"<line x1="{}" y1="{yb}" x2="{}" y2="{yb}" stroke="#d0d4d8"/><text x="{}" y="{yb}" text-anchor="end" dominant-baseline="middle" font-size="10">{}</text>"##,
            num(LEFT),
            num(right),
            num(LEFT - 10.0),
            bytes_label(b),
            yb = num(y(b))
        );
        b += step;
    }
    if !occ.steps.is_empty() {
        let mut d = format!("M{},{}", num(x(figures.start)), num(bottom));
        for &(cycle, bytes) in &occ.steps {
            let _ = write!(d, "H{}V{}", num(x(cycle)), num(y(bytes)));
        }
        let _ = write!(d, "H{}V{}Z", num(right), num(bottom));
        let _ = writeln!(
            s,
            r##"<path class="occupancy" d="{d}" fill="#4c8bf5" fill-opacity="0.45" stroke="#1a56c4" stroke-width="1"/>"##
        );
    }
    let ya = num(y(arena_bytes));
    let _ = writeln!(
        s,
        r##"<line class="arena" x1="{}" y1="{ya}" x2="{}" y2="{ya}" stroke="#333333" stroke-dasharray="6 4"/><text x="{}" y="{}" text-anchor="end" font-size="11">arena {arena_bytes} B</text>"##,
        num(LEFT),
        num(right),
        num(right),
        num(y(arena_bytes) - 4.0)
    );
    let (px, py) = (x(occ.peak_at), y(occ.peak_bytes));
    let anchor = if px > LEFT + (right - LEFT) * 0.7 {
        "end"
    } else {
        "start"
    };
    let dx = if anchor == "end" { -8.0 } else { 8.0 };
    let _ = writeln!(
        s,
        r##"<circle class="peak" cx="{}" cy="{}" r="4" fill="{FAILED_COLOUR}"/><text x="{}" y="{}" text-anchor="{anchor}" font-size="11" fill="{FAILED_COLOUR}">peak {} B at cycle {}</text>"##,
        num(px),
        num(py),
        num(px + dx),
        num((py - 6.0).max(top + 10.0)),
        occ.peak_bytes,
        occ.peak_at.saturating_sub(figures.start)
    );
}

/// The legend: each operator family drawn (in [`OpKind::ALL`] order) with its colour, then
/// transfers and failures if any.
fn legend_items(jobs: &[(TraceEntry, TraceRegions)]) -> Vec<(String, String)> {
    let mut items: Vec<(String, String)> = OpKind::ALL
        .iter()
        .filter(|&&kind| {
            jobs.iter().any(|(e, _)| {
                matches!(e.kind, TraceKind::Compute { op, .. } | TraceKind::Cpu { op, .. } if op == kind)
            })
        })
        .map(|&kind| (format!("{kind:?}"), colour_of(kind)))
        .collect();
    if jobs
        .iter()
        .any(|(e, _)| matches!(e.kind, TraceKind::Transfer { .. }))
    {
        items.push(("transfer".into(), TRANSFER_COLOUR.into()));
    }
    if jobs.iter().any(|(e, _)| e.failure.is_some()) {
        items.push(("failed (outline)".into(), FAILED_COLOUR.into()));
    }
    items
}

/// A family's colour: hues a golden angle apart in [`OpKind::ALL`] order, so neighbours differ
/// and a family keeps its colour from chart to chart.
fn colour_of(kind: OpKind) -> String {
    let index = OpKind::ALL.iter().position(|&k| k == kind).unwrap_or(0);
    format!("hsl({},62%,48%)", index * 137 % 360)
}

/// The largest of 1, 2 and 5 times a power of ten that cuts `range` into at most about
/// `parts` pieces (at least 1).
fn nice_step(range: u64, parts: u64) -> u64 {
    let raw = range.div_ceil(parts.max(1)).max(1);
    let mut magnitude = 1u64;
    while magnitude.saturating_mul(10) <= raw {
        magnitude *= 10;
    }
    [1, 2, 5, 10]
        .into_iter()
        .map(|m| magnitude.saturating_mul(m))
        .find(|&step| step >= raw)
        .unwrap_or(raw)
}

fn bytes_label(bytes: u64) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn space(s: Space) -> &'static str {
    match s {
        Space::Device => "device",
        Space::Host => "host",
        Space::Slow => "slow",
        Space::Flash(_) => "flash",
    }
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::I8 => "i8",
        DType::I16 => "i16",
        DType::I32 => "i32",
    }
}

/// A coordinate: two decimals, trailing zeros dropped (the same number prints the same).
fn num(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// `text` with XML's special characters escaped, for text content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CPU_FENCE;
    use npu_compute::hal::{Fence, Queue, Region};

    fn compute(fence: u64, unit: u8, op: OpKind, start: Cycles, end: Cycles) -> TraceEntry {
        TraceEntry {
            fence: Fence(fence),
            queue: Queue::Unit(unit),
            kind: TraceKind::Compute {
                op,
                dtype: DType::I8,
            },
            start,
            end,
            failure: None,
        }
    }

    fn with_regions(e: TraceEntry, write: Option<Region>) -> (TraceEntry, TraceRegions) {
        (
            e,
            TraceRegions {
                write,
                ..TraceRegions::EMPTY
            },
        )
    }

    /// Upload, two units computing, a CPU op, a download.
    fn sample() -> Vec<(TraceEntry, TraceRegions)> {
        let upload = TraceEntry {
            fence: Fence(0),
            queue: Queue::Dma,
            kind: TraceKind::Transfer {
                from: Space::Host,
                to: Space::Device,
                bytes: 256,
            },
            start: 1000,
            end: 1100,
            failure: None,
        };
        let cpu = TraceEntry {
            fence: CPU_FENCE,
            queue: Queue::Dma,
            kind: TraceKind::Cpu {
                op: OpKind::Softmax,
                dtype: DType::I8,
            },
            start: 1300,
            end: 1500,
            failure: None,
        };
        vec![
            with_regions(upload, Some(Region::device(0, 256))),
            (
                compute(1, 0, OpKind::Conv2d, 1100, 1200),
                TraceRegions {
                    reads: heapless::Vec::from_slice(&[Region::device(0, 256)]).unwrap(),
                    write: Some(Region::device(256, 512)),
                    scratch: None,
                },
            ),
            with_regions(compute(2, 1, OpKind::DepthwiseConv2d, 1100, 1300), None),
            with_regions(cpu, None),
        ]
    }

    /// The `x` and `width` of each job bar, in document order.
    fn bars(svg: &str) -> Vec<(f64, f64)> {
        svg.lines()
            .filter(|l| l.starts_with(r#"<rect class="job""#))
            .map(|l| (attr(l, "x"), attr(l, "width")))
            .collect()
    }

    fn attr(line: &str, name: &str) -> f64 {
        let key = format!(" {name}=\"");
        let from = line.find(&key).expect("attribute") + key.len();
        line[from..]
            .split('"')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a number")
    }

    #[test]
    fn every_lane_is_labelled_in_order() {
        let jobs = sample();
        let svg = svg(&Chart {
            title: "sample",
            jobs: &jobs,
            units: &["u55-128", ""],
            arena_bytes: 4096,
        });
        let labels: Vec<&str> = svg
            .lines()
            .filter(|l| l.contains(r#"class="lane-label""#))
            .filter_map(|l| l.split('>').nth(1)?.split('<').next())
            .collect();
        assert_eq!(labels, ["unit 0 (u55-128)", "unit 1", "DMA", "CPU"]);
        assert!(svg.starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" width="1200""#));
        assert!(svg.contains(r#"viewBox="0 0 1200 "#));
        assert!(svg.trim_end().ends_with("</svg>"));
        // A unit the names do not cover still gets its lane.
        assert_eq!(
            lanes(&jobs, 0),
            [Lane::Unit(0), Lane::Unit(1), Lane::Dma, Lane::Cpu]
        );
        assert_eq!(lanes(&[], 0), [Lane::Dma, Lane::Cpu]);
    }

    #[test]
    fn bars_scale_with_cycles() {
        let jobs = sample();
        let svg = svg(&Chart {
            title: "t",
            jobs: &jobs,
            units: &[],
            arena_bytes: 4096,
        });
        // Lanes top to bottom: unit 0's conv, unit 1's depthwise, the upload, the CPU's op.
        let b = bars(&svg);
        assert_eq!(b.len(), 4);
        let plot = WIDTH - LEFT - RIGHT;
        let per_cycle = plot / 500.0; // the run spans cycles 1000..1500
        let close = |a: f64, b: f64| (a - b).abs() < 0.01;
        assert!(close(b[0].0, LEFT + 100.0 * per_cycle), "{b:?}");
        assert!(close(b[0].1, 100.0 * per_cycle), "{b:?}");
        assert!(
            close(b[1].1, 2.0 * b[0].1),
            "twice the cycles, twice the width: {b:?}"
        );
        assert!(close(b[2].0, LEFT), "{b:?}");
        assert!(close(b[3].0 + b[3].1, WIDTH - RIGHT), "{b:?}");
        assert!(svg.contains("<title>Conv2d i8 on unit 0: 100 cycles, 100–200</title>"));
        assert!(svg.contains("<title>Softmax i8 on CPU: 200 cycles, 300–500</title>"));
        assert!(svg.contains("<title>transfer host→device 256 B on DMA: 100 cycles, 0–100</title>"));
    }

    #[test]
    fn figures_and_occupancy_peak() {
        let jobs = sample();
        let chart = Chart {
            title: "t",
            jobs: &jobs,
            units: &[],
            arena_bytes: 4096,
        };
        let f = figures(&chart);
        assert_eq!(f.start, 1000);
        assert_eq!(f.makespan, 500);
        assert_eq!(
            f.busy,
            [
                (Lane::Unit(0), 100),
                (Lane::Unit(1), 200),
                (Lane::Dma, 100),
                (Lane::Cpu, 200)
            ]
        );
        // The upload's 256 B from cycle 1000, the conv's 512 B from 1100; the conv's output,
        // never read, dies at its end.
        assert_eq!(f.occupancy.peak_bytes, 768);
        assert_eq!(f.occupancy.peak_at, 1100);
        let svg = svg(&chart);
        assert!(svg.contains("peak 768 B at cycle 100"));
        assert!(svg.contains("arena 4096 B"));
        assert!(svg.contains(r#"<path class="occupancy""#));
    }

    #[test]
    fn text_is_escaped() {
        let jobs = sample();
        let svg = svg(&Chart {
            title: "a<b> & \"c\"",
            jobs: &jobs,
            units: &["<u55> & 'x'"],
            arena_bytes: 1,
        });
        assert!(svg.contains("a&lt;b&gt; &amp; &quot;c&quot;"));
        assert!(svg.contains("unit 0 (&lt;u55&gt; &amp; &apos;x&apos;)"));
        assert!(!svg.contains("<u55>"));
        assert!(!svg.contains("<b>"));
        assert_eq!(escape("plain"), "plain");
    }

    #[test]
    fn output_is_deterministic_and_failures_are_outlined() {
        let mut jobs = sample();
        jobs[1].0.failure = Some(7);
        let chart = Chart {
            title: "t",
            jobs: &jobs,
            units: &[],
            arena_bytes: 1 << 20,
        };
        let a = svg(&chart);
        let mut reversed = jobs.clone();
        reversed.reverse();
        let b = svg(&Chart {
            jobs: &reversed,
            ..chart
        });
        assert_eq!(a, b, "the order of the trace does not matter");
        assert!(a.contains(&format!(r#"stroke="{FAILED_COLOUR}""#)));
        assert!(a.contains("failed (code 7)"));
        assert!(a.contains(">failed (outline)<"));
        // An empty trace still draws its lanes and axes.
        let empty = svg(&Chart { jobs: &[], ..chart });
        assert!(empty.contains(">DMA<") && empty.contains(">CPU<"));
        assert!(!empty.contains(r#"class="job""#));
    }

    #[test]
    fn round_steps() {
        assert_eq!(nice_step(500, 10), 50);
        assert_eq!(nice_step(123_456, 10), 20_000);
        assert_eq!(nice_step(7, 10), 1);
        assert_eq!(nice_step(1, 4), 1);
        assert_eq!(num(1.0), "1");
        assert_eq!(num(2.5), "2.5");
        assert_eq!(num(-0.001), "0");
        assert_eq!(bytes_label(2048), "2 KiB");
        assert_eq!(bytes_label(1000), "1000 B");
    }
}
