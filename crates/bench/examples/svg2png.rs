//! Renders the SVG plots of an experiments output directory to PNG beside them (resvg), for
//! viewers that do not show SVG: `cargo run -p bench --example svg2png -- DIR/plots`.

use std::path::Path;

fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: svg2png DIR (the plots directory of an experiments run)");
        std::process::exit(2);
    };
    let mut options = resvg::usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    // The plots ask for "sans-serif", which fontdb maps to Arial unless told otherwise.
    if let Some(family) = ["DejaVu Sans", "Liberation Sans", "Arial", "Noto Sans"]
        .into_iter()
        .find(|name| {
            fonts
                .faces()
                .any(|f| f.families.iter().any(|(n, _)| n == name))
        })
    {
        fonts.set_sans_serif_family(family);
    }
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) => {
            eprintln!("svg2png: {}: {e}", Path::new(&dir).display());
            std::process::exit(1);
        }
    };
    let mut failed = false;
    for entry in entries.flatten() {
        let svg = entry.path();
        if svg.extension().is_none_or(|e| e != "svg") {
            continue;
        }
        let result = std::fs::read(&svg)
            .map_err(|e| e.to_string())
            .and_then(|data| {
                resvg::usvg::Tree::from_data(&data, &options).map_err(|e| e.to_string())
            })
            .and_then(|tree| {
                let size = tree.size().to_int_size();
                let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
                    .ok_or("empty image")?;
                resvg::render(
                    &tree,
                    resvg::tiny_skia::Transform::default(),
                    &mut pixmap.as_mut(),
                );
                pixmap
                    .save_png(svg.with_extension("png"))
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = result {
            eprintln!("svg2png: {}: {e}", svg.display());
            failed = true;
        }
    }
    if failed {
        std::process::exit(1);
    }
}
