//! An installed `cmm` carries its runtime: a copy of the binary alone (what `cargo install`
//! puts in `<root>/bin`), run from an unrelated directory with the build tree's runtime archives
//! hidden, compiles and runs programs on both targets; concurrent first compiles share one cache
//! file; an unwritable cache directory falls back to the temporary directory.
//!
//! A real `cargo install --path . --root DIR` would rebuild the whole compiler in release mode
//! (minutes on CI's 2 cores) to produce the same binary; copying the one `cargo test` built
//! exercises the same thing: the binary and nothing else.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// The tests of this file hide the same directories: one at a time.
static HIDING: Mutex<()> = Mutex::new(());

const HIDDEN_SUFFIX: &str = "hidden-by-install-test";

/// The build tree's runtime archives (`target/<profile>/build/cmm-*/out/stackrt-target`),
/// renamed away while alive and restored on drop (also after a failed assertion).
struct HiddenRuntimes {
    moved: Vec<(PathBuf, PathBuf)>,
}

impl HiddenRuntimes {
    fn hide() -> HiddenRuntimes {
        // target/<profile>/deps/install-<hash>: the target directory is three levels up.
        let exe = std::env::current_exe().expect("the test's path");
        let target = exe
            .ancestors()
            .nth(3)
            .expect("the test runs from target/<profile>/deps");
        let mut moved = Vec::new();
        for profile in ["debug", "release"] {
            let Ok(builds) = std::fs::read_dir(target.join(profile).join("build")) else {
                continue;
            };
            for build in builds.flatten() {
                if !build.file_name().to_string_lossy().starts_with("cmm-") {
                    continue;
                }
                let dir = build.path().join("out/stackrt-target");
                let away = build
                    .path()
                    .join(format!("out/stackrt-target.{HIDDEN_SUFFIX}"));
                // A test killed while hiding leaves the renamed directory: put it back first.
                if away.exists() && !dir.exists() {
                    std::fs::rename(&away, &dir).expect("restore a directory hidden earlier");
                }
                if dir.exists() {
                    std::fs::rename(&dir, &away).expect("hide the build's runtime archives");
                    moved.push((dir, away));
                }
            }
        }
        assert!(
            !moved.is_empty(),
            "found no runtime archives under {} to hide",
            target.display()
        );
        HiddenRuntimes { moved }
    }
}

impl Drop for HiddenRuntimes {
    fn drop(&mut self) {
        for (dir, away) in &self.moved {
            let _ = std::fs::rename(away, dir);
        }
    }
}

/// An installation root with `bin/cmm` (a copy of the built binary), a home, a cache and a
/// temporary directory of its own.
struct Installed {
    root: tempfile::TempDir,
}

impl Installed {
    fn new() -> Installed {
        let root = tempfile::tempdir().expect("temporary directory");
        for dir in ["bin", "home", "tmp", "work"] {
            std::fs::create_dir(root.path().join(dir)).unwrap();
        }
        std::fs::copy(env!("CARGO_BIN_EXE_cmm"), root.path().join("bin/cmm"))
            .expect("copy cmm into the installation root");
        Installed { root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// `cmm ARGS` from the installation's work directory, with a fresh environment for the
    /// cache: HOME, TMPDIR and (if given) XDG_CACHE_HOME all inside the root.
    fn cmm(&self, args: &[&str], xdg_cache: Option<&Path>) -> Command {
        let mut cmd = Command::new(self.path("bin/cmm"));
        cmd.args(args)
            .current_dir(self.path("work"))
            .env("HOME", self.path("home"))
            .env("TMPDIR", self.path("tmp"))
            .env_remove("XDG_CACHE_HOME");
        if let Some(dir) = xdg_cache {
            cmd.env("XDG_CACHE_HOME", dir);
        }
        cmd
    }
}

fn text(o: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Sums 1..=n by recursion in a second thread, so the runtime's threads and (under lookahead)
/// its stack chunks are linked in and used.
const PROGRAM: &str = r#"
extern int printf(char *fmt, ...);
extern int atoi(char *s);
extern int sthread_create(void *arg, int fp, int fpStackSize);
extern int sthread_join(int handle, void **retval);

int sum(int n) {
    if (n == 0) return 0;
    return n + sum(n - 1);
}

void *body(void *arg) {
    return (void *) sum((int) arg);
}

int main(int argc, char **argv) {
    void *r;
    int t;
    t = sthread_create((void *) atoi(argv[1]), (int) body, 1048576);
    sthread_join(t, &r);
    printf("sum %d\n", (int) r);
    return 0;
}
"#;

/// The sum printed for `n`, by Gauss's formula (independent of the compiler; `n` small enough
/// for a 32-bit `int`).
fn expected(n: u64) -> String {
    format!("sum {}\n", n * (n + 1) / 2)
}

/// Files under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn the_installed_binary_compiles_and_runs_on_both_targets_without_the_build_tree() {
    let _one = HIDING.lock().unwrap_or_else(|e| e.into_inner());
    let installed = Installed::new();
    let _hidden = HiddenRuntimes::hide();
    std::fs::write(installed.path("work/prog.cm"), PROGRAM).unwrap();

    let version = installed.cmm(&["--version"], None).output().unwrap();
    let version_text = String::from_utf8_lossy(&version.stdout).into_owned();
    assert!(
        version.status.success()
            && version_text.contains(env!("CARGO_PKG_VERSION"))
            && version_text.contains("runtimes: x86_64, i686"),
        "cmm --version should name the version and both runtimes (run `cargo xtask setup` for \
         i686): {}",
        text(&version)
    );

    let cache = installed.path("cache");
    for (target, mech, n) in [
        ("x86_64", "traditional", 1000u64),
        ("x86_64", "lookahead", 50_000),
        ("i686", "traditional", 1000),
        ("i686", "lookahead", 50_000),
    ] {
        let exe = format!("prog-{target}-{mech}");
        let out = installed
            .cmm(
                &[
                    "compile", "prog.cm", "--target", target, "--mech", mech, "-o", &exe,
                ],
                Some(&cache),
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{target} {mech}: {}", text(&out));
        let run = Command::new(installed.path("work").join(&exe))
            .arg(n.to_string())
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&run.stdout),
            expected(n),
            "{target} {mech}: {}",
            text(&run)
        );
    }
    // One archive per target, in the per-version directory under XDG_CACHE_HOME, and nothing
    // left in HOME or the temporary directory.
    let cached = files_under(&cache);
    let version_dir = cache.join("cmm").join(env!("CARGO_PKG_VERSION"));
    assert_eq!(cached.len(), 2, "{cached:?}");
    for triple in ["x86_64-unknown-linux-gnu", "i686-unknown-linux-gnu"] {
        assert!(
            cached.iter().any(|p| p.parent() == Some(&version_dir)
                && p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&format!("libstackrt-{triple}-"))),
            "no {triple} archive in {}: {cached:?}",
            version_dir.display()
        );
    }
    assert!(files_under(&installed.path("home")).is_empty());
    assert!(files_under(&installed.path("tmp")).is_empty());
}

#[test]
fn concurrent_first_compiles_share_one_cache_file() {
    let _one = HIDING.lock().unwrap_or_else(|e| e.into_inner());
    let installed = Installed::new();
    let _hidden = HiddenRuntimes::hide();
    std::fs::write(installed.path("work/prog.cm"), PROGRAM).unwrap();
    // No XDG_CACHE_HOME: the cache is $HOME/.cache.
    let children: Vec<_> = (0..4)
        .map(|i| {
            installed
                .cmm(&["compile", "prog.cm", "-o", &format!("p{i}")], None)
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "compile {i}: {}", text(&out));
        let run = Command::new(installed.path("work").join(format!("p{i}")))
            .arg("100")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&run.stdout), expected(100));
    }
    // Every writer renamed its temporary file over the same name: one file, no leftovers.
    let cached = files_under(&installed.path("home/.cache/cmm"));
    assert_eq!(cached.len(), 1, "{cached:?}");
}

#[test]
fn an_unwritable_cache_falls_back_to_the_temporary_directory() {
    let _one = HIDING.lock().unwrap_or_else(|e| e.into_inner());
    let installed = Installed::new();
    let _hidden = HiddenRuntimes::hide();
    std::fs::write(installed.path("work/prog.cm"), PROGRAM).unwrap();
    // A file where the cache directory should be: nothing can be created under it.
    let not_a_dir = installed.path("cache-is-a-file");
    std::fs::write(&not_a_dir, "").unwrap();
    let out = installed
        .cmm(&["run", "prog.cm", "--", "10"], Some(&not_a_dir))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected(10));
    let in_tmp = files_under(&installed.path("tmp"));
    assert!(
        in_tmp.iter().any(|p| p
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("libstackrt-x86_64")),
        "{in_tmp:?}"
    );
}
