//! Linking: the system C compiler (`cc`, or `$CC`) plus the `stackrt` runtime that `cmm`
//! carries (see `runtime.rs`).
//!
//! The command is `cc -m64|-m32 -no-pie OBJ... libstackrt.a <native libs> -o OUT`. `-no-pie`
//! keeps function addresses below 2 GiB (a C-- function name is an `int`) and lets i686 code use
//! absolute addresses. The native libraries are what
//! `cargo rustc -p stackrt -- --print native-static-libs` reports for the runtime (the same for
//! both targets on glibc).

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use crate::cli::Target;
use crate::error::DriverError;
use crate::runtime::{self, I686_SETUP_HINT};

/// The system libraries the Rust staticlib `stackrt` needs (`--print native-static-libs`).
pub const NATIVE_STATIC_LIBS: [&str; 7] = [
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// The C compiler command: `$CC` split on whitespace (so `CC="gcc -fuse-ld=bfd"` works), else
/// `cc`.
pub fn c_compiler() -> (OsString, Vec<OsString>) {
    let cc = std::env::var("CC").ok().filter(|s| !s.trim().is_empty());
    match cc {
        Some(cc) => {
            let mut words = cc.split_whitespace().map(OsString::from);
            let prog = words.next().unwrap_or_else(|| "cc".into());
            (prog, words.collect())
        }
        None => ("cc".into(), Vec::new()),
    }
}

/// Links objects with the runtime of `target` into the executable `out`.
pub fn link(target: Target, objects: &[&Path], out: &Path) -> Result<(), DriverError> {
    let runtime = runtime::archive(target)?;
    let (cc, cc_args) = c_compiler();
    let mut cmd = Command::new(&cc);
    cmd.args(&cc_args);
    cmd.arg(match target {
        Target::X86_64 => "-m64",
        Target::I686 => "-m32",
    });
    cmd.arg("-no-pie");
    cmd.args(objects);
    cmd.arg(&runtime);
    cmd.args(NATIVE_STATIC_LIBS);
    cmd.arg("-o").arg(out);
    let output = cmd.output().map_err(|e| {
        DriverError::failure(format!(
            "cannot run the C compiler '{}' (set CC to choose another): {e}",
            cc.to_string_lossy()
        ))
    })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut msg = format!(
        "linking failed ({} exited with {}):",
        cc.to_string_lossy(),
        output.status
    );
    for line in stderr.lines() {
        msg.push_str("\n  ");
        msg.push_str(line);
    }
    if target == Target::I686 {
        msg.push_str(&format!("\n{I686_SETUP_HINT}"));
    }
    Err(DriverError::failure(msg))
}
