//! CI smoke test of the experiment harness: tiny experiments on x86-64 (seconds), checked for a
//! report with the summary, the findings table, one CSV row per run and plots that render (every
//! SVG is rasterized with resvg, so a plot that does not draw fails here), so the harness cannot
//! rot.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The compiler the harness drives: `cargo test --workspace` builds the debug one.
fn compiler() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ["target/debug/cmm", "target/release/cmm"]
        .iter()
        .map(|p| root.join(p))
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("no cmm binary: build it first (cargo build, or run cargo test --workspace)")
}

/// Rasterizes one SVG file to PNG, or says why it cannot.
fn render(svg: &Path, png: &Path) -> Result<(u32, u32), String> {
    let data = std::fs::read(svg).map_err(|e| e.to_string())?;
    let mut options = resvg::usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    // The plots ask for "sans-serif", which fontdb maps to Arial unless told otherwise: use a
    // font this machine has (with none, the text is not drawn, but the plot still renders).
    let family = ["DejaVu Sans", "Liberation Sans", "Arial", "Noto Sans"]
        .into_iter()
        .find(|name| {
            fonts
                .faces()
                .any(|f| f.families.iter().any(|(n, _)| n == name))
        })
        .map(str::to_string)
        .or_else(|| Some(fonts.faces().next()?.families.first()?.0.clone()));
    if let Some(family) = family {
        fonts.set_sans_serif_family(family);
    }
    let tree = resvg::usvg::Tree::from_data(&data, &options).map_err(|e| e.to_string())?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| format!("empty image {}x{}", size.width(), size.height()))?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    // A plot is mostly white with lines: an image of one colour drew nothing.
    let first = &pixmap.data()[..4];
    if pixmap.data().chunks(4).all(|px| px == first) {
        return Err("the image is blank".into());
    }
    pixmap.save_png(png).map_err(|e| e.to_string())?;
    Ok((size.width(), size.height()))
}

#[test]
fn tiny_experiments_produce_a_report_with_plots_that_render() {
    let out = tempfile::tempdir().expect("temporary directory");
    let status = Command::new(env!("CARGO_BIN_EXE_experiments"))
        .args([
            "--tiny",
            "--only",
            "summation_single",
            "summation_cores",
            "hot_split",
            "green_yield",
            "green_grid",
        ])
        .args(["--runs", "2", "--target", "x86_64", "--quiet", "--cmm"])
        .arg(compiler())
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("the harness starts");
    assert!(status.success(), "harness failed: {status}");
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    for needle in [
        "**Machine:**",
        "## Findings",
        "| traditional |",
        "Summation multi-threaded",
        "## Method",
        // The hot split of a fixed stack is not applicable, said once, not a failure.
        "- traditional (x86_64): **not applicable**",
        "](plots/summation_single-ratio.svg) |",
        // The contents link to each experiment's section.
        "[`summation_cores`](#summation_cores)",
        "<a id=\"summation_cores\"></a>",
        // The grid's own tables: bytes per thread beside the floor, C-- against Go.
        "Threads parked on a mutex (point:",
        "Threads waiting by yielding (point:",
        "| 1 | x86_64 | 1,000 | 10 | 16 | 160 |",
        // Two rounds: two code layouts (the default is four, at most one per round).
        "is built 2 times, its code moved by 0 to 16 bytes",
    ] {
        assert!(
            report.contains(needle),
            "report.md lacks {needle:?}:\n{report}"
        );
    }
    // Each C-- executable of the emission stage in a second layout, its code 16 bytes on;
    // the peers in one.
    let bin = out.path().join("work/bin");
    let layout = |name: &str| bin.join(name).is_file();
    assert!(layout("summation_single-x86_64-cmm-lookahead-layout1"));
    assert!(layout("summation_single-x86_64-cmm-lookahead"));
    assert!(!layout("summation_single-x86_64-gcc-o0-layout1"));
    assert!(layout("summation_single-x86_64-gcc-o0"));
    // The summary comes before the experiments, and each experiment's plots before its tables.
    let findings = report.find("## Findings").unwrap();
    let experiments = report.find("## Experiments").unwrap();
    assert!(findings < experiments);
    let section = &report[report.find("(`summation_cores`)").unwrap()..];
    assert!(section.find("![").unwrap() < section.find("| threads | variant |").unwrap());
    assert!(!report.contains("**failed**"), "{report}");
    // Nothing a reader meets names an issue of the project's tracker.
    for word in ["issue", "#1", "#2"] {
        assert!(!report.contains(word), "report.md mentions {word:?}");
    }

    let csv = std::fs::read_to_string(out.path().join("results.csv")).expect("results.csv");
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    // Every row has a value (or an empty field) for each column the header names.
    let fields = |line: &str| {
        let mut quoted = false;
        1 + line
            .chars()
            .filter(|&c| {
                if c == '"' {
                    quoted = !quoted;
                }
                c == ',' && !quoted
            })
            .count()
    };
    let header = csv.lines().next().unwrap();
    assert!(
        header.contains(",seconds,maxrss_kib,minor_faults,"),
        "{header}"
    );
    for row in &rows {
        assert_eq!(fields(row), fields(header), "{header}\n{row}");
    }
    // Each point: a verification run and two measured rounds per executable.
    assert!(
        rows.iter()
            .filter(|r| r.contains(",traditional,1,"))
            .count()
            >= 2,
        "{csv}"
    );
    assert!(rows
        .iter()
        .any(|r| r.contains("lookahead") && r.ends_with(|c: char| c.is_ascii_digit())));

    let mut rendered = Vec::new();
    for entry in std::fs::read_dir(out.path().join("plots")).expect("plots directory") {
        let svg = entry.unwrap().path();
        // The words a reader sees (colours are "#rrggbb" attributes, not words).
        let shown: String = std::fs::read_to_string(&svg)
            .unwrap()
            .split("</text>")
            .filter_map(|part| part.rsplit_once('>').map(|(_, words)| words.to_string()))
            .collect::<Vec<_>>()
            .join(" ");
        for word in ["issue", "#1", "#2"] {
            assert!(!shown.contains(word), "{} mentions {word:?}", svg.display());
        }
        let png = svg.with_extension("png");
        match render(&svg, &png) {
            Ok(size) => rendered.push((svg.file_name().unwrap().to_owned(), size)),
            Err(e) => panic!("{} does not render: {e}", svg.display()),
        }
    }
    rendered.sort();
    let names: Vec<String> = rendered
        .iter()
        .map(|(n, _)| n.to_string_lossy().into_owned())
        .collect();
    // Time, ratio and (threads, a deep recursion) memory per experiment; the hot split and the
    // one-point yield experiment as dot charts.
    for want in [
        "summation_single-time.svg",
        "summation_single-ratio.svg",
        "summation_single-memory.svg",
        "summation_cores-time.svg",
        "summation_cores-ratio.svg",
        "summation_cores-memory.svg",
        "hot_split-time.svg",
        "hot_split-ratio.svg",
        "green_yield-time.svg",
        "green_yield-ratio.svg",
    ] {
        assert!(names.iter().any(|n| n == want), "no {want} in {names:?}");
    }
    // Plots that keep their PNGs for a look: BENCH_KEEP_PLOTS=DIR.
    if let Some(keep) = std::env::var_os("BENCH_KEEP_PLOTS") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        for entry in std::fs::read_dir(out.path().join("plots")).unwrap() {
            let p = entry.unwrap().path();
            std::fs::copy(&p, keep.join(p.file_name().unwrap())).unwrap();
        }
        std::fs::copy(out.path().join("report.md"), keep.join("report.md")).unwrap();
    }
}

/// Runs the harness on tiny sizes (x86-64, two rounds) with `args`; returns whether it
/// succeeded and its stderr.
fn harness(out: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_experiments"))
        .args([
            "--tiny", "--runs", "2", "--target", "x86_64", "--quiet", "--cmm",
        ])
        .arg(compiler())
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .expect("the harness starts");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn race_detection_is_measured_beside_go_and_thread_sanitizer() {
    let out = tempfile::tempdir().expect("temporary directory");
    let (ok, err) = harness(out.path(), &["--only", "race_tree", "irs_fibonacci"]);
    assert!(ok, "{err}");
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    // Each peer has rows of its own, or says why it did not run on this machine (a build
    // without cgo or libtsan); it is never left out.
    for peer in ["go -race", "gcc -fsanitize=thread"] {
        let row = format!("| {peer} |");
        let why = format!("- {peer} (x86_64): **");
        assert!(
            report.contains(&row) || report.contains(&why),
            "report.md has neither a row nor a note of {peer}:\n{report}"
        );
    }
    for claim in [
        "costs less than Go's race detector on Summation and the Tree",
        "costs less than ThreadSanitizer on IRS's benchmarks",
    ] {
        assert!(report.contains(claim), "report.md lacks {claim:?}");
    }
    // Only 64-bit peers: the i686 builds are not attempted (this run is x86-64 only).
    assert!(!report.contains("go -race (i686)"), "{report}");
}

#[test]
fn a_stopped_run_resumes_without_measuring_its_finished_experiments_again() {
    let out = tempfile::tempdir().expect("temporary directory");
    let (ok, err) = harness(out.path(), &["--only", "summation_single"]);
    assert!(ok, "{err}");
    let rows = |csv: &str, experiment: &str| -> Vec<String> {
        csv.lines()
            .filter(|l| l.starts_with(&format!("{experiment},")))
            .map(str::to_string)
            .collect()
    };
    let first = std::fs::read_to_string(out.path().join("results.csv")).unwrap();
    assert!(!rows(&first, "summation_single").is_empty(), "{first}");
    assert!(out.path().join("parts/summation_single.json").is_file());

    // Measuring into a directory that holds a run's parts, without --resume, is refused.
    let (ok, err) = harness(out.path(), &["--only", "summation_single", "hot_split"]);
    assert!(!ok && err.contains("--resume"), "{err}");
    // With other settings, too.
    let (ok, err) = harness(out.path(), &["--resume", "--no-peers"]);
    assert!(!ok && err.contains("other settings"), "{err}");

    let (ok, err) = harness(
        out.path(),
        &["--resume", "--only", "summation_single", "hot_split"],
    );
    assert!(ok, "{err}");
    let second = std::fs::read_to_string(out.path().join("results.csv")).unwrap();
    // The finished experiment's runs are the first session's, not measured again.
    assert_eq!(
        rows(&second, "summation_single"),
        rows(&first, "summation_single")
    );
    assert!(!rows(&second, "hot_split").is_empty(), "{second}");
    let report = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(report.contains("in 2 sessions"), "{report}");
    let sessions: Vec<&str> = report
        .lines()
        .filter(|l| l.starts_with("- ") && l.contains(" UTC, "))
        .collect();
    assert_eq!(sessions.len(), 2, "{report}");
    assert!(sessions[0].ends_with("`summation_single`"), "{sessions:?}");
    assert!(sessions[1].ends_with("`hot_split`"), "{sessions:?}");
}
