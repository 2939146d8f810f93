//! Reading a schedule trace file for `replay:FILE` and `relaxed:FILE`: a regular file is mapped
//! from the page cache instead of copied into a fresh buffer (a trace of an IRS benchmark is
//! tens of megabytes, and zeroing and filling a buffer that size was a tenth of a short
//! relaxed replay); anything else (a pipe, `/dev/stdin`) is read as before.

use std::fs::File;
use std::io::Read;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

/// A trace's text, mapped or read.
pub enum TraceText {
    Mapped { ptr: NonNull<u8>, len: usize },
    Read(String),
}

impl TraceText {
    /// The text; the file is checked to be UTF-8 (the error `read_to_string` gives otherwise).
    pub fn text(&self) -> std::io::Result<&str> {
        match self {
            TraceText::Read(s) => Ok(s),
            TraceText::Mapped { ptr, len } => {
                // SAFETY: `ptr` maps `len` readable bytes until `drop`; the mapping is private
                // and read-only, so nothing in this process changes it meanwhile.
                let bytes = unsafe { core::slice::from_raw_parts(ptr.as_ptr(), *len) };
                core::str::from_utf8(bytes).map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "stream did not contain valid UTF-8",
                    )
                })
            }
        }
    }
}

impl Drop for TraceText {
    fn drop(&mut self) {
        if let TraceText::Mapped { ptr, len } = self {
            // SAFETY: the mapping made by `read` with this length, no longer borrowed (`text`'s
            // result borrows `self`).
            let _ = unsafe { munmap(ptr.cast(), *len) };
        }
    }
}

/// The text of the trace at `path`.
pub fn read(path: &str) -> std::io::Result<TraceText> {
    let mut f = File::open(path)?;
    let meta = f.metadata()?;
    if meta.is_file() {
        if let Some(len) = usize::try_from(meta.len()).ok().and_then(NonZeroUsize::new) {
            // SAFETY: a new private read-only mapping of an open file; it aliases nothing.
            let mapped = unsafe {
                mmap(
                    None,
                    len,
                    ProtFlags::PROT_READ,
                    MapFlags::MAP_PRIVATE | MapFlags::MAP_POPULATE,
                    &f,
                    0,
                )
            };
            if let Ok(p) = mapped {
                return Ok(TraceText::Mapped {
                    ptr: p.cast(),
                    len: len.get(),
                });
            }
        }
    }
    let mut s = String::new();
    f.read_to_string(&mut s)?;
    Ok(TraceText::Read(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_pipes_and_bad_text_read_as_read_to_string_does() {
        let dir = std::env::temp_dir().join(format!("stackrt-trace-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases: [(&str, &[u8]); 3] = [
            ("full", b"stackrt-sched-trace 1 random:1\n0\n1\n"),
            ("empty", b""),
            ("bad", b"stackrt \xff\n"),
        ];
        for (name, bytes) in cases {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            let path = p.to_str().unwrap();
            let ours = read(path).unwrap();
            let ours = ours.text().map(str::to_string).map_err(|e| e.to_string());
            let std = std::fs::read_to_string(path).map_err(|e| e.to_string());
            assert_eq!(ours, std, "{name}");
        }
        assert!(read(dir.join("missing").to_str().unwrap()).is_err());
        // Not a regular file: read, not mapped.
        assert!(matches!(
            read("/proc/self/stat").unwrap(),
            TraceText::Read(_)
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
