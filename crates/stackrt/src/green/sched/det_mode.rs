//! The deterministic mode's setup: its scheduler from `STACKRT_SCHED` and
//! `STACKRT_SCHED_TRACE`, its lock, and the trace flushed at exit.

use std::sync::{Mutex, MutexGuard};

use super::{fail, GreenPtr, SCHED};
use crate::green::det::{Det, Policy};

/// The deterministic scheduler of `STACKRT_SCHED` / `STACKRT_SCHED_TRACE`, if set.
pub(super) fn from_env() -> Option<Det<GreenPtr>> {
    let v = std::env::var("STACKRT_SCHED").ok()?;
    if v.trim().starts_with("relaxed:") {
        // Relaxed replay runs on every worker (`crate::race::relaxed`).
        return None;
    }
    let policy =
        Policy::parse(&v).unwrap_or_else(|e| fail(&format!("stackrt: STACKRT_SCHED={v:?}: {e}")));
    let cannot_read = |path: &str, e: std::io::Error| -> ! {
        fail(&format!("stackrt: STACKRT_SCHED: cannot read {path}: {e}"))
    };
    let replay = match &policy {
        Policy::Replay { path } => Some((
            path.clone(),
            crate::race::trace_file::read(path).unwrap_or_else(|e| cannot_read(path, e)),
        )),
        _ => None,
    };
    let replay_text = replay
        .as_ref()
        .map(|(path, r)| r.text().unwrap_or_else(|e| cannot_read(path, e)));
    let trace = std::env::var("STACKRT_SCHED_TRACE").ok().map(|path| {
        std::fs::File::create(&path).unwrap_or_else(|e| {
            fail(&format!(
                "stackrt: STACKRT_SCHED_TRACE: cannot create {path}: {e}"
            ))
        })
    });
    Some(
        Det::new(policy, replay_text, trace)
            .unwrap_or_else(|e| fail(&format!("stackrt: STACKRT_SCHED: {e}"))),
    )
}

/// The deterministic scheduler's lock (a panic while it was held leaves it usable).
pub(super) fn lock(d: &Mutex<Det<GreenPtr>>) -> MutexGuard<'_, Det<GreenPtr>> {
    d.lock().unwrap_or_else(|e| e.into_inner())
}

/// At exit: the trace's last decisions reach its file.
pub(super) extern "C" fn flush_trace_at_exit() {
    if let Some(d) = SCHED.get().and_then(|s| s.det.as_ref()) {
        lock(d).flush();
    }
}
