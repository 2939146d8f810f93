//! The `green_grid` experiment's own tables: for every point (threads x depth x frame, parked on
//! a mutex, yielding, or parked with mixed depths) the peak memory per thread of the C-- green threads and of Go's
//! goroutines beside the floor (the thread's live frames: depth x bytes per level), their
//! times and the ratios; and the grid's figures for the findings table.

use crate::build::Target;
use crate::experiments::{grid_level_bytes, GridShape, GridWait, Point};
use crate::table::{cell, Cell, Table};
use std::fmt::Write as _;

/// The experiment, and the variants the tables compare.
pub const EXPERIMENT: &str = "green_grid";
pub const CMM: &str = "lookahead";
pub const GO: &str = "go";

/// One measured point of one target.
pub struct Row<'t> {
    pub target: Target,
    pub x: f64,
    pub shape: GridShape,
    /// Live frames of one thread on average, in bytes (depth x bytes per level on this target).
    pub floor: u64,
    /// Bytes per level of the recursion on this target.
    pub level: u64,
    pub cmm: Option<&'t Cell>,
    pub go: Option<&'t Cell>,
}

/// Peak RSS per thread of a cell, in bytes.
pub fn bytes_per_thread(c: &Cell, threads: u64) -> f64 {
    c.rss_kib.max * 1024.0 / threads as f64
}

/// Every point of `points` that C-- or Go ran on `target`, in the points' order.
pub fn rows<'t>(table: &'t Table, points: &[Point], target: Target) -> Vec<Row<'t>> {
    points
        .iter()
        .filter_map(|p| {
            let shape = GridShape::of(&p.args)?;
            let cmm = cell(table, EXPERIMENT, target, CMM, p.x);
            let go = cell(table, EXPERIMENT, target, GO, p.x);
            if cmm.is_none() && go.is_none() {
                return None;
            }
            Some(Row {
                target,
                x: p.x,
                shape,
                floor: shape.floor_per_thread(target)?,
                level: grid_level_bytes(target, shape.frame)?,
                cmm,
                go,
            })
        })
        .collect()
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn seconds(c: Option<&Cell>) -> String {
    c.map_or("-".into(), |c| format!("{:.2}", c.time.median))
}

/// Appends one table per way of waiting (both targets in each).
pub fn write_tables(out: &mut String, table: &Table, points: &[Point]) {
    let _ = writeln!(
        out,
        "\nPeak memory per thread (largest ru_maxrss / threads, in bytes) beside the floor: a \
         thread's live frames, depth x bytes per level of the C-- recursion on that target \
         (the assembly's frame lines: the frame, the arguments and the return address; Go's \
         frames for the same functions are its own; with mixed depths, the average over the \
         threads). Time: median seconds. cmm is `lookahead` with `--threads green`."
    );
    for wait in GridWait::ALL {
        let title = wait.title();
        let _ = writeln!(
            out,
            "\nThreads {title} (point: the x of the plots and of the tables below):\n\n| point | target | threads | depth | bytes/level | floor B/thread | cmm B/thread | Go B/thread | cmm / Go memory | cmm s | Go s | cmm / Go time |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for target in Target::ALL {
            for r in rows(table, points, target)
                .iter()
                .filter(|r| r.shape.wait == wait)
            {
                let per = |c: Option<&Cell>| c.map(|c| bytes_per_thread(c, r.shape.threads));
                let (cmm, go) = (per(r.cmm), per(r.go));
                let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                    _ => "-".into(),
                };
                let time = |c: Option<&Cell>| c.map(|c| c.time.median);
                let _ = writeln!(
                    out,
                    "| {} | {target} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.x,
                    thousands(r.shape.threads),
                    r.shape.depth,
                    r.level,
                    thousands(r.floor),
                    cmm.map_or("-".into(), |b| thousands(b.round() as u64)),
                    go.map_or("-".into(), |b| thousands(b.round() as u64)),
                    ratio(cmm, go),
                    seconds(r.cmm),
                    seconds(r.go),
                    ratio(time(r.cmm), time(r.go)),
                );
            }
        }
    }
}

/// A worst point of the grid over the points of a target with at least some threads, as the
/// findings table takes it: (ratio, text).
pub type Worst = fn(&Table, &[Point], Target, u64) -> Option<(f64, String)>;

/// The largest ratio of C-- to Go peak memory over the points of `target` with at least
/// `least_threads` threads, by the largest peak RSS of each: (ratio, text).
pub fn worst_memory_ratio(
    table: &Table,
    points: &[Point],
    target: Target,
    least_threads: u64,
) -> Option<(f64, String)> {
    rows(table, points, target)
        .iter()
        .filter(|r| r.shape.threads >= least_threads)
        .filter_map(|r| {
            let (c, g) = (r.cmm?, r.go?);
            Some((c.rss_kib.max / g.rss_kib.max, r, c, g))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(ratio, r, c, g)| {
            (
                ratio,
                format!(
                    "{ratio:.2}x at the worst point ({} threads {} deep, {} B/level, {}: {} vs {} B/thread)",
                    thousands(r.shape.threads),
                    r.shape.depth,
                    r.level,
                    r.shape.wait.word(),
                    thousands(bytes_per_thread(c, r.shape.threads) as u64),
                    thousands(bytes_per_thread(g, r.shape.threads) as u64),
                ),
            )
        })
}

/// The largest ratio of C-- peak memory to the bound "1.1 x the floor + 512 bytes per thread
/// + 64 MiB" over the points of `target` with at least `least_threads` threads: (ratio, text).
pub fn worst_floor_ratio(
    table: &Table,
    points: &[Point],
    target: Target,
    least_threads: u64,
) -> Option<(f64, String)> {
    rows(table, points, target)
        .iter()
        .filter(|r| r.shape.threads >= least_threads)
        .filter_map(|r| {
            let c = r.cmm?;
            let bound = r.shape.threads as f64 * (1.1 * r.floor as f64 + 512.0)
                + (64u64 << 20) as f64;
            Some((c.rss_kib.max * 1024.0 / bound, r))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(ratio, r)| {
            (
                ratio,
                format!(
                    "{ratio:.2}x the bound at the worst point ({} threads {} deep, {} B/level, {}: {} B/thread, floor {})",
                    thousands(r.shape.threads),
                    r.shape.depth,
                    r.level,
                    r.shape.wait.word(),
                    thousands(r.cmm.map_or(0, |c| bytes_per_thread(c, r.shape.threads) as u64)),
                    thousands(r.floor),
                ),
            )
        })
}

/// The largest ratio of C-- to Go time over the points of `target` with at least
/// `least_threads` threads, by mean times: (ratio, the same point's ratio of minimum times, text).
pub fn worst_time_ratio(
    table: &Table,
    points: &[Point],
    target: Target,
    least_threads: u64,
) -> Option<(f64, f64, String)> {
    rows(table, points, target)
        .iter()
        .filter(|r| r.shape.threads >= least_threads)
        .filter_map(|r| {
            let (c, g) = (r.cmm?, r.go?);
            Some((c.time.mean / g.time.mean, c.time.min / g.time.min, r, c, g))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(ratio, by_min, r, c, g)| {
            (
                ratio,
                by_min,
                format!(
                    "{ratio:.2}x at the worst point ({} threads {} deep, {} B/level, {}: {:.2} vs {:.2} s)",
                    thousands(r.shape.threads),
                    r.shape.depth,
                    r.level,
                    r.shape.wait.word(),
                    c.time.mean,
                    g.time.mean,
                ),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::{all, Size};
    use crate::stats::summarize;
    use std::collections::BTreeMap;

    fn cell_of(seconds: f64, rss_kib: f64) -> Cell {
        let s = |v: f64| summarize(&[v, v]).unwrap();
        Cell {
            time: s(seconds),
            rss_kib: s(rss_kib),
            faults: s(0.0),
            system_seconds: s(0.0),
            by_round: BTreeMap::new(),
            stats: BTreeMap::new(),
        }
    }

    fn key(t: Target, v: &str, x: f64) -> (String, Target, String, u64) {
        (EXPERIMENT.to_string(), t, v.to_string(), x.to_bits())
    }

    /// The tiny grid (1000 threads 10 deep, the smallest frames, parked, yielding and parked
    /// with mixed depths): bytes per thread, floors, ratios and the findings' worst points,
    /// computed by hand.
    #[test]
    fn tables_and_worst_points_of_a_tiny_grid() {
        let e = all(std::path::Path::new("/r"), Size::Tiny)
            .into_iter()
            .find(|e| e.name == EXPERIMENT)
            .unwrap();
        assert_eq!(e.points.len(), 3);
        let (parked, yielding, mixed) = (e.points[0].x, e.points[1].x, e.points[2].x);
        assert_eq!(e.points[0].args, ["1000", "10", "16", "mutex"]);
        assert_eq!(e.points[1].args, ["1000", "10", "16", "yield"]);
        assert_eq!(e.points[2].args, ["1000", "10", "16", "mixed"]);
        let mut table = Table::new();
        // 1000 threads: 2000 KiB is 2048 B/thread, 4000 KiB 4096 B/thread.
        table.insert(key(Target::X86_64, CMM, parked), cell_of(0.5, 2000.0));
        table.insert(key(Target::X86_64, GO, parked), cell_of(0.25, 4000.0));
        table.insert(key(Target::X86_64, CMM, yielding), cell_of(1.0, 6000.0));
        table.insert(key(Target::X86_64, GO, yielding), cell_of(2.0, 4000.0));
        table.insert(key(Target::I686, CMM, parked), cell_of(0.5, 1000.0));
        // 3000 KiB is 3072 B/thread, 5000 KiB 5120.
        table.insert(key(Target::X86_64, CMM, mixed), cell_of(0.3, 3000.0));
        table.insert(key(Target::X86_64, GO, mixed), cell_of(0.6, 5000.0));
        let mut out = String::new();
        write_tables(&mut out, &table, &e.points);
        // x86-64: 10 levels of 16 bytes; i686: of 8 bytes, and no Go cell.
        assert!(
            out.contains(
                "| 1 | x86_64 | 1,000 | 10 | 16 | 160 | 2,048 | 4,096 | 0.50 | 0.50 | 0.25 | 2.00 |"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "| 2 | x86_64 | 1,000 | 10 | 16 | 160 | 6,144 | 4,096 | 1.50 | 1.00 | 2.00 | 0.50 |"
            ),
            "{out}"
        );
        assert!(
            out.contains("| 1 | i686 | 1,000 | 10 | 8 | 80 | 1,024 | - | - | 0.50 | - | - |"),
            "{out}"
        );
        // Mixed: threads 0, 100, ..., 900 go 1000 deep, the 990 others 10: 19,900 levels of
        // 16 bytes over 1000 threads, 318 bytes each (rounded down).
        assert!(
            out.contains(
                "| 3 | x86_64 | 1,000 | 10 | 16 | 318 | 3,072 | 5,120 | 0.60 | 0.30 | 0.60 | 0.50 |"
            ),
            "{out}"
        );
        let parked_at = out.find("parked on a mutex").unwrap();
        let yielding_at = out.find("waiting by yielding").unwrap();
        assert!(out.find("| 6,144 |").unwrap() > yielding_at && yielding_at > parked_at);
        assert!(out.find("| 3,072 |").unwrap() > out.find("a hundred times deeper").unwrap());

        let (r, text) = worst_memory_ratio(&table, &e.points, Target::X86_64, 1000).unwrap();
        assert_eq!(r, 1.5);
        assert!(text.contains("yielding: 6,144 vs 4,096 B/thread"), "{text}");
        assert!(worst_memory_ratio(&table, &e.points, Target::X86_64, 1001).is_none());
        assert!(worst_memory_ratio(&table, &e.points, Target::I686, 1).is_none());
        // Bound: 1000 x (1.1 x 160 + 512) + 64 MiB = 688,000 + 67,108,864 = 67,796,864 bytes.
        // Times: 0.5/0.25 = 2.0 parked, 1.0/2.0 = 0.5 yielding.
        let (r, by_min, text) = worst_time_ratio(&table, &e.points, Target::X86_64, 1).unwrap();
        assert_eq!((r, by_min), (2.0, 2.0));
        assert!(text.contains("parked: 0.50 vs 0.25 s"), "{text}");
        let (r, _) = worst_floor_ratio(&table, &e.points, Target::X86_64, 1000).unwrap();
        assert!((r - 6000.0 * 1024.0 / 67_796_864.0).abs() < 1e-9, "{r}");
    }

    /// The full grid: every threads x depth x frame x wait whose live frames fit in 6 GiB, and
    /// ten million threads; i686 and the Go peer only where they can fit.
    #[test]
    fn the_full_grid() {
        let e = all(std::path::Path::new("/r"), Size::Full)
            .into_iter()
            .find(|e| e.name == EXPERIMENT)
            .unwrap();
        let shapes: Vec<GridShape> = e
            .points
            .iter()
            .map(|p| GridShape::of(&p.args).unwrap())
            .collect();
        // 27 shapes per wait, less 1,000,000 x 1000 (3), 1,000,000 x 100 x 256 and
        // 100,000 x 1000 x 256: 22 parked and 22 yielding; mixed depths up to 100,000
        // threads 100 deep, 12; and the ten-million point.
        assert_eq!(shapes.len(), 57);
        let count = |w| shapes.iter().filter(|s| s.wait == w).count();
        assert_eq!(
            [GridWait::Mutex, GridWait::Yield, GridWait::Mixed].map(count),
            [23, 22, 12]
        );
        let big = GridShape {
            threads: 10_000_000,
            depth: 10,
            frame: 16,
            wait: GridWait::Mutex,
        };
        assert_eq!(shapes.last(), Some(&big));
        for (p, s) in e.points.iter().zip(&shapes) {
            let floor = s.threads * s.floor_per_thread(Target::X86_64).unwrap();
            assert!(floor <= 6 << 30, "{s:?}");
            assert_eq!(
                p.x86_64_only,
                s.threads > 100_000 || floor > 1 << 30,
                "{s:?}"
            );
            assert_eq!(p.go_least_bytes, s.threads * 2432);
        }
        // Points are numbered 1, 2, ... in order.
        assert!(e
            .points
            .iter()
            .enumerate()
            .all(|(i, p)| p.x == (i + 1) as f64));
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(10_000_000), "10,000,000");
    }
}
