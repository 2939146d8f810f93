//! A run in parts: what one experiment measured, written to `OUT/parts/NAME.json` as soon as
//! the experiment ends, so that `--resume` can go on with a run that was stopped (a full run
//! takes longer than a working session on a 2-core machine) and measures only the experiments
//! it lacks. Each part keeps the session that measured it (when, on which machine, at which
//! commit): every executable of an experiment is measured in one session, so its ratios never
//! mix machines, and the report names the sessions when there were several.

use crate::build::Target;
use crate::experiments::Size;
use crate::machine::Machine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One invocation of the harness that measured parts of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// When it started (`machine::utc_stamp`).
    pub started: String,
    /// Nanoseconds since the epoch at its start: tells sessions of one minute apart.
    pub id: u128,
    pub machine: Machine,
    /// `git describe --always --dirty` of the workspace, if git could say.
    pub commit: Option<String>,
}

/// What every part of one run must share: results measured otherwise do not belong in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub size: Size,
    pub runs: usize,
    /// Code layouts per `cmm` executable (`--layouts`; 1 for runs from before the option).
    #[serde(default = "one_layout")]
    pub layouts: usize,
    pub round_budget_seconds: Option<f64>,
    pub targets: Vec<Target>,
    pub mechanisms: Vec<String>,
    pub peers: bool,
}

/// The directory of a run's parts.
pub fn dir(out: &Path) -> std::path::PathBuf {
    out.join("parts")
}

/// Writes `part`, the measurements of `experiment`, through a temporary file, so that a run
/// stopped while writing leaves no half part behind.
pub fn write<T: Serialize>(out: &Path, experiment: &str, part: &T) -> Result<(), String> {
    let d = dir(out);
    std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
    let path = d.join(format!("{experiment}.json"));
    let tmp = d.join(format!("{experiment}.json.tmp"));
    let text = serde_json::to_string(part).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The parts under `out` with their files (none if it has no parts directory).
pub fn read_all<T: DeserializeOwned>(out: &Path) -> Result<Vec<(PathBuf, T)>, String> {
    let d = dir(out);
    let Ok(entries) = std::fs::read_dir(&d) else {
        return Ok(Vec::new());
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut parts = Vec::new();
    for path in paths {
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let part: T = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a part of a run: {e}", path.display()))?;
        parts.push((path, part));
    }
    Ok(parts)
}

/// A session starting now.
pub fn new_session(root: &Path) -> Session {
    Session {
        started: crate::machine::utc_stamp(),
        id: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
        machine: Machine::detect(),
        commit: commit(root),
    }
}

/// The workspace's commit (`git describe --always --dirty`), if git can say.
pub fn commit(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(root)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn one_layout() -> usize {
    1
}
