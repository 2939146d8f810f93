//! What a program sees when the chunk runtime must stop it, and the statistics report: each
//! case runs in a child process (this test binary re-executed with `CHUNK_CHILD=<case>`), and
//! the parent checks the exit status and the exact stderr text. This binary defines no
//! `__cmm_chunk_size`, so the default 32 KiB chunks apply.

use std::process::Command;

use stackrt::chunk::{
    stackrt_chunk_overflow, stackrt_chunk_size, stackrt_chunk_thread_enter,
    stackrt_chunk_thread_exit, stackrt_chunk_underflow, FATAL_EXIT_STATUS,
};

/// Runs `case` in a child; returns (exit code, stderr).
fn child(case: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env("CHUNK_CHILD", case)
        .env_remove("STACKRT_STATS")
        .env_remove("STACKRT_STACK_LIMIT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

/// The stderr lines that come from the runtime (the test harness prints nothing on stderr
/// for a passing or exiting child, but be robust).
fn runtime_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("stackrt: "))
        .collect()
}

/// Replaces the kernel thread id (varies per run) with `N`.
fn no_tid(line: &str) -> String {
    match (line.find("(tid "), line.find("):")) {
        (Some(a), Some(b)) if a < b => format!("{}(tid N{}", &line[..a], &line[b..]),
        _ => line.to_string(),
    }
}

fn enter() -> *mut stackrt::chunk::ChunkHeader {
    let native = 0u64;
    stackrt_chunk_thread_enter(&native as *const u64 as usize & !15)
}

/// The child side: does what `CHUNK_CHILD` says. Without it (the normal test run) it has
/// nothing to do.
#[test]
fn child_entry() {
    let Ok(case) = std::env::var("CHUNK_CHILD") else {
        return;
    };
    match case.as_str() {
        "limit" => {
            let a = enter();
            let b = stackrt_chunk_overflow(a, a as usize - 100, 500);
            stackrt_chunk_overflow(b, b as usize - 100, 500);
        }
        "reserve" => {
            let a = enter();
            stackrt_chunk_overflow(a, a as usize - 100, 40000);
        }
        "mismatch" => {
            let a = enter();
            stackrt_chunk_underflow((a as usize - 4096) as *mut _);
        }
        "not_entered" => {
            // This thread never entered chunked code.
            stackrt_chunk_underflow(std::ptr::null_mut());
        }
        "double_exit" => {
            let _a = enter();
            stackrt_chunk_thread_exit();
            stackrt_chunk_thread_exit();
        }
        "stats" => {
            let a = enter();
            assert_eq!(stackrt_chunk_size(), 32768);
            for _ in 0..3 {
                let b = stackrt_chunk_overflow(a, a as usize - 1000, 2000);
                stackrt_chunk_underflow(b);
            }
            stackrt_chunk_thread_exit();
            // Returning ends the test binary normally: exit() runs the atexit report.
            return;
        }
        other => panic!("unknown case {other}"),
    }
    unreachable!("the runtime should have ended the process");
}

#[test]
fn stack_limit_is_a_clear_one_line_error() {
    let (code, err) = child("limit", &[("STACKRT_STACK_LIMIT", "64K")]);
    assert_eq!(code, Some(FATAL_EXIT_STATUS), "{err}");
    let lines = runtime_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert_eq!(
        no_tid(lines[0]),
        "stackrt: thread 0 (tid N): stack limit exceeded: 65536 bytes of stack chunks in use, \
         32768 more needed, limit 65536 bytes (set STACKRT_STACK_LIMIT to change it)"
    );
}

#[test]
fn oversized_reserve_is_reported() {
    let (code, err) = child("reserve", &[]);
    assert_eq!(code, Some(FATAL_EXIT_STATUS), "{err}");
    let cap = if cfg!(target_pointer_width = "64") {
        32688
    } else {
        32720
    };
    assert_eq!(
        runtime_lines(&err)
            .iter()
            .map(|l| no_tid(l))
            .collect::<Vec<_>>(),
        [format!(
            "stackrt: thread 0 (tid N): a call needs 40000 bytes of stack, more than a chunk \
             holds ({cap}); recompile with a larger --chunk-size"
        )]
    );
}

#[test]
fn broken_chain_is_reported_not_followed() {
    let (code, err) = child("mismatch", &[]);
    assert_eq!(code, Some(FATAL_EXIT_STATUS), "{err}");
    let lines = runtime_lines(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("): corrupted stack chunk chain: current chunk header is 0x"),
        "{err}"
    );
}

#[test]
fn handler_without_runtime_is_reported() {
    let (code, err) = child("not_entered", &[]);
    assert_eq!(code, Some(FATAL_EXIT_STATUS), "{err}");
    assert_eq!(
        runtime_lines(&err)
            .iter()
            .map(|l| no_tid(l))
            .collect::<Vec<_>>(),
        [
            "stackrt: thread (tid N): stack chunk handler called on a thread that is not running \
          on chunks"
        ]
    );
}

#[test]
fn double_exit_is_reported() {
    let (code, err) = child("double_exit", &[]);
    assert_eq!(code, Some(FATAL_EXIT_STATUS), "{err}");
    assert_eq!(
        runtime_lines(&err).iter().map(|l| no_tid(l)).collect::<Vec<_>>(),
        ["stackrt: thread 0 (tid N): stack chunk handler called on a thread that is not running \
          on chunks"]
    );
}

#[test]
fn bad_limit_setting_is_reported() {
    let (code, err) = child("limit", &[("STACKRT_STACK_LIMIT", "lots")]);
    assert_eq!(code, Some(FATAL_EXIT_STATUS), "{err}");
    assert_eq!(
        runtime_lines(&err),
        ["stackrt: STACKRT_STACK_LIMIT=\"lots\" is not a byte count (examples: 8388608, 64M, 1G)"]
    );
    let (code, err) = child("limit", &[("STACKRT_STACK_LIMIT", "4096")]);
    assert_eq!(code, Some(FATAL_EXIT_STATUS), "{err}");
    assert_eq!(
        runtime_lines(&err),
        ["stackrt: STACKRT_STACK_LIMIT=4096 is below one stack chunk (32768 bytes)"]
    );
}

#[test]
fn stats_are_printed_at_exit() {
    let (code, err) = child("stats", &[("STACKRT_STATS", "1")]);
    assert_eq!(code, Some(0), "{err}");
    // Hand-derived: enter maps 1 chunk; the first overflow maps a 2nd; each underflow caches
    // it and the next overflow reuses it (2 reuses); 2 chunks in use at the peak; stack depth
    // at an overflow = 1000 used bytes + 2000 reserved; waste = 32768 - HEADER - 1000 each.
    let hdr = if cfg!(target_pointer_width = "64") {
        64
    } else {
        32
    };
    let waste = 32768 - hdr - 1000;
    let expected = [
        "stackrt: stack statistics (chunk size 32768 bytes)".to_string(),
        "stackrt:   overflows             3".into(),
        "stackrt:   underflows            3".into(),
        "stackrt:   threads entered       1".into(),
        "stackrt:   chunks mapped         2".into(),
        "stackrt:   chunks unmapped       0".into(),
        "stackrt:   chunks reused         2".into(),
        "stackrt:   peak chunks in use    2 (65536 bytes)".into(),
        "stackrt:   peak stack bytes      3000".into(),
        format!(
            "stackrt:   wasted at chunk ends  {} bytes total, {waste} max",
            3 * waste
        ),
    ];
    assert_eq!(runtime_lines(&err), expected, "{err}");
}

#[test]
fn no_stats_without_the_variable() {
    let (code, err) = child("stats", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(runtime_lines(&err).is_empty(), "{err}");
}
