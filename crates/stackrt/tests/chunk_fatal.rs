//! What a program sees when the chunk runtime must stop it, and the statistics report: each
//! case runs in a child process (this test binary re-executed with `CHUNK_CHILD=<case>`), and
//! the parent checks the exit status and the exact stderr text. This binary defines no
//! `__cmm_chunk_size`, so the default 32 KiB chunks apply. The thread stack address given to
//! `stackrt_chunk_thread_enter` is a real 16-byte aligned buffer of the child: the runtime
//! stores the reclaim budget there.

mod common;

use common::NativeStack;
use std::process::Command;

use stackrt::chunk::config::DEFAULT_RECLAIM_BYTES;
use stackrt::chunk::{
    stackrt_chunk_overflow, stackrt_chunk_reclaim, stackrt_chunk_size, stackrt_chunk_thread_enter,
    stackrt_chunk_thread_enter_guarded, stackrt_chunk_thread_exit, stackrt_chunk_underflow,
    ChunkHeader, CHECK_SLACK, FATAL_EXIT_STATUS, HEADER_SIZE, UNLINKED,
};

/// Bytes of the header: 64 on x86-64, 32 on i686.
const HDR: usize = if cfg!(target_pointer_width = "64") {
    64
} else {
    32
};

/// The largest reserve the default 32 KiB chunks serve: classes go up to the largest
/// `32768 << k` (k < 20) that is at most a quarter of the address space: k = 19 (16 GiB) on
/// x86-64, k = 14 (512 MiB) on i686; its capacity is that minus the header and the slack.
const LARGEST: u64 = if cfg!(target_pointer_width = "64") {
    (32768u64 << 19) - 64 - 16
} else {
    (32768u64 << 14) - 32 - 16
};

/// Runs `case` in a child; returns (exit code, stdout, stderr).
fn child(case: &str, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["child_entry", "--exact", "--nocapture", "--test-threads=1"])
        .env("CHUNK_CHILD", case)
        .env_remove("STACKRT_STATS")
        .env_remove("STACKRT_STACK_LIMIT")
        .env_remove("STACKRT_MEMORY_LIMIT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The stderr lines that come from the runtime (the test harness prints nothing on stderr
/// for a passing or exiting child, but be robust).
fn runtime_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with("stackrt: "))
        .map(no_tid)
        .collect()
}

/// Replaces the kernel thread id (varies per run) with `N`.
fn no_tid(line: &str) -> String {
    match (line.find("(tid "), line.find("):")) {
        (Some(a), Some(b)) if a < b => format!("{}(tid N{}", &line[..a], &line[b..]),
        _ => line.to_string(),
    }
}

/// A fatal case: exit status 70 and exactly these runtime lines.
fn fatal(case: &str, env: &[(&str, &str)], expected: &[String]) {
    let (code, _, err) = child(case, env);
    assert_eq!(code, Some(FATAL_EXIT_STATUS), "{err}");
    assert_eq!(runtime_lines(&err), expected, "{err}");
}

/// One overflow `below` bytes under `cur`'s header.
fn overflow(cur: *mut ChunkHeader, below: usize, reserve: usize) -> *mut ChunkHeader {
    stackrt_chunk_overflow(cur, cur as usize - below, reserve)
}

/// The child side: does what `CHUNK_CHILD` says. Without it (the normal test run) it has
/// nothing to do.
#[test]
fn child_entry() {
    let Ok(case) = std::env::var("CHUNK_CHILD") else {
        return;
    };
    let native = NativeStack::new(0);
    let enter = |need: usize| stackrt_chunk_thread_enter(native.addr(), need);
    match case.as_str() {
        "limit" => {
            let a = enter(0);
            let b = overflow(a, 100, 500);
            overflow(b, 100, 500);
        }
        "limit_large" => {
            let a = enter(0);
            overflow(a, 100, 40000);
        }
        "large_reserves" => {
            // 40000 bytes do not fit a 32 KiB chunk: a 64 KiB one (class 1) serves them;
            // 100000 a 128 KiB one (class 2).
            let a = enter(0);
            for (reserve, size) in [(40000, 65536), (100000, 131072), (32768 - HDR - 16, 32768)] {
                let b = overflow(a, 100, reserve);
                // SAFETY: b is the chunk just linked.
                let (limit, map_len, prev) =
                    unsafe { ((*b).limit, (*b).map_len, (*b).prev_header) };
                assert_eq!(prev, a);
                assert_eq!(map_len, size);
                assert_eq!(limit, b as usize + HEADER_SIZE - size);
                assert!(
                    b as usize - reserve >= limit + CHECK_SLACK,
                    "no room for {reserve}"
                );
                assert_eq!(stackrt_chunk_underflow(b), a);
            }
            // A first chunk for a large need, on another thread.
            std::thread::spawn(|| {
                let native = NativeStack::new(0);
                let h = stackrt_chunk_thread_enter(native.addr(), 50000);
                // SAFETY: h is the thread's first chunk.
                assert_eq!(unsafe { (*h).map_len }, 65536);
                stackrt_chunk_thread_exit();
            })
            .join()
            .unwrap();
            stackrt_chunk_thread_exit();
            return;
        }
        "huge_reserve" => {
            let a = enter(0);
            overflow(a, 100, LARGEST as usize + 1);
        }
        "huge_need" => {
            enter(LARGEST as usize + 1);
        }
        "mismatch" => {
            let a = enter(0);
            println!("HEADER {:#x}", a as usize);
            stackrt_chunk_underflow((a as usize - 4096) as *mut _);
        }
        "not_entered" => {
            // This thread never entered chunked code.
            stackrt_chunk_underflow(std::ptr::null_mut());
        }
        "double_exit" => {
            let _a = enter(0);
            stackrt_chunk_thread_exit();
            stackrt_chunk_thread_exit();
        }
        "double_enter" => {
            let _a = enter(0);
            enter(0);
        }
        "mixed_guard" => {
            let _a = enter(0);
            std::thread::spawn(|| {
                let native = NativeStack::new(0);
                stackrt_chunk_thread_enter_guarded(native.addr(), 0);
            })
            .join()
            .unwrap();
        }
        "stats" => {
            let a = enter(0);
            assert_eq!(stackrt_chunk_size(), 32768);
            let budget = (DEFAULT_RECLAIM_BYTES / 32768) as u32;
            assert_eq!(native.budget(), budget);
            for _ in 0..3 {
                let b = overflow(a, 1000, 2000);
                assert_eq!(stackrt_chunk_underflow(b), a);
            }
            // Once more, unlinked by "compiled code", whose budget ran out: the reclaim call.
            let b = overflow(a, 1000, 2000);
            // SAFETY: b is the running chunk; marking it as emitted code does.
            unsafe { (*b).thread_stack = UNLINKED };
            native.set_budget(0);
            assert_eq!(stackrt_chunk_reclaim(a), a);
            assert_eq!(native.budget(), budget);
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
    fatal(
        "limit",
        &[("STACKRT_STACK_LIMIT", "64K")],
        &[
            "stackrt: thread 0 (tid N): stack limit exceeded: 65536 bytes of stack chunks in use, \
           32768 more needed, limit 65536 bytes (set STACKRT_STACK_LIMIT to change it)"
                .to_string(),
        ],
    );
    // A reserve of a larger class needs that class's chunk size.
    fatal(
        "limit_large",
        &[("STACKRT_STACK_LIMIT", "64K")],
        &[
            "stackrt: thread 0 (tid N): stack limit exceeded: 32768 bytes of stack chunks in use, \
           65536 more needed, limit 65536 bytes (set STACKRT_STACK_LIMIT to change it)"
                .to_string(),
        ],
    );
}

/// Reserves and needs above a standard chunk's capacity are served by larger chunks.
#[test]
fn large_reserves_get_larger_chunks() {
    let (code, _, err) = child("large_reserves", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(runtime_lines(&err).is_empty(), "{err}");
}

#[test]
fn reserve_beyond_the_largest_class_is_reported() {
    let msg = |n: u64| {
        format!(
            "stackrt: thread 0 (tid N): a call needs {n} bytes of stack in one piece, more than \
             the largest stack chunk holds ({LARGEST})"
        )
    };
    fatal("huge_reserve", &[], &[msg(LARGEST + 1)]);
    fatal("huge_need", &[], &[msg(LARGEST + 1)]);
}

#[test]
fn broken_chain_is_reported_not_followed() {
    let (code, out, err) = child("mismatch", &[]);
    assert_eq!(code, Some(FATAL_EXIT_STATUS), "{err}");
    let a = out
        .lines()
        .find_map(|l| l.split_once("HEADER 0x"))
        .map(|(_, h)| usize::from_str_radix(h.trim(), 16).unwrap())
        .expect("the child prints its first chunk");
    assert_eq!(
        runtime_lines(&err),
        [format!(
            "stackrt: thread 0 (tid N): corrupted stack chunk chain: current chunk header is \
             {a:#x}, handler was given {:#x}",
            a - 4096
        )]
    );
}

#[test]
fn handler_without_runtime_is_reported() {
    fatal(
        "not_entered",
        &[],
        &[
            "stackrt: thread (tid N): stack chunk handler called on a thread that is not running \
           on chunks"
                .to_string(),
        ],
    );
}

#[test]
fn double_exit_and_enter_are_reported() {
    fatal(
        "double_exit",
        &[],
        &[
            "stackrt: thread 0 (tid N): stack chunk handler called on a thread that is not \
           running on chunks"
                .to_string(),
        ],
    );
    fatal(
        "double_enter",
        &[],
        &["stackrt: thread 0 (tid N): thread entered chunked code twice".to_string()],
    );
}

/// One program uses one kind of chunks: guard pages (MMU mechanisms) or none (look-ahead).
#[test]
fn guarded_and_unguarded_chunks_do_not_mix() {
    fatal(
        "mixed_guard",
        &[],
        &[
            "stackrt: stack chunks requested both with and without guard pages in one program"
                .to_string(),
        ],
    );
}

#[test]
fn bad_limit_settings_are_reported() {
    for var in ["STACKRT_STACK_LIMIT", "STACKRT_MEMORY_LIMIT"] {
        fatal(
            "limit",
            &[(var, "lots")],
            &[format!(
                "stackrt: {var}=\"lots\" is not a byte count (examples: 8388608, 64M, 1G)"
            )],
        );
        fatal(
            "limit",
            &[(var, "4096")],
            &[format!(
                "stackrt: {var}=4096 is below one stack chunk (32768 bytes)"
            )],
        );
    }
}

/// The memory limit: the enter carves a batch of 2 standard chunks (64 KiB, the limit); a
/// reserve of 40000 bytes then needs a 64 KiB chunk more.
#[test]
fn memory_limit_is_a_clear_one_line_error() {
    fatal(
        "limit_large",
        &[("STACKRT_MEMORY_LIMIT", "64K")],
        &[
            "stackrt: thread 0 (tid N): out of memory for stack chunks: 65536 bytes used by all \
           threads, 65536 more needed, limit 65536 bytes (set STACKRT_MEMORY_LIMIT to change it)"
                .to_string(),
        ],
    );
}

#[test]
fn stats_are_printed_at_exit() {
    let (code, _, err) = child("stats", &[("STACKRT_STATS", "1")]);
    assert_eq!(code, Some(0), "{err}");
    // Hand-derived from the policy in chain.rs with the default configuration (caches of 4
    // to 512 KiB, batches up to that, 4 MiB pool floor):
    // * the enter's cache is empty: one refill of cache_min / 2 = 2 chunks, carved from a new
    //   arena (64 MiB on x86-64, 16 MiB on i686); held 65536 bytes: the resident peak;
    // * each of the 4 overflows takes the cached chunk (4 from the cache); the 3 underflows
    //   and the reclaim's bookkeeping put it back (4 underflows; the cache stays under its
    //   capacity, so no batch goes to the pool); 2 chunks in use at the peak;
    // * stack depth at an overflow: 1000 bytes used + 2000 reserved; waste at each overflow:
    //   32768 - header - 1000;
    // * the exit gives both chunks to the pool in one batch; 65536 bytes are within the
    //   recent peak + the floor, so nothing is released.
    let arena: u64 = if cfg!(target_pointer_width = "64") {
        64 << 20
    } else {
        16 << 20
    };
    let waste = 32768 - HDR - 1000;
    let expected = [
        "stackrt: stack statistics (chunk size 32768 bytes)".to_string(),
        "stackrt:   overflows             4".into(),
        "stackrt:   underflows            4".into(),
        "stackrt:   threads entered       1".into(),
        "stackrt:   chunks from cache     4".into(),
        "stackrt:   chunks from pool      0 in 0 takes (1 gives)".into(),
        "stackrt:   chunks carved         2".into(),
        "stackrt:   chunks released       0 (0 bytes)".into(),
        format!("stackrt:   arenas mapped         1 ({arena} bytes)"),
        "stackrt:   peak resident chunks  65536 bytes".into(),
        "stackrt:   reclaim calls         1".into(),
        "stackrt:   guard faults taken    0".into(),
        "stackrt:   waits for memory      0 (0 gave up waiting)".into(),
        "stackrt:   peak chunks in use    2 (65536 bytes)".into(),
        "stackrt:   peak stack bytes      3000".into(),
        format!(
            "stackrt:   wasted at chunk ends  {} bytes total, {waste} max",
            4 * waste
        ),
    ];
    assert_eq!(runtime_lines(&err), expected, "{err}");
}

#[test]
fn no_stats_without_the_variable() {
    let (code, _, err) = child("stats", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(runtime_lines(&err).is_empty(), "{err}");
}
