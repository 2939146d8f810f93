//! Runs one command and reports its wall time and peak resident set size: the process the
//! experiment harness forks every measured run from.
//!
//! Usage: `runrss [--stack-kib N|unlimited] [--stdout FILE] -- PROGRAM ARGS...`
//!
//! The command runs with stdout on FILE (default `/dev/null`), stderr and the environment
//! inherited. `runrss` prints one line on its stdout:
//! `STATUS SECONDS MAXRSS_KIB MINOR_FAULTS MAJOR_FAULTS USER_SECONDS SYSTEM_SECONDS`, STATUS being
//! the raw wait status, SECONDS the wall time from just before `fork` to the end of `wait4`, the
//! rest from `wait4`'s rusage for that one child (all its threads).
//!
//! Why a separate small process: Linux carries a process's peak RSS across `execve` (the
//! high-water mark of the memory the child had before exec is kept in `ru_maxrss`). A child
//! forked from (or `vfork`ed sharing the memory of) the harness would report the harness's own
//! peak; a child forked from this program starts from its ~1 MiB, below any dynamically linked
//! program's own peak. `--stack-kib` sets the soft stack limit (`ulimit -s`) before the fork:
//! the traditional mechanisms' main-thread recursion needs it.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::exit;
use std::time::Instant;

fn usage() -> ! {
    eprintln!("usage: runrss [--stack-kib N|unlimited] [--stdout FILE] -- PROGRAM ARGS...");
    exit(2);
}

fn c_string(bytes: &[u8]) -> CString {
    CString::new(bytes).unwrap_or_else(|_| {
        eprintln!("runrss: an argument contains a NUL byte");
        exit(2)
    })
}

fn set_stack_limit(spec: &str) {
    let soft = if spec == "unlimited" {
        libc::RLIM_INFINITY
    } else {
        match spec.parse::<u64>() {
            Ok(kib) => kib * 1024,
            Err(_) => usage(),
        }
    };
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the rlimit struct we own.
    let ok = unsafe {
        libc::getrlimit(libc::RLIMIT_STACK, &mut limit) == 0 && {
            limit.rlim_cur = if limit.rlim_max == libc::RLIM_INFINITY {
                soft
            } else {
                soft.min(limit.rlim_max)
            };
            libc::setrlimit(libc::RLIMIT_STACK, &limit) == 0
        }
    };
    if !ok {
        eprintln!("runrss: cannot set the stack limit to {spec}");
        exit(2);
    }
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut stdout_path = CString::new("/dev/null").expect("no NUL");
    let mut i = 0;
    while i < args.len() {
        match args[i].to_str() {
            Some("--stack-kib") => {
                let spec = args
                    .get(i + 1)
                    .and_then(|s| s.to_str())
                    .unwrap_or_else(|| usage());
                set_stack_limit(spec);
                i += 2;
            }
            Some("--stdout") => {
                let path = args.get(i + 1).unwrap_or_else(|| usage());
                stdout_path = c_string(path.as_bytes());
                i += 2;
            }
            Some("--") => {
                i += 1;
                break;
            }
            _ => usage(),
        }
    }
    if i >= args.len() {
        usage();
    }
    // Everything the child needs is prepared before the fork: it only calls async-signal-safe
    // functions (open, dup2, execvp, _exit).
    let argv_owned: Vec<CString> = args[i..].iter().map(|a| c_string(a.as_bytes())).collect();
    let mut argv: Vec<*const libc::c_char> = argv_owned.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());

    let start = Instant::now();
    // SAFETY: this process is single-threaded, so the child may run any code; it only makes
    // the system calls below on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        eprintln!("runrss: fork: {}", std::io::Error::last_os_error());
        exit(2);
    }
    if pid == 0 {
        // SAFETY: the pointers are valid NUL-terminated strings and a NULL-terminated argv
        // owned by this (copied) address space; _exit never returns.
        unsafe {
            let fd = libc::open(
                stdout_path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                0o644,
            );
            if fd < 0 || libc::dup2(fd, 1) < 0 {
                libc::_exit(126);
            }
            libc::close(fd);
            libc::execvp(argv[0], argv.as_ptr());
            libc::_exit(127);
        }
    }
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage_out: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child; status and usage_out are valid for writes.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage_out) };
    let seconds = start.elapsed().as_secs_f64();
    if waited != pid {
        eprintln!("runrss: wait4: {}", std::io::Error::last_os_error());
        exit(2);
    }
    let mut out = std::io::stdout().lock();
    let cpu = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let _ = writeln!(
        out,
        "{status} {seconds:.9} {} {} {} {:.6} {:.6}",
        usage_out.ru_maxrss,
        usage_out.ru_minflt,
        usage_out.ru_majflt,
        cpu(usage_out.ru_utime),
        cpu(usage_out.ru_stime)
    );
}
