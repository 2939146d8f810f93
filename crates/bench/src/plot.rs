//! SVG figures (plotters), per experiment: time (or time per unit of work) against x, peak
//! memory where threads matter, and every variant's time relative to the experiment's baseline
//! with the 1.0 line. Both targets sit side by side on one y scale; each variant keeps one colour
//! and marker in every figure ([`style`]); the legend lists only the series drawn; an axis whose
//! values span more than 10x is logarithmic. Experiments with one x value (and the hot split's
//! cost per pair) are dot charts, one row per variant.

use crate::build::Target;
use crate::experiments::{Experiment, Shape, Size};
use crate::harness::Results;
use crate::table::{aggregate, cell, ratio_to, variants, xs, Cell, Table};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// What a figure shows; the report places the time figure first and links findings to the
/// ratio figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Time,
    Ratio,
    Memory,
}

/// One figure written: its kind and its path relative to the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plot {
    pub kind: Kind,
    pub file: String,
}

/// A value with its interval (confidence interval, or smallest to largest).
#[derive(Debug, Clone, Copy)]
struct Value {
    x: f64,
    y: f64,
    low: f64,
    high: f64,
}

#[derive(Debug, Clone)]
struct Series {
    label: String,
    values: Vec<Value>,
}

#[derive(Debug, Clone)]
struct Panel {
    target: Target,
    series: Vec<Series>,
}

#[derive(Debug, Clone)]
struct Figure {
    title: String,
    subtitle: String,
    x_label: String,
    y_label: String,
    log_x: bool,
    /// A horizontal (dot charts: vertical) line at this value: 1.0 on ratio figures.
    reference: Option<f64>,
    /// One row per variant, the value on the horizontal axis (experiments with one x).
    dots: bool,
    panels: Vec<Panel>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Circle,
    Square,
    Triangle,
    Cross,
}

/// How a variant is drawn, the same in every figure.
#[derive(Debug, Clone, Copy)]
struct Style {
    color: RGBColor,
    marker: Marker,
    filled: bool,
    /// Green-thread variants: their mechanism's colour, dashed, hollow marker.
    dashed: bool,
}

/// Variants in legend order, with their colour and marker.
/// A variant's label, colour (RGB), marker and whether the marker is filled.
type StyleEntry = (&'static str, (u8, u8, u8), Marker, bool);

const STYLES: [StyleEntry; 13] = [
    ("traditional", (0, 0, 0), Marker::Circle, true),
    ("callee-cleanup", (120, 120, 120), Marker::Square, true),
    ("heap", (230, 159, 0), Marker::Triangle, true),
    ("heap-malloc", (213, 94, 0), Marker::Cross, true),
    ("lookahead", (0, 114, 178), Marker::Circle, true),
    ("mmu", (0, 158, 115), Marker::Square, true),
    ("mmu-reuse", (86, 180, 233), Marker::Triangle, true),
    ("native (Cranelift)", (204, 121, 167), Marker::Cross, true),
    ("gcc -O0", (140, 86, 75), Marker::Circle, false),
    (
        "gcc -O2 -fno-sibling",
        (148, 103, 189),
        Marker::Square,
        false,
    ),
    ("gcc -O2", (188, 189, 34), Marker::Triangle, false),
    ("gcc -fsplit-stack", (23, 190, 207), Marker::Cross, false),
    ("go", (214, 39, 40), Marker::Circle, true),
];

const GREEN_SUFFIX: &str = ", green threads";

/// The style of a variant label (see [`STYLES`]); unknown labels get a colour of their own from
/// a hash of the label, so they stay stable across figures too.
fn style(label: &str) -> Style {
    let (base, green) = match label.strip_suffix(GREEN_SUFFIX) {
        Some(base) => (base, true),
        None => (label, false),
    };
    match STYLES.iter().find(|(name, ..)| *name == base) {
        Some(&(_, (r, g, b), marker, filled)) => Style {
            color: RGBColor(r, g, b),
            marker,
            filled: filled && !green,
            dashed: green,
        },
        None => {
            let hash = label
                .bytes()
                .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b.into()));
            let c = Palette99::pick(hash).to_rgba();
            Style {
                color: RGBColor(c.0, c.1, c.2),
                marker: Marker::Cross,
                filled: false,
                dashed: green,
            }
        }
    }
}

/// Legend and row order: [`STYLES`]' order, each mechanism followed by its green variant, then
/// unknown labels.
fn order(label: &str) -> (usize, bool, String) {
    let base = label.strip_suffix(GREEN_SUFFIX).unwrap_or(label);
    let rank = STYLES
        .iter()
        .position(|(name, ..)| *name == base)
        .unwrap_or(STYLES.len());
    (rank, base != label, label.to_string())
}

/// Draws `$st`'s marker at every coordinate of `$coords` on `$chart` (a macro, not a function:
/// the marker's element type differs per shape, and the chart's per axis kind).
macro_rules! markers {
    ($chart:expr, $coords:expr, $st:expr) => {{
        let st: Style = $st;
        let shape = if st.filled {
            st.color.filled()
        } else {
            st.color.stroke_width(2)
        };
        let coords: Vec<_> = $coords.into_iter().collect();
        match st.marker {
            Marker::Circle => $chart
                .draw_series(
                    coords
                        .into_iter()
                        .map(|c| EmptyElement::at(c) + Circle::new((0, 0), 4, shape)),
                )
                .map(|_| ()),
            Marker::Square => $chart
                .draw_series(
                    coords
                        .into_iter()
                        .map(|c| EmptyElement::at(c) + Rectangle::new([(-4, -4), (4, 4)], shape)),
                )
                .map(|_| ()),
            Marker::Triangle => $chart
                .draw_series(
                    coords
                        .into_iter()
                        .map(|c| EmptyElement::at(c) + TriangleMarker::new((0, 0), 6, shape)),
                )
                .map(|_| ()),
            Marker::Cross => {
                $chart
                    .draw_series(coords.into_iter().map(|c| {
                        EmptyElement::at(c) + Cross::new((0, 0), 5, st.color.stroke_width(2))
                    }))
                    .map(|_| ())
            }
        }
        .map_err(err)?;
    }};
}

/// Axis numbers: 3 significant digits, thousands as k and millions as M.
fn number(v: f64) -> String {
    let a = v.abs();
    let sig = |v: f64| {
        let digits = if v.abs() >= 100.0 {
            0
        } else if v.abs() >= 10.0 {
            1
        } else if v.abs() >= 1.0 {
            2
        } else {
            3
        };
        let s = format!("{v:.digits$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e6 {
        format!("{}M", sig(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", sig(v / 1e3))
    } else if a > 0.0 && a < 0.01 {
        format!("{v:.0e}")
    } else {
        sig(v)
    }
}

/// A tick label: on a log axis only 1, 2 and 5 times a power of ten get one (plotters puts a
/// tick at every integer multiple, whose labels would overlap).
fn axis_label(v: f64, log: bool) -> String {
    if log && v > 0.0 {
        let mantissa = v / 10f64.powf(v.log10().floor());
        if ![1.0, 2.0, 5.0, 10.0]
            .iter()
            .any(|m| (mantissa - m).abs() < 1e-6 * m)
        {
            return String::new();
        }
    }
    number(v)
}

/// Splits `text` into lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The smallest and largest of `values`.
fn span(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// A value axis for the figure: (low, high, logarithmic). Logarithmic when the values span more
/// than 10x; linear axes of times and memory start at 0. The values and the reference line set
/// the range; confidence intervals widen it by at most half of it on each side (a 2-round run's
/// interval can be 20 times the value: drawn to the plot's edge, not squashing every series
/// into a line).
fn value_axis(fig: &Figure) -> (f64, f64, bool) {
    let all = || {
        fig.panels
            .iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| &s.values)
    };
    let (mut y_lo, mut y_hi) = span(all().map(|v| v.y)).unwrap_or((0.0, 1.0));
    if let Some(r) = fig.reference {
        y_lo = y_lo.min(r);
        y_hi = y_hi.max(r);
    }
    let (ci_lo, ci_hi) = span(all().flat_map(|v| [v.low, v.high])).unwrap_or((y_lo, y_hi));
    if y_lo > 0.0 && y_hi / y_lo > 10.0 {
        // Log axis: the same rule on the logarithms.
        let (l_lo, l_hi) = (y_lo.ln(), y_hi.ln());
        let room = (l_hi - l_lo) * 0.5;
        let low = if ci_lo > 0.0 { ci_lo.ln() } else { l_lo - room };
        let lo = low.max(l_lo - room).min(l_lo - 0.15);
        let hi = ci_hi.ln().min(l_hi + room).max(l_hi + 0.15);
        (lo.exp(), hi.exp(), true)
    } else {
        let room = if y_hi > y_lo {
            (y_hi - y_lo) * 0.5
        } else {
            y_hi.abs().max(1e-9) * 0.5
        };
        let hi = ci_hi.min(y_hi + room).max(y_hi + room * 0.1);
        let lo = if fig.reference.is_some() || y_lo < 0.0 {
            ci_lo.max(y_lo - room).min(y_lo - room * 0.1)
        } else {
            0.0
        };
        // Times, memory and ratios are never negative.
        (lo.max(0.0).min(y_lo), hi, false)
    }
}

/// Draws one panel of a line figure.
macro_rules! line_panel {
    ($area:expr, $fig:expr, $panel:expr, $x_range:expr, $y_range:expr, $x_ends:expr, $logs:expr) => {{
        let (log_x, log_y): (bool, bool) = $logs;
        let mut chart = ChartBuilder::on($area)
            .caption($panel.target.name(), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(46)
            .y_label_area_size(70)
            .build_cartesian_2d($x_range, $y_range)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc($fig.x_label.as_str())
            .y_desc($fig.y_label.as_str())
            .x_label_formatter(&|v| axis_label(*v, log_x))
            .y_label_formatter(&|v| axis_label(*v, log_y))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()
            .map_err(err)?;
        if let Some(r) = $fig.reference {
            let (x0, x1) = $x_ends;
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x0, r), (x1, r)],
                    8,
                    5,
                    BLACK.stroke_width(1),
                ))
                .map_err(err)?;
        }
        for s in &$panel.series {
            let st = style(&s.label);
            let pts: Vec<(f64, f64)> = s.values.iter().map(|v| (v.x, v.y)).collect();
            if st.dashed {
                chart
                    .draw_series(DashedLineSeries::new(pts, 7, 4, st.color.stroke_width(2)))
                    .map_err(err)?;
            } else {
                chart
                    .draw_series(LineSeries::new(pts, st.color.stroke_width(2)))
                    .map_err(err)?;
            }
            chart
                .draw_series(
                    s.values
                        .iter()
                        .filter(|v| v.high > v.low)
                        .map(|v| ErrorBar::new_vertical(v.x, v.low, v.y, v.high, st.color, 8)),
                )
                .map_err(err)?;
            markers!(chart, s.values.iter().map(|v| (v.x, v.y)), st);
        }
    }};
}

/// Draws one panel of a dot chart: one row per label of `rows` (top to bottom).
macro_rules! dot_panel {
    ($area:expr, $fig:expr, $panel:expr, $rows:expr, $v_range:expr, $log_v:expr) => {{
        let log_v: bool = $log_v;
        let rows: &[String] = $rows;
        let n = rows.len() as i32;
        let row_of = |label: &str| n - 1 - rows.iter().position(|r| r == label).unwrap_or(0) as i32;
        let mut chart = ChartBuilder::on($area)
            .caption($panel.target.name(), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(46)
            .y_label_area_size(150)
            .build_cartesian_2d($v_range, -1..n)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc($fig.y_label.as_str())
            .x_label_formatter(&|v| axis_label(*v, log_v))
            .y_labels(rows.len() + 2)
            .y_label_formatter(&|i| {
                usize::try_from(n - 1 - *i)
                    .ok()
                    .and_then(|k| rows.get(k))
                    .cloned()
                    .unwrap_or_default()
            })
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()
            .map_err(err)?;
        if let Some(r) = $fig.reference {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(r, -1), (r, n)],
                    8,
                    5,
                    BLACK.stroke_width(1),
                ))
                .map_err(err)?;
        }
        for s in &$panel.series {
            let st = style(&s.label);
            let row = row_of(&s.label);
            chart
                .draw_series(
                    s.values
                        .iter()
                        .filter(|v| v.high > v.low)
                        .map(|v| ErrorBar::new_horizontal(row, v.low, v.y, v.high, st.color, 8)),
                )
                .map_err(err)?;
            markers!(chart, s.values.iter().map(|v| (v.y, row)), st);
        }
    }};
}

/// The legend: a line sample, the marker and the label of every series drawn.
fn legend(area: &DrawingArea<SVGBackend<'_>, Shift>, labels: &[String]) -> Result<(), String> {
    for (i, label) in labels.iter().enumerate() {
        let st = style(label);
        let y = 40 + 22 * i as i32;
        let strokes: &[(i32, i32)] = if st.dashed {
            &[(8, 14), (18, 25), (29, 36)]
        } else {
            &[(8, 36)]
        };
        for &(from, to) in strokes {
            area.draw(&PathElement::new(
                vec![(from, y), (to, y)],
                st.color.stroke_width(2),
            ))
            .map_err(err)?;
        }
        let shape = if st.filled {
            st.color.filled()
        } else {
            st.color.stroke_width(2)
        };
        match st.marker {
            Marker::Circle => area.draw(&Circle::new((22, y), 4, shape)),
            Marker::Square => area.draw(&Rectangle::new([(18, y - 4), (26, y + 4)], shape)),
            Marker::Triangle => area.draw(&TriangleMarker::new((22, y), 6, shape)),
            Marker::Cross => area.draw(&Cross::new((22, y), 5, st.color.stroke_width(2))),
        }
        .map_err(err)?;
        area.draw(&Text::new(
            label.clone(),
            (44, y - 7),
            ("sans-serif", 13).into_font(),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// `fig` with every value and interval end moved into `lo..=hi`: plotters maps a point far
/// outside its axis to a pixel beyond `i32` (a run whose interval is 10^12 times its value made
/// the harness panic), and a point off the plot is drawn at its edge.
fn clipped(fig: &Figure, lo: f64, hi: f64) -> Figure {
    let mut fig = fig.clone();
    for v in fig
        .panels
        .iter_mut()
        .flat_map(|p| &mut p.series)
        .flat_map(|s| &mut s.values)
    {
        for w in [&mut v.y, &mut v.low, &mut v.high] {
            if !w.is_nan() {
                *w = w.clamp(lo, hi);
            }
        }
    }
    fig
}

/// Writes `fig` as an SVG file.
fn draw(path: &Path, fig: &Figure) -> Result<(), String> {
    let (v_lo, v_hi, log_v) = value_axis(fig);
    let fig = &clipped(fig, v_lo, v_hi);
    let panels: Vec<&Panel> = fig
        .panels
        .iter()
        .filter(|p| p.series.iter().any(|s| !s.values.is_empty()))
        .collect();
    if panels.is_empty() {
        return Err("nothing to plot".into());
    }
    let mut labels: Vec<String> = panels
        .iter()
        .flat_map(|p| p.series.iter().filter(|s| !s.values.is_empty()))
        .map(|s| s.label.clone())
        .collect();
    labels.sort_by_key(|l| order(l));
    labels.dedup();
    let legend_width = if fig.dots { 0 } else { 200 };
    let panel_width = if fig.dots { 560 } else { 520 };
    let width = panel_width * panels.len() as u32 + legend_width;
    let width = width.max(760);
    // About 10 pixels per character at 20 points, 6.5 at 13.
    let title = wrap(&fig.title, (width as usize - 30) / 10);
    let subtitle = wrap(&fig.subtitle, (width as usize - 30) * 2 / 13);
    let title_height = 26 * title.len() as u32;
    let header = 20 + title_height + 18 * subtitle.len() as u32;
    let body = if fig.dots {
        (90 + 26 * labels.len() as u32).max(300)
    } else {
        (labels.len() as u32 * 22 + 60).max(430)
    };
    let root = SVGBackend::new(path, (width, header + body)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    for (i, line) in title.iter().enumerate() {
        root.draw(&Text::new(
            line.clone(),
            (16, 12 + 26 * i as i32),
            ("sans-serif", 20).into_font(),
        ))
        .map_err(err)?;
    }
    for (i, line) in subtitle.iter().enumerate() {
        root.draw(&Text::new(
            line.clone(),
            (16, 16 + title_height as i32 + 18 * i as i32),
            ("sans-serif", 13).into_font().color(&RGBColor(80, 80, 80)),
        ))
        .map_err(err)?;
    }
    let (_, rest) = root.split_vertically(header);
    let (plots, legend_area) = rest.split_horizontally(width - legend_width);
    let areas = plots.split_evenly((1, panels.len()));
    if fig.dots {
        for (area, panel) in areas.iter().zip(&panels) {
            match log_v {
                true => dot_panel!(area, fig, panel, &labels, (v_lo..v_hi).log_scale(), true),
                false => dot_panel!(area, fig, panel, &labels, v_lo..v_hi, false),
            }
        }
        return root.present().map_err(err);
    }
    let all_x = || {
        panels
            .iter()
            .flat_map(|p| &p.series)
            .flat_map(|s| &s.values)
            .map(|v| v.x)
    };
    let (x_min, mut x_max) = span(all_x()).expect("a panel has values");
    if x_max <= x_min {
        x_max = x_min + 1.0;
    }
    // A log axis over less than a decade has no labelled tick: only where x spans 10x and more
    // (and the experiment asks for it, or the span is wider than 100x).
    let log_x = x_min > 0.0 && x_max / x_min > 10.0 && (fig.log_x || x_max / x_min > 100.0);
    let (x_lo, x_hi) = if log_x {
        (x_min / 1.3, x_max * 1.3)
    } else {
        let pad = (x_max - x_min) * 0.06;
        (x_min - pad, x_max + pad)
    };
    for (area, panel) in areas.iter().zip(&panels) {
        match (log_x, log_v) {
            (true, true) => line_panel!(
                area,
                fig,
                panel,
                (x_lo..x_hi).log_scale(),
                (v_lo..v_hi).log_scale(),
                (x_lo, x_hi),
                (log_x, log_v)
            ),
            (true, false) => line_panel!(
                area,
                fig,
                panel,
                (x_lo..x_hi).log_scale(),
                v_lo..v_hi,
                (x_lo, x_hi),
                (log_x, log_v)
            ),
            (false, true) => line_panel!(
                area,
                fig,
                panel,
                x_lo..x_hi,
                (v_lo..v_hi).log_scale(),
                (x_lo, x_hi),
                (log_x, log_v)
            ),
            (false, false) => {
                line_panel!(
                    area,
                    fig,
                    panel,
                    x_lo..x_hi,
                    v_lo..v_hi,
                    (x_lo, x_hi),
                    (false, false)
                )
            }
        }
    }
    legend(&legend_area, &labels)?;
    root.present().map_err(err)
}

/// Time (ms), or ns per unit of work, of a cell: mean and its 95% confidence interval.
fn time_value(c: &Cell, x: f64, per_unit: Option<f64>) -> Value {
    let scale = match per_unit {
        Some(work) => 1e9 / work,
        None => 1e3,
    };
    let y = c.time.mean * scale;
    let ci = c.time.ci95 * scale;
    Value {
        x,
        y,
        low: y - ci,
        high: y + ci,
    }
}

fn size_text(size: Size) -> &'static str {
    match size {
        Size::Full => "full run",
        Size::Quick => "quick run (reduced sizes)",
        Size::Tiny => "tiny run (smoke test)",
    }
}

/// The figures of one experiment.
fn figures_of(results: &Results, table: &Table, e: &Experiment) -> Vec<(Kind, Figure)> {
    let targets: Vec<Target> = Target::ALL
        .iter()
        .copied()
        .filter(|&t| !variants(results, e.name, t).is_empty())
        .collect();
    let points = xs(table, e.name);
    let single_x = points.len() == 1;
    let work_at = |x: f64| e.points.iter().find(|p| p.x == x).and_then(|p| p.work);
    let rounds = format!("{} rounds", results.runs);
    let mut figures = Vec::new();

    // Time, or time per unit of work.
    let per_unit = e.shape == Shape::PerUnit;
    let time_panels: Vec<Panel> = targets
        .iter()
        .map(|&t| Panel {
            target: t,
            series: variants(results, e.name, t)
                .into_iter()
                .map(|label| Series {
                    values: if e.shape == Shape::HotSplit {
                        hot_split_value(table, e, t, &label).into_iter().collect()
                    } else {
                        points
                            .iter()
                            .filter_map(|&x| {
                                let c = cell(table, e.name, t, &label, x)?;
                                let work = if per_unit { Some(work_at(x)?) } else { None };
                                Some(time_value(c, x, work))
                            })
                            .collect()
                    },
                    label,
                })
                .collect(),
        })
        .collect();
    let (what, y_label) = match e.shape {
        Shape::PerUnit => (format!("ns per {}", e.unit), format!("ns per {}", e.unit)),
        Shape::HotSplit => (
            format!("ns per {}", e.unit),
            format!("ns per {} (split - no split)", e.unit),
        ),
        Shape::Curve => ("time".to_string(), "time (ms)".to_string()),
    };
    figures.push((
        Kind::Time,
        Figure {
            title: format!("{}: {what}", e.title),
            subtitle: format!(
                "{}. Mean and 95% confidence interval over {rounds}; {}.",
                capitalized(e.figures),
                size_text(results.size)
            ),
            x_label: e.x_label.to_string(),
            y_label,
            log_x: e.log_x,
            reference: None,
            dots: single_x || e.shape == Shape::HotSplit,
            panels: time_panels,
        },
    ));

    // Relative to the baseline.
    let ratio_panels: Vec<Panel> = targets
        .iter()
        .map(|&t| Panel {
            target: t,
            series: variants(results, e.name, t)
                .into_iter()
                .filter(|label| label != e.baseline)
                .map(|label| Series {
                    values: points
                        .iter()
                        .filter_map(|&x| {
                            let r = ratio_to(table, e.name, t, &label, e.baseline, x)?;
                            Some(Value {
                                x,
                                y: r.ratio,
                                low: r.low,
                                high: r.high,
                            })
                        })
                        .collect(),
                    label,
                })
                .collect(),
        })
        .collect();
    if ratio_panels
        .iter()
        .any(|p| p.series.iter().any(|s| !s.values.is_empty()))
    {
        figures.push((
            Kind::Ratio,
            Figure {
                title: format!("{}: time relative to {}", e.title, e.baseline),
                subtitle: format!(
                    "Below 1 is faster than {b}. Geometric mean of the ratios of runs made in the \
                     same round, 95% confidence interval; {rounds}; {}.",
                    size_text(results.size),
                    b = e.baseline
                ),
                x_label: e.x_label.to_string(),
                y_label: format!("time relative to {} (x)", e.baseline),
                log_x: e.log_x,
                reference: Some(1.0),
                dots: single_x,
                panels: ratio_panels,
            },
        ));
    }

    // Peak memory, where threads (or a deep single recursion) make it differ.
    let threaded = e.points.iter().any(|p| p.threads > 1);
    if threaded || e.name == "summation_single" {
        let panels = targets
            .iter()
            .map(|&t| Panel {
                target: t,
                series: variants(results, e.name, t)
                    .into_iter()
                    .map(|label| Series {
                        values: points
                            .iter()
                            .filter_map(|&x| {
                                let c = cell(table, e.name, t, &label, x)?;
                                Some(Value {
                                    x,
                                    y: c.rss_kib.median / 1024.0,
                                    low: c.rss_kib.min / 1024.0,
                                    high: c.rss_kib.max / 1024.0,
                                })
                            })
                            .collect(),
                        label,
                    })
                    .collect(),
            })
            .collect();
        figures.push((
            Kind::Memory,
            Figure {
                title: format!("{}: peak memory", e.title),
                subtitle: format!(
                    "Peak resident memory (ru_maxrss) of the whole process: median, bars from the \
                     smallest to the largest of {rounds}; {}.",
                    size_text(results.size)
                ),
                x_label: e.x_label.to_string(),
                y_label: "peak RSS (MiB)".to_string(),
                log_x: e.log_x,
                reference: None,
                dots: single_x,
                panels,
            },
        ));
    }
    figures
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or(String::new(), |f| {
        f.to_uppercase().collect::<String>() + c.as_str()
    })
}

/// The hot split's cost per overflow-underflow pair: (split - no split) / pairs from the mean
/// times, the intervals of the two means added in quadrature.
fn hot_split_value(table: &Table, e: &Experiment, t: Target, label: &str) -> Option<Value> {
    let (base, split) = (
        cell(table, e.name, t, label, 0.0)?,
        cell(table, e.name, t, label, 1.0)?,
    );
    let pairs = e.points.first()?.work?;
    let y = (split.time.mean - base.time.mean) / pairs * 1e9;
    let ci = split.time.ci95.hypot(base.time.ci95) / pairs * 1e9;
    Some(Value {
        x: 1.0,
        y,
        low: y - ci,
        high: y + ci,
    })
}

/// Writes every figure into `dir`; returns, per experiment, the figures written (paths relative
/// to `dir`'s parent, where report.md is) and the errors of figures that could not be drawn.
pub fn write_all(results: &Results, dir: &Path) -> (BTreeMap<String, Vec<Plot>>, Vec<String>) {
    let table = aggregate(&results.records);
    let mut files: BTreeMap<String, Vec<Plot>> = BTreeMap::new();
    let mut errors = Vec::new();
    if let Err(e) = std::fs::create_dir_all(dir) {
        errors.push(format!("{}: {e}", dir.display()));
        return (files, errors);
    }
    for e in &results.experiments {
        for (kind, figure) in figures_of(results, &table, e) {
            let suffix = match kind {
                Kind::Time => "time",
                Kind::Ratio => "ratio",
                Kind::Memory => "memory",
            };
            let name = format!("{}-{suffix}.svg", e.name);
            match draw(&dir.join(&name), &figure) {
                Ok(()) => files.entry(e.name.to_string()).or_default().push(Plot {
                    kind,
                    file: format!("plots/{name}"),
                }),
                // An experiment that measured nothing has nothing to draw: not an error.
                Err(err) if err == "nothing to plot" => {}
                Err(err) => errors.push(format!("{name}: {err}")),
            }
        }
    }
    (files, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_on_axes() {
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(1.0), "1");
        assert_eq!(number(12.5), "12.5");
        assert_eq!(number(250.0), "250");
        assert_eq!(number(4096.0), "4096");
        assert_eq!(number(65_536.0), "65.5k");
        assert_eq!(number(1_000_000.0), "1M");
        assert_eq!(number(2_500_000.0), "2.5M");
    }

    #[test]
    fn every_variant_keeps_one_style_and_green_variants_share_the_colour() {
        let a = style("lookahead");
        let g = style("lookahead, green threads");
        assert_eq!(a.color, g.color);
        assert!(g.dashed && !a.dashed && !g.filled);
        // No two known variants look alike.
        for (i, x) in STYLES.iter().enumerate() {
            for y in &STYLES[i + 1..] {
                assert_ne!(x.1, y.1, "{} and {} share a colour", x.0, y.0);
            }
        }
        let unknown = style("someone else");
        assert_eq!(unknown.color, style("someone else").color);
    }

    /// A figure of two panels whose x and y values span `x_span` and `y_span` times.
    fn synthetic(x_span: f64, y_span: f64, dots: bool, reference: Option<f64>) -> Figure {
        let series = |label: &str, scale: f64| Series {
            label: label.to_string(),
            values: [1.0, x_span]
                .iter()
                .enumerate()
                .map(|(i, &x)| {
                    let y = scale * if i == 0 { 1.0 } else { y_span };
                    Value {
                        x: if dots { 1.0 } else { x },
                        y,
                        low: y * 0.8,
                        high: y * 1.25,
                    }
                })
                .take(if dots { 1 } else { 2 })
                .collect(),
        };
        Figure {
            title: "A synthetic figure".into(),
            subtitle: "Every combination of axes the experiments can produce.".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            reference,
            dots,
            panels: Target::ALL
                .iter()
                .map(|&target| Panel {
                    target,
                    series: vec![
                        series("traditional", 1.0),
                        series("lookahead, green threads", 2.0),
                        series("someone else", 3.0),
                    ],
                })
                .collect(),
        }
    }

    /// Rasterizes an SVG; false when it does not parse or draws nothing.
    fn renders(svg: &Path) -> bool {
        let Ok(data) = std::fs::read(svg) else {
            return false;
        };
        let options = resvg::usvg::Options::default();
        let Ok(tree) = resvg::usvg::Tree::from_data(&data, &options) else {
            return false;
        };
        let size = tree.size().to_int_size();
        let Some(mut pixmap) = resvg::tiny_skia::Pixmap::new(size.width(), size.height()) else {
            return false;
        };
        resvg::render(
            &tree,
            resvg::tiny_skia::Transform::default(),
            &mut pixmap.as_mut(),
        );
        let first = &pixmap.data()[..4];
        pixmap.data().chunks(4).any(|px| px != first)
    }

    #[test]
    fn every_kind_of_axis_draws_and_renders() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("linear", synthetic(4.0, 3.0, false, None)),
            ("log-x", synthetic(1000.0, 3.0, false, None)),
            ("log-y", synthetic(4.0, 50.0, false, None)),
            ("log-both", synthetic(1000.0, 50.0, false, Some(1.0))),
            ("ratio", synthetic(4.0, 0.5, false, Some(1.0))),
            ("dots", synthetic(1.0, 1.0, true, Some(1.0))),
            ("dots-log", {
                let mut f = synthetic(1.0, 1.0, true, None);
                f.panels[0].series[2].values[0].y = 500.0;
                f
            }),
        ];
        // Intervals 10^12 times their values (a two-round cell of a noisy run), on every kind
        // of axis: drawn to the plot's edge, not past what a pixel coordinate holds.
        let wide = |mut f: Figure| {
            for v in f.panels[0].series[1].values.iter_mut() {
                v.low = -v.y * 1e12;
                v.high = v.y * 1e12;
            }
            f
        };
        let cases = cases.into_iter().chain([
            ("wide-linear", wide(synthetic(4.0, 3.0, false, None))),
            (
                "wide-log-both",
                wide(synthetic(1000.0, 50.0, false, Some(1.0))),
            ),
            ("wide-dots", wide(synthetic(1.0, 1.0, true, Some(1.0)))),
            ("wide-dots-log", {
                let mut f = wide(synthetic(1.0, 1.0, true, None));
                f.panels[0].series[2].values[0].y = 500.0;
                f
            }),
        ]);
        for (name, figure) in cases {
            let path = dir.path().join(format!("{name}.svg"));
            draw(&path, &figure).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(renders(&path), "{name} does not render");
        }
        let empty = Figure {
            panels: Vec::new(),
            ..synthetic(1.0, 1.0, false, None)
        };
        assert_eq!(
            draw(&dir.path().join("empty.svg"), &empty),
            Err("nothing to plot".to_string())
        );
    }

    #[test]
    fn value_axes_are_logarithmic_beyond_10x_and_keep_the_reference_line() {
        let (lo, hi, log) = value_axis(&synthetic(4.0, 3.0, false, None));
        assert!(
            !log && lo == 0.0 && hi >= 3.0 * 3.0 * 1.25 - 1e-9,
            "{lo} {hi}"
        );
        let (lo, hi, log) = value_axis(&synthetic(4.0, 50.0, false, None));
        assert!(log && lo < 1.0 && hi > 150.0, "{lo} {hi}");
        let (lo, hi, log) = value_axis(&synthetic(4.0, 0.5, false, Some(1.0)));
        // Ratios 0.5 to 3 with the 1.0 line: all inside.
        assert!(!log && lo <= 0.5 && hi >= 3.0, "{lo} {hi}");
    }

    #[test]
    fn log_axes_label_only_one_two_and_five() {
        assert_eq!(axis_label(200.0, true), "200");
        assert_eq!(axis_label(500.0, true), "500");
        assert_eq!(axis_label(1000.0, true), "1000");
        assert_eq!(axis_label(0.1, true), "0.1");
        assert_eq!(axis_label(300.0, true), "");
        assert_eq!(axis_label(900.0, true), "");
        assert_eq!(axis_label(300.0, false), "300");
    }

    #[test]
    fn long_subtitles_wrap_at_spaces() {
        let lines = wrap("aaa bbb ccc ddd", 7);
        assert_eq!(lines, ["aaa bbb", "ccc ddd"]);
    }
}
