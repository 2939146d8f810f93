//! Why a variant did not run, or not everywhere: the notes every step of the harness writes
//! (the experiments' rounds and the MTSS seed's bisections) and the report lists. Apart from
//! the harness so that the steps it calls can write them without importing it.

use crate::build::Target;

/// A variant that did not run (at one point, or at all).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Note {
    #[serde(deserialize_with = "crate::persist::static_name")]
    pub experiment: crate::persist::Name,
    pub target: Target,
    pub variant: String,
    /// `None`: the whole experiment.
    pub x: Option<f64>,
    pub kind: NoteKind,
    pub text: String,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum NoteKind {
    /// The experiment measures something the mechanism does not have (the hot split of a
    /// fixed stack); not run, and not a failure.
    NotApplicable,
    /// Did not build (mechanism not implemented, peer missing).
    NotAvailable,
    /// A fixed stack could not run it (does not fit in memory or the address space, or crashed).
    FixedStackCannot,
    /// Ran out of a resource of this machine (memory, kernel memory mappings, threads).
    OutOfResources,
    /// A peer stopped at a limit of its own (Go's largest goroutine stack).
    PeerLimit,
    /// Failed or printed something else than the others.
    Failed,
}
