//! SVG plots with plotters: per experiment and target, mean time (with its 95% confidence
//! interval) against x for every variant, titled with the thesis/paper figure it re-draws; for
//! threaded experiments also peak resident memory.

use crate::build::Target;
use crate::experiments::{Experiment, Shape};
use crate::harness::Results;
use crate::report::{aggregate, cell, variants, xs, Cell};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// What a plot shows on its y axis.
#[derive(Clone, Copy)]
enum Quantity {
    TimeMs,
    NsPerUnit,
    RssMiB,
}

fn value(c: &Cell, quantity: Quantity, work: Option<f64>) -> (f64, f64) {
    match quantity {
        Quantity::TimeMs => (c.time.mean * 1e3, c.time.ci95 * 1e3),
        Quantity::NsPerUnit => {
            let w = work.unwrap_or(1.0);
            (c.time.mean / w * 1e9, c.time.ci95 / w * 1e9)
        }
        Quantity::RssMiB => (c.rss_kib.max / 1024.0, 0.0),
    }
}

type Series = Vec<(String, Vec<(f64, f64, f64)>)>;

fn draw(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    log_x: bool,
    series: &Series,
) -> Result<(), String> {
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_min, mut x_max, mut y_max) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y, ci) in points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_max = y_max.max(y + ci);
    }
    if !x_min.is_finite() {
        return Err("nothing to plot".into());
    }
    if x_max <= x_min {
        x_max = x_min + 1.0;
    }
    let y_top = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    let palette = |i: usize| Palette99::pick(i).to_rgba();
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_label_formatter(&|x| format!("{x}"))
                .x_desc(x_label)
                .y_desc(y_label)
                .draw()
                .map_err(|e| e.to_string())?;
            for (i, (name, pts)) in series.iter().enumerate() {
                let color = palette(i);
                chart
                    .draw_series(LineSeries::new(
                        pts.iter().map(|&(x, y, _)| (x, y)),
                        color.stroke_width(2),
                    ))
                    .map_err(|e| e.to_string())?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                chart
                    .draw_series(pts.iter().map(|&(x, y, ci)| {
                        ErrorBar::new_vertical(x, y - ci, y, y + ci, color.filled(), 6)
                    }))
                    .map_err(|e| e.to_string())?;
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&(x, y, _)| Circle::new((x, y), 3, color.filled())),
                    )
                    .map_err(|e| e.to_string())?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .label_font(("sans-serif", 12))
                .draw()
                .map_err(|e| e.to_string())?;
        }};
    }
    if log_x && x_min > 0.0 {
        finish!(builder
            .build_cartesian_2d((x_min * 0.8..x_max * 1.25).log_scale(), 0.0..y_top)
            .map_err(|e| e.to_string())?);
    } else {
        let pad = (x_max - x_min) * 0.05;
        finish!(builder
            .build_cartesian_2d(x_min - pad..x_max + pad, 0.0..y_top)
            .map_err(|e| e.to_string())?);
    }
    root.present().map_err(|e| e.to_string())
}

/// Writes every plot into `dir`; returns, per experiment, the file names (relative to `dir`'s
/// parent, where report.md is) and the errors of plots that could not be drawn.
pub fn write_all(results: &Results, dir: &Path) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let table = aggregate(&results.records);
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut errors = Vec::new();
    if let Err(e) = std::fs::create_dir_all(dir) {
        errors.push(format!("{}: {e}", dir.display()));
        return (files, errors);
    }
    for e in &results.experiments {
        if e.shape == Shape::HotSplit {
            continue; // two points: the report's table says it better
        }
        let threaded = e.points.iter().any(|p| p.threads > 1);
        let mut quantities = vec![if e.shape == Shape::PerUnit {
            Quantity::NsPerUnit
        } else {
            Quantity::TimeMs
        }];
        if threaded || e.name.starts_with("summation_single") {
            quantities.push(Quantity::RssMiB);
        }
        for &target in &Target::ALL {
            for &quantity in &quantities {
                let series = series_of(results, &table, e, target, quantity);
                if series.is_empty() {
                    continue;
                }
                let (suffix, y_label, what) = match quantity {
                    Quantity::TimeMs => ("time", "time (ms)", "time"),
                    Quantity::NsPerUnit => ("ns", "ns per call", "ns per call"),
                    Quantity::RssMiB => ("rss", "peak RSS (MiB)", "peak RSS"),
                };
                let name = format!("{}-{}-{suffix}.svg", e.name, target);
                let title = format!("{} ({target}): {what} | {}", e.title, e.figures);
                // The thesis re-draws its figures without the curves that dwarf the others
                // (figures 4.2, 4.6: "No Heap", its malloc heap, here `heap-malloc`; 4.10,
                // 4.12, 4.14: C-- only).
                let dwarfing = ["heap-malloc", "gcc -O0", "go"];
                let zoomed: Series = series
                    .iter()
                    .filter(|(n, _)| !dwarfing.contains(&n.as_str()))
                    .cloned()
                    .collect();
                let mut plots = Vec::new();
                if zoomed.len() < series.len() && !zoomed.is_empty() {
                    plots.push((
                        format!("{}-{}-{suffix}-zoom.svg", e.name, target),
                        format!(
                            "{} ({target}): {what}, without heap-malloc, gcc -O0, go | {}",
                            e.title, e.figures
                        ),
                        zoomed,
                    ));
                }
                plots.insert(0, (name, title, series));
                for (name, title, series) in plots {
                    match draw(
                        &dir.join(&name),
                        &title,
                        e.x_label,
                        y_label,
                        e.log_x,
                        &series,
                    ) {
                        Ok(()) => files
                            .entry(e.name.to_string())
                            .or_default()
                            .push(format!("plots/{name}")),
                        Err(err) => errors.push(format!("{name}: {err}")),
                    }
                }
            }
        }
    }
    (files, errors)
}

fn series_of(
    results: &Results,
    table: &crate::report::Table,
    e: &Experiment,
    target: Target,
    quantity: Quantity,
) -> Series {
    let mut series = Vec::new();
    for name in variants(results, e.name, target) {
        let pts: Vec<(f64, f64, f64)> = xs(table, e.name)
            .into_iter()
            .filter_map(|x| {
                let c = cell(table, e.name, target, &name, x)?;
                let work = e.points.iter().find(|p| p.x == x).and_then(|p| p.work);
                let (y, ci) = value(c, quantity, work);
                Some((x, y, ci))
            })
            .collect();
        if !pts.is_empty() {
            series.push((name, pts));
        }
    }
    series
}
