//! Tidy checks over the repository's own sources (in the manner of rust-analyzer's tidy test):
//! module docs on every file, a `// SAFETY:` comment for every `unsafe` block, no debugging
//! leftovers or stubs, an ARCHITECTURE.md that names every crate, and docs whose paths exist.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under the given directories, skipping build output.
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with("target") && !name.starts_with('.') {
                    walk(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for dir in ["src", "crates", "xtask", "tests", "build.rs"] {
        let p = root().join(dir);
        if p.is_file() {
            out.push(p);
        } else {
            walk(&p, &mut out);
        }
    }
    out.sort();
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

#[test]
fn every_file_starts_with_a_module_doc() {
    let missing: Vec<String> = rust_files()
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|p| rel(&p))
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading `//!` line: {missing:#?}"
    );
}

#[test]
fn every_unsafe_block_has_a_safety_comment() {
    let mut offenders = Vec::new();
    for path in rust_files() {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !code.contains("unsafe {") || code.contains("fn ") {
                continue;
            }
            let window = &lines[i.saturating_sub(8)..=i];
            if !window.iter().any(|l| l.contains("SAFETY:")) {
                offenders.push(format!("{}:{}: {}", rel(&path), i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "`unsafe` blocks without a `// SAFETY:` comment:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn no_stubs_or_debugging_leftovers() {
    // Built from pieces so that this file does not match itself.
    let patterns = [
        format!("{}!(", "todo"),
        format!("{}!(", "unimplemented"),
        format!("{}!(", "dbg"),
        format!("#[{}", "ignore"),
    ];
    let mut offenders = Vec::new();
    for path in rust_files() {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            if patterns.iter().any(|p| line.contains(p.as_str())) {
                offenders.push(format!("{}:{}: {}", rel(&path), i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "stubs or debugging leftovers:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn architecture_names_every_crate() {
    let arch =
        std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md exists");
    let crates: Vec<String> = std::fs::read_dir(root().join("crates"))
        .expect("crates/ exists")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!crates.is_empty());
    for name in crates.iter().map(String::as_str).chain(["xtask"]) {
        assert!(
            arch.contains(&format!("`{name}`")) || arch.contains(&format!("crates/{name}")),
            "ARCHITECTURE.md does not mention crate `{name}`"
        );
    }
}

/// The README's quick start and the docs' code maps name files; a renamed file must not leave a
/// command that fails on a fresh machine (the quick start once named a program that did not
/// exist).
#[test]
fn paths_named_in_the_docs_exist() {
    let mut missing = Vec::new();
    for doc in ["README.md", "ARCHITECTURE.md"] {
        let text = std::fs::read_to_string(root().join(doc)).expect("doc exists");
        for word in text.split(|c: char| c.is_whitespace() || "`()[]<>,;:\"'".contains(c)) {
            let word = word.trim_end_matches('.');
            let names_a_file = ["tests/", "crates/", "xtask/", "src/", ".ci/"]
                .iter()
                .any(|p| word.starts_with(p))
                && !word.contains(['*', '{', '$', '…'])
                && !word.ends_with("...");
            if names_a_file && !root().join(word).exists() {
                missing.push(format!("{doc}: {word}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths named in the docs that do not exist:\n{}",
        missing.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The module graph: no import circle between the files of a crate, and the runtime's layers.
// ---------------------------------------------------------------------------------------------

/// The runtime's layers, lowest first: a file of `crates/stackrt/src` belongs to the layer of
/// its top-level module and may import only from its own layer and the ones before it.
/// ARCHITECTURE.md ("The runtime's layers") says what each owns.
const STACKRT_LAYERS: [&str; 8] = [
    "base", "chunk", "mech", "signals", "race", "green", "threads", "start",
];

/// A file's reference to another module of its crate.
#[derive(Clone, Debug)]
struct Reference {
    /// The file the reference resolves to.
    target: PathBuf,
    /// The path as written (`crate::chunk::global::runtime`).
    written: String,
    line: usize,
}

/// One crate's module tree (module path → file) and every file's references.
struct ModuleGraph {
    modules: std::collections::BTreeMap<Vec<String>, PathBuf>,
    /// Per module: the names its `pub use` items export, as absolute module paths.
    reexports:
        std::collections::BTreeMap<Vec<String>, std::collections::BTreeMap<String, Vec<String>>>,
    references: std::collections::BTreeMap<PathBuf, Vec<Reference>>,
}

/// Source text without comments and without `#[cfg(test)]` modules (tests may reach anything
/// they test), line structure kept.
fn code_of(text: &str) -> String {
    // Comments and the contents of string literals become spaces (newlines kept).
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut in_comment) = (false, false);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            in_comment = false;
            out.push(c);
        } else if in_comment {
            out.push(' ');
        } else if in_string {
            if c == '\\' {
                out.push(' ');
                if chars.get(i + 1).is_some_and(|&n| n != '\n') {
                    out.push(' ');
                    i += 1;
                }
            } else if c == '"' {
                in_string = false;
                out.push(c);
            } else {
                out.push(' ');
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            in_comment = true;
            out.push(' ');
        } else if c == '"' && !(i > 0 && chars[i - 1] == '\'' && chars.get(i + 1) == Some(&'\'')) {
            in_string = true;
            out.push(c);
        } else {
            out.push(c);
        }
        i += 1;
    }
    // Blank out `#[cfg(test)] mod NAME { ... }`, keeping newlines.
    let mut bytes: Vec<u8> = out.into_bytes();
    let mut from = 0;
    while let Some(at) = find(&bytes[from..], b"#[cfg(test)]").map(|i| i + from) {
        let after = at + b"#[cfg(test)]".len();
        let rest = String::from_utf8_lossy(&bytes[after..]).into_owned();
        let trimmed = rest.trim_start();
        let skipped = rest.len() - trimmed.len();
        if trimmed.starts_with("mod ") {
            if let Some(open) = trimmed.find(['{', ';']) {
                if trimmed.as_bytes()[open] == b'{' {
                    let mut depth = 0;
                    let start = after + skipped + open;
                    let mut end = bytes.len();
                    for (i, &b) in bytes.iter().enumerate().skip(start) {
                        match b {
                            b'{' => depth += 1,
                            b'}' => {
                                depth -= 1;
                                if depth == 0 {
                                    end = i + 1;
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                    for b in &mut bytes[at..end] {
                        if *b != b'\n' {
                            *b = b' ';
                        }
                    }
                    from = end;
                    continue;
                }
            }
        }
        from = after;
    }
    String::from_utf8(bytes).unwrap_or_default()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The paths a `use` tree names (`a::{b, c::{d, e as f}, self}` → `a::b`, `a::c::d`,
/// `a::c::e`, `a`), each with the name it binds.
fn expand_use_tree(tree: &str) -> Vec<(Vec<String>, String)> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    fn walk(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, String)>) {
        // Split `tree` at top-level commas.
        let mut depth = 0;
        let mut start = 0;
        let mut parts = Vec::new();
        for (i, c) in tree.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&tree[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&tree[start..]);
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            if let Some(open) = part.find('{') {
                let head = part[..open].trim_end_matches("::");
                let mut p = prefix.to_vec();
                p.extend(head.split("::").filter(|s| !s.is_empty()).map(String::from));
                walk(&p, &part[open + 1..part.len() - 1], out);
            } else {
                let (path, alias) = match part.split_once("~as~") {
                    Some((p, a)) => (p, Some(a.to_string())),
                    None => (part, None),
                };
                let mut p = prefix.to_vec();
                p.extend(path.split("::").filter(|s| !s.is_empty()).map(String::from));
                if p.last().is_some_and(|s| s == "self") {
                    p.pop();
                }
                let name = alias.unwrap_or_else(|| p.last().cloned().unwrap_or_default());
                out.push((p, name));
            }
        }
    }
    walk(&[], &tree, &mut out);
    out
}

/// Every `use` statement of `code` as (line, tree text, whether it is `pub`).
fn use_statements(code: &str) -> Vec<(usize, String, bool)> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while let Some(at) = find(&bytes[i..], b"use ").map(|k| k + i) {
        let before = &code[..at];
        let prev = before.trim_end();
        let starts_item = at == 0
            || prev.is_empty()
            || prev.ends_with([';', '{', '}', ']'])
            || prev.ends_with("pub")
            || prev.ends_with(')')
                && prev
                    .rsplit_once("pub(")
                    .is_some_and(|(_, r)| !r.contains('\n'));
        let word_start =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        if !(starts_item && word_start) {
            i = at + 4;
            continue;
        }
        let Some(end) = code[at..].find(';').map(|e| e + at) else {
            break;
        };
        let public = prev.ends_with("pub") || prev.ends_with(')') && prev.contains("pub(");
        let line = before.matches('\n').count() + 1;
        // Keep ` as ` visible after whitespace removal.
        let tree = code[at + 4..end].replace(" as ", "~as~");
        // Not a `use` item (the word in a string, say): a tree has only these characters.
        let is_tree = tree
            .chars()
            .all(|c| c.is_alphanumeric() || c.is_whitespace() || "_:{},*~".contains(c));
        if is_tree && tree.matches('{').count() == tree.matches('}').count() {
            out.push((line, tree, public));
        }
        i = end + 1;
    }
    out
}

/// Every inline path `crate::…`, `super::…` or `self::…` outside `use` statements, with its line.
fn inline_paths(code: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    // Blank the `use` statements so their paths are not counted twice.
    let bytes = code.as_bytes();
    let mut i = 0;
    let mut keep = vec![true; bytes.len()];
    while let Some(at) = find(&bytes[i..], b"use ").map(|k| k + i) {
        let prev = code[..at].trim_end();
        let word_start =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        let starts_item =
            prev.is_empty() || prev.ends_with([';', '{', '}', ']', ')']) || prev.ends_with("pub");
        if word_start && starts_item {
            if let Some(end) = code[at..].find(';') {
                for k in &mut keep[at..at + end] {
                    *k = false;
                }
                i = at + end;
                continue;
            }
        }
        i = at + 4;
    }
    let masked: String = code
        .char_indices()
        .map(|(k, c)| {
            if keep.get(k).copied().unwrap_or(true) || c == '\n' {
                c
            } else {
                ' '
            }
        })
        .collect();
    let mb = masked.as_bytes();
    for root in ["crate::", "super::", "self::"] {
        let mut i = 0;
        while let Some(at) = find(&mb[i..], root.as_bytes()).map(|k| k + i) {
            i = at + root.len();
            if at > 0
                && (mb[at - 1].is_ascii_alphanumeric() || mb[at - 1] == b'_' || mb[at - 1] == b':')
            {
                continue;
            }
            let mut end = at;
            while end < mb.len()
                && (mb[end].is_ascii_alphanumeric() || mb[end] == b'_' || mb[end] == b':')
            {
                end += 1;
            }
            let path: Vec<String> = masked[at..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            let line = masked[..at].matches('\n').count() + 1;
            out.push((line, path));
            i = end;
        }
    }
    out
}

impl ModuleGraph {
    /// Reads the crate whose root file is `root_file` (a `lib.rs` or `main.rs`).
    fn read(root_file: &Path) -> ModuleGraph {
        let mut g = ModuleGraph {
            modules: Default::default(),
            reexports: Default::default(),
            references: Default::default(),
        };
        let mut todo = vec![(Vec::<String>::new(), root_file.to_path_buf())];
        while let Some((module, file)) = todo.pop() {
            let code = code_of(&std::fs::read_to_string(&file).unwrap_or_default());
            let dir = match file.file_name().and_then(|n| n.to_str()) {
                Some("lib.rs" | "main.rs" | "mod.rs") => file.parent().unwrap().to_path_buf(),
                _ => file.with_extension(""),
            };
            for line in code.lines() {
                let l = line.trim();
                let l = l.strip_prefix("pub ").unwrap_or(l);
                let l = if l.starts_with("pub(") {
                    l.split_once(") ").map_or(l, |(_, r)| r)
                } else {
                    l
                };
                if let Some(name) = l.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                    let flat = dir.join(format!("{name}.rs"));
                    let nested = dir.join(name).join("mod.rs");
                    let child = if flat.exists() { flat } else { nested };
                    let mut m = module.clone();
                    m.push(name.to_string());
                    todo.push((m, child));
                }
            }
            g.modules.insert(module, file);
        }
        // Re-exports need every module known first (a relative `pub use child::x`).
        let files: Vec<(Vec<String>, PathBuf)> = g
            .modules
            .iter()
            .map(|(m, f)| (m.clone(), f.clone()))
            .collect();
        for (module, file) in &files {
            let code = code_of(&std::fs::read_to_string(file).unwrap_or_default());
            for (_, tree, public) in use_statements(&code) {
                if !public {
                    continue;
                }
                for (path, name) in expand_use_tree(&tree) {
                    if let Some(abs) = g.absolute(module, &path) {
                        g.reexports
                            .entry(module.clone())
                            .or_default()
                            .insert(name, abs);
                    }
                }
            }
        }
        for (module, file) in &files {
            let code = code_of(&std::fs::read_to_string(file).unwrap_or_default());
            let mut refs = Vec::new();
            let mut paths: Vec<(usize, Vec<String>)> = inline_paths(&code);
            for (line, tree, public) in use_statements(&code) {
                if public {
                    continue; // a re-export passes through: the users' references follow it
                }
                for (path, _) in expand_use_tree(&tree) {
                    paths.push((line, path));
                }
            }
            for (line, path) in paths {
                let path: Vec<String> = path.into_iter().filter(|s| s != "*").collect();
                let Some(abs) = g.absolute(module, &path) else {
                    continue;
                };
                if let Some(target) = g.resolve(abs, 0) {
                    let target_file = g.modules[&target].clone();
                    if &target_file != file {
                        refs.push(Reference {
                            target: target_file,
                            written: path.join("::"),
                            line,
                        });
                    }
                }
            }
            g.references.insert(file.clone(), refs);
        }
        g
    }

    /// `path` as written in `module`, made absolute (from the crate root); None for paths
    /// into other crates.
    fn absolute(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => {
                let mut m = module.to_vec();
                m.pop();
                m
            }
            name => {
                let mut child = module.to_vec();
                child.push(name.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                module.to_vec()
            }
        };
        let mut rest = &path[1..];
        if first != "crate" && first != "self" && first != "super" {
            rest = path;
        }
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module (a key of `modules`) that the absolute path `path` names or names an item
    /// of, following `pub use` re-exports.
    fn resolve(&self, path: Vec<String>, depth: usize) -> Option<Vec<String>> {
        if depth > 8 {
            return None;
        }
        let mut m: Vec<String> = Vec::new();
        for (i, seg) in path.iter().enumerate() {
            let mut child = m.clone();
            child.push(seg.clone());
            if self.modules.contains_key(&child) {
                m = child;
                continue;
            }
            if let Some(target) = self.reexports.get(&m).and_then(|r| r.get(seg)) {
                let mut t = target.clone();
                t.extend(path[i + 1..].iter().cloned());
                return self.resolve(t, depth + 1).or(Some(m));
            }
            return Some(m);
        }
        Some(m)
    }

    /// Every import circle: strongly connected sets of files, each as one cycle through them.
    fn circles(&self) -> Vec<Vec<String>> {
        let files: Vec<&PathBuf> = self.references.keys().collect();
        let index = |p: &PathBuf| files.iter().position(|f| *f == p);
        let edges: Vec<Vec<usize>> = files
            .iter()
            .map(|f| {
                let mut e: Vec<usize> = self.references[*f]
                    .iter()
                    .filter_map(|r| index(&r.target))
                    .collect();
                e.sort();
                e.dedup();
                e
            })
            .collect();
        // A cycle through `start`: breadth-first from its successors back to it.
        let mut seen_in_cycle = vec![false; files.len()];
        let mut out = Vec::new();
        for start in 0..files.len() {
            if seen_in_cycle[start] {
                continue;
            }
            let mut prev = vec![usize::MAX; files.len()];
            let mut queue = std::collections::VecDeque::new();
            for &n in &edges[start] {
                if prev[n] == usize::MAX {
                    prev[n] = start;
                    queue.push_back(n);
                }
            }
            let mut found = false;
            while let Some(n) = queue.pop_front() {
                if n == start {
                    found = true;
                    break;
                }
                for &s in &edges[n] {
                    if prev[s] == usize::MAX {
                        prev[s] = n;
                        queue.push_back(s);
                    }
                }
            }
            if found {
                let mut cycle = vec![start];
                let mut n = prev[start];
                while n != start {
                    cycle.push(n);
                    n = prev[n];
                }
                cycle.reverse();
                for &c in &cycle {
                    seen_in_cycle[c] = true;
                }
                let mut names: Vec<String> = cycle.iter().map(|&c| rel(files[c])).collect();
                names.push(rel(files[cycle[0]]));
                out.push(names);
            }
        }
        out
    }
}

/// Every crate root of the workspace: libraries, the driver and xtask (binaries under
/// `src/bin/` use their package's library as another crate).
fn crate_roots() -> Vec<PathBuf> {
    let mut roots = vec![root().join("src/main.rs"), root().join("xtask/src/main.rs")];
    for entry in std::fs::read_dir(root().join("crates"))
        .expect("crates/ exists")
        .flatten()
    {
        let lib = entry.path().join("src/lib.rs");
        if lib.exists() {
            roots.push(lib);
        }
    }
    roots.sort();
    roots
}

/// The layer of a file of the runtime's source directory `src`: the index in
/// [`STACKRT_LAYERS`] of its top-level module.
fn stackrt_layer(src: &Path, file: &Path) -> Option<usize> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let module = first.strip_suffix(".rs").unwrap_or(first);
    STACKRT_LAYERS.iter().position(|l| *l == module)
}

/// The runtime's rule violations of `graph`: imports of a higher layer, and top-level modules
/// that no layer names.
fn layer_violations(src: &Path, graph: &ModuleGraph) -> Vec<String> {
    let stackrt_layer = |f: &Path| stackrt_layer(src, f);
    let mut out = Vec::new();
    for (module, file) in &graph.modules {
        if module.len() == 1 && stackrt_layer(file).is_none() {
            out.push(format!(
                "{}: module `{}` is in no layer of STACKRT_LAYERS (tests/tidy.rs): place it",
                rel(file),
                module[0]
            ));
        }
    }
    for (file, refs) in &graph.references {
        let Some(own) = stackrt_layer(file) else {
            continue;
        };
        for r in refs {
            let Some(theirs) = stackrt_layer(&r.target) else {
                continue;
            };
            if theirs > own {
                out.push(format!(
                    "{}:{}: `{}` is in layer `{}`, above this file's layer `{}`: the runtime's \
                     imports point down only ({}); move the item down, or have the higher layer \
                     register a hook at start (ARCHITECTURE.md, \"The runtime's layers\")",
                    rel(file),
                    r.line,
                    r.written,
                    STACKRT_LAYERS[theirs],
                    STACKRT_LAYERS[own],
                    STACKRT_LAYERS.join(" < ")
                ));
            }
        }
    }
    out
}

#[test]
fn runtime_imports_point_down_the_layers() {
    let src = root().join("crates/stackrt/src");
    let graph = ModuleGraph::read(&src.join("lib.rs"));
    assert!(
        graph.modules.len() > 30,
        "the runtime's module tree was not read"
    );
    let violations = layer_violations(&src, &graph);
    assert!(
        violations.is_empty(),
        "runtime layer violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn no_import_circle_in_any_crate() {
    let mut circles = Vec::new();
    for krate in crate_roots() {
        let graph = ModuleGraph::read(&krate);
        for c in graph.circles() {
            circles.push(c.join(" -> "));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles between files:\n{}",
        circles.join("\n")
    );
}

#[test]
fn no_runtime_file_over_1000_lines() {
    let long: Vec<String> = rust_files()
        .into_iter()
        .filter(|p| p.starts_with(root().join("crates/stackrt/src")))
        .filter_map(|p| {
            let n = std::fs::read_to_string(&p)
                .unwrap_or_default()
                .lines()
                .count();
            (n > 1000).then(|| format!("{}: {n} lines", rel(&p)))
        })
        .collect();
    assert!(
        long.is_empty(),
        "runtime files over 1,000 lines (one concern per file):\n{}",
        long.join("\n")
    );
}

/// The checks above find what they are meant to: an upward import written three ways (inline,
/// a `use` group, through a re-export), an unplaced module, and a circle; and nothing in
/// comments, strings or test modules.
#[test]
fn the_module_graph_checks_find_violations() {
    let dir = std::env::temp_dir().join(format!("cmm-tidy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = [
        ("lib.rs", "//! x\npub mod base;\npub mod chunk;\npub mod green;\npub mod extra;\n"),
        ("base/mod.rs", "//! x\npub mod a;\npub mod b;\n"),
        ("base/a.rs", "//! x\nuse super::b::f;\npub fn g() { f() }\n"),
        ("base/b.rs", "//! x\npub fn f() { super::a::g() }\n"),
        (
            "chunk/mod.rs",
            "//! x\n// crate::green::sched::yield_now in a comment\npub mod global;\npub use global::entry;\n\
             const S: &str = \"crate::green::sched\";\n#[cfg(test)]\nmod tests {\n    use crate::green::sched;\n}\n",
        ),
        (
            "chunk/global.rs",
            "//! x\nuse crate::{base::a, green::{sched::{self, park}}};\n\
             pub fn entry() { crate::green::yield_now(); crate::green::run(); }\n",
        ),
        ("green/mod.rs", "//! x\npub mod sched;\npub use sched::run;\npub fn yield_now() {}\n"),
        ("green/sched.rs", "//! x\npub fn park() {}\npub fn run() { crate::chunk::entry() }\n"),
        ("extra.rs", "//! x\n"),
    ];
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let graph = ModuleGraph::read(&dir.join("lib.rs"));
    let violations = layer_violations(&dir, &graph);
    let has = |file: &str, line: usize, written: &str| {
        violations
            .iter()
            .any(|v| v.contains(&format!("{file}:{line}: `{written}` is in layer `green`")))
    };
    assert!(
        has("chunk/global.rs", 2, "crate::green::sched"),
        "{violations:#?}"
    );
    assert!(
        has("chunk/global.rs", 2, "crate::green::sched::park"),
        "{violations:#?}"
    );
    assert!(
        has("chunk/global.rs", 3, "crate::green::yield_now"),
        "{violations:#?}"
    );
    assert!(
        has("chunk/global.rs", 3, "crate::green::run"),
        "{violations:#?}"
    );
    assert!(violations
        .iter()
        .any(|v| v.contains("module `extra` is in no layer")));
    assert_eq!(
        violations.len(),
        5,
        "nothing from comments, strings or tests: {violations:#?}"
    );
    // `green::run` is re-exported from `green/sched.rs`, which calls back into chunk/global.rs.
    let circles = graph.circles();
    let text = format!("{circles:?}");
    assert!(
        text.contains("base/a.rs") && text.contains("base/b.rs"),
        "{text}"
    );
    assert!(
        text.contains("chunk/global.rs") && text.contains("green/sched.rs"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
