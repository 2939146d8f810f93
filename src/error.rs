//! The driver's error type: one `cmm: error: ...` message and the exit status that goes with it.
//!
//! It sits below every other module of the driver (the pipeline, linking, the runtime cache) so
//! that each can report failures without importing the others.

use std::fmt;

/// An error the driver reports as one `cmm: error: ...` message (several lines at most) and the
/// exit status that goes with it. Front-end diagnostics are already rendered: `message` is then
/// printed as is.
#[derive(Debug)]
pub struct DriverError {
    pub status: u8,
    pub message: String,
    /// The message is rendered diagnostics, printed without the `cmm: error:` prefix.
    pub rendered: bool,
}

impl DriverError {
    /// A failure of the compilation itself (exit status 1).
    pub fn failure(message: impl Into<String>) -> DriverError {
        DriverError {
            status: 1,
            message: message.into(),
            rendered: false,
        }
    }
    /// A request `cmm` cannot serve: a combination of options not implemented (exit status 2).
    pub fn unsupported(message: impl Into<String>) -> DriverError {
        DriverError {
            status: 2,
            message: message.into(),
            rendered: false,
        }
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rendered {
            f.write_str(self.message.trim_end())
        } else {
            write!(f, "cmm: error: {}", self.message)
        }
    }
}
