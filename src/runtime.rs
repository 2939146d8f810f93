//! The `stackrt` runtime archives `cmm` carries: embedded in the binary at build time and written
//! to a per-version cache directory on first use, because the C linker needs a file.
//!
//! Embedding (instead of an absolute path into the build tree, or files installed beside the
//! binary) keeps `cargo install` (from a path or a git URL) working after the build tree is
//! gone: cargo installs one binary and nothing else. The cost is the binary's size (the archives
//! include Rust's `std`, 20-25 MB each).
//!
//! Where the archive goes: `$XDG_CACHE_HOME/cmm/<version>/` (an absolute `XDG_CACHE_HOME` only,
//! as the XDG spec says), else `$HOME/.cache/cmm/<version>/`, else (or when those cannot be
//! written) `<temp dir>/cmm-<uid>/<version>/`, a directory of our own with mode 0700. The file is
//! `libstackrt-<triple>-<hash>.a`: the hash of the bytes tells a rebuilt runtime of the same
//! version from a stale copy. Concurrent compiles are safe: each writes a temporary file in the
//! same directory and renames it into place (atomic), so a reader sees no file or the whole one.
//!
//! Every rebuilt runtime of one version gets a file of its own, so a cache written by many
//! builds (a developer's, or `cargo install --git` again and again) would only grow: a compile
//! that finds its archive marks it used (its modification time), and one that writes a new
//! archive removes the same target's archives of other builds unused for [`STALE_AFTER`]. A
//! `cmm` still in use keeps its own archive fresh, and one that finds its archive gone writes it
//! again.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::cli::Target;
use crate::error::DriverError;

/// One archive embedded by `build.rs`.
pub struct EmbeddedArchive {
    pub bytes: &'static [u8],
    /// FNV-1a of `bytes`, computed at build time.
    pub hash: u64,
}

mod generated {
    use super::EmbeddedArchive;
    include!(concat!(env!("OUT_DIR"), "/runtimes.rs"));
}

/// The message for a missing i686 toolchain (Rust target or gcc-multilib).
pub const I686_SETUP_HINT: &str = "the i686 target needs the Rust target i686-unknown-linux-gnu \
     and gcc-multilib; run 'cargo xtask setup'";

/// The embedded archive of `target`, or why this `cmm` was built without it.
pub fn embedded(target: Target) -> Result<&'static EmbeddedArchive, &'static str> {
    match target {
        Target::X86_64 => generated::X86_64.as_ref().map_err(|e| *e),
        Target::I686 => generated::I686.as_ref().map_err(|e| *e),
    }
}

/// The Rust target triple of a runtime archive.
pub fn triple(target: Target) -> &'static str {
    match target {
        Target::X86_64 => "x86_64-unknown-linux-gnu",
        Target::I686 => "i686-unknown-linux-gnu",
    }
}

/// `cmm --version`'s text: the version and the targets whose runtimes this binary carries.
pub fn version_text() -> String {
    let targets: Vec<String> = [Target::X86_64, Target::I686]
        .iter()
        .map(|&t| match embedded(t) {
            Ok(_) => t.name().to_string(),
            Err(why) => format!("{} missing ({why})", t.name()),
        })
        .collect();
    format!(
        "{} (runtimes: {})",
        env!("CARGO_PKG_VERSION"),
        targets.join(", ")
    )
}

/// The directories the archive may be written to, in order of preference.
fn cache_dirs() -> Vec<PathBuf> {
    let version = env!("CARGO_PKG_VERSION");
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let mut dirs = Vec::new();
    if let Some(xdg) = absolute("XDG_CACHE_HOME") {
        dirs.push(xdg.join("cmm").join(version));
    } else if let Some(home) = absolute("HOME") {
        dirs.push(home.join(".cache/cmm").join(version));
    }
    dirs.push(private_temp_dir().join(version));
    dirs
}

/// `<temp dir>/cmm-<uid>`: per user, so that no other user's files are ever linked.
fn private_temp_dir() -> PathBuf {
    // The owner of /proc/self is this process's user (no libc call needed).
    let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
    std::env::temp_dir().join(format!("cmm-{uid}"))
}

/// Creates `dir` if needed; in the shared temp directory it must be ours and not writable by
/// others (another user could otherwise plant an archive there).
fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let shared = private_temp_dir();
    if dir.starts_with(&shared) {
        let meta = std::fs::metadata(&shared)?;
        let me = std::fs::metadata("/proc/self")?.uid();
        if meta.uid() != me || meta.permissions().mode() & 0o022 != 0 {
            return Err(std::io::Error::other(format!(
                "{} belongs to another user or is writable by others",
                shared.display()
            )));
        }
    }
    Ok(())
}

/// How long an archive of another build stays in the cache unused (module docs).
pub const STALE_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

/// The archive at `path`, written there first if it is missing (atomically: temporary file and
/// rename). Returns whether it wrote it; a file found is marked used (best effort).
fn ensure_file(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64) {
        let _ = std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        return Ok(false);
    }
    let dir = path.parent().expect("the cache file has a directory");
    prepare_dir(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".libstackrt-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(true)
}

/// Removes from `dir` the archives of `triple` other than `keep` that were not used since
/// `now - STALE_AFTER` (module docs); errors are ignored (another compile may remove them too).
fn prune_stale(dir: &Path, triple: &str, keep: &str, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("libstackrt-{triple}-");
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if name == keep || !name.starts_with(&prefix) || !name.ends_with(".a") {
            continue;
        }
        let used = e.metadata().and_then(|m| m.modified());
        if used.is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE_AFTER)) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The message for a runtime this `cmm` was built without (`why`: the build's reason).
fn missing(target: Target, why: &str) -> String {
    match target {
        Target::I686 => format!(
            "this cmm carries no i686 runtime (stackrt): {why}; {I686_SETUP_HINT}, then rebuild \
             or reinstall cmm"
        ),
        Target::X86_64 => {
            format!("this cmm carries no x86-64 runtime (stackrt): {why}; rebuild or reinstall cmm")
        }
    }
}

/// The runtime archive of `target` as a file the linker can read, written to the cache on first
/// use.
pub fn archive(target: Target) -> Result<PathBuf, DriverError> {
    let archive = embedded(target).map_err(|why| DriverError::failure(missing(target, why)))?;
    let file = format!("libstackrt-{}-{:016x}.a", triple(target), archive.hash);
    let mut failures = Vec::new();
    for dir in cache_dirs() {
        let path = dir.join(&file);
        match ensure_file(&path, archive.bytes) {
            Ok(written) => {
                if written {
                    prune_stale(&dir, triple(target), &file, SystemTime::now());
                }
                return Ok(path);
            }
            Err(e) => failures.push(format!("{}: {e}", dir.display())),
        }
    }
    Err(DriverError::failure(format!(
        "cannot write the {} runtime archive to a cache directory (set XDG_CACHE_HOME to a \
         writable directory): {}",
        target.name(),
        failures.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runtime_says_which_why_and_what_to_do() {
        let m = missing(
            Target::I686,
            "the Rust target i686-unknown-linux-gnu is not installed",
        );
        assert!(m.starts_with("this cmm carries no i686 runtime (stackrt): the Rust target"));
        assert!(m.contains("cargo xtask setup") && m.ends_with("rebuild or reinstall cmm"));
        let m = missing(Target::X86_64, "building stackrt failed: error[E0425]");
        assert!(m.contains("no x86-64 runtime") && m.contains("E0425"));
    }

    #[test]
    fn the_cache_honours_an_absolute_xdg_cache_home_only() {
        // The XDG base directory spec: a relative XDG_CACHE_HOME is invalid and ignored. The
        // environment is the process's: this is the only test of this binary that reads it.
        let version = env!("CARGO_PKG_VERSION");
        std::env::set_var("XDG_CACHE_HOME", "/somewhere/cache");
        std::env::set_var("HOME", "/home/someone");
        assert_eq!(
            cache_dirs()[0],
            Path::new("/somewhere/cache/cmm").join(version)
        );
        std::env::set_var("XDG_CACHE_HOME", "relative/cache");
        assert_eq!(
            cache_dirs()[0],
            Path::new("/home/someone/.cache/cmm").join(version)
        );
        // The last resort is always the private temporary directory.
        assert!(cache_dirs()
            .last()
            .unwrap()
            .starts_with(std::env::temp_dir()));
    }

    /// Archives of other builds go once unused for `STALE_AFTER`; this build's, other
    /// targets' and unrelated files stay; a found archive is marked used.
    #[test]
    fn stale_archives_of_other_builds_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let t = "x86_64-unknown-linux-gnu";
        let now = SystemTime::now();
        let old = now - STALE_AFTER - Duration::from_secs(60);
        let files = [
            (format!("libstackrt-{t}-0000000000000001.a"), old, false),
            (format!("libstackrt-{t}-0000000000000002.a"), now, true),
            (format!("libstackrt-{t}-0000000000000003.a"), old, true),
            (
                "libstackrt-i686-unknown-linux-gnu-0000000000000004.a".to_string(),
                old,
                true,
            ),
            ("notes.txt".to_string(), old, true),
        ];
        for (name, mtime, _) in &files {
            let f = std::fs::File::create(dir.path().join(name)).unwrap();
            f.set_modified(*mtime).unwrap();
        }
        let keep = &files[2].0;
        prune_stale(dir.path(), t, keep, now);
        for (name, _, stays) in &files {
            assert_eq!(dir.path().join(name).exists(), *stays, "{name}");
        }
        // Found again: marked used.
        let kept = dir.path().join(keep);
        assert!(!ensure_file(&kept, b"").unwrap());
        let used = std::fs::metadata(&kept).unwrap().modified().unwrap();
        assert!(used > old + Duration::from_secs(30));
    }
}
