#!/usr/bin/env bash
# hot_split_bench.sh: the end-to-end cost of the "hot split" under `lookahead`: compiled C--
# code whose loop calls across a stack-chunk boundary on every iteration, so every iteration
# runs the emitted out-of-line stub, the assembly overflow and underflow handlers and the chunk
# runtime (the criterion bench `chunk_hot_split` times the runtime's Rust functions alone).
#
# Usage: crates/bench/scripts/hot_split_bench.sh [CMM_BINARY] [RUNS]
#   CMM_BINARY defaults to target/release/cmm; RUNS (default 21) interleaved rounds
#   (crates/bench/scripts/interleave.py).
# Environment:
#   BENCH_TARGETS="x86_64 i686"   targets to measure
#   BENCH_PAIRS=5000000           loop iterations (overflow-underflow pairs) per run
#   BENCH_CHUNK=32768             --chunk-size
#
# Program: tests/lookahead/hot_split.cm. For each target the script first finds the recursion
# depth D at which the loop's call sits at a chunk boundary (STACKRT_STATS=1 reports at least
# as many overflows as iterations), then times, side by side:
#   split = the loop at depth D (every iteration overflows and underflows),
#   base  = the same loop at depth 10 (no iteration crosses a boundary).
# Cost per pair = (split - base) / pairs, from the minimum times and from the paired median
# (interleave.py). System calls are counted with `strace -f -c` for the split run with PAIRS
# and with PAIRS / 10 iterations: equal counts mean the loop makes none. The same count is
# taken for a warm deep recursion (crates/bench/programs/deep_repeat.cm, BENCH_DEEP_DEPTH
# levels, default 1000000, repeated 10 and 100 times): every repetition after the first
# overflows and underflows thousands of times; equal counts mean no system call per overflow
# once the chunks are warm (they come from the thread's cache and the pool, never from mmap).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cmm="${1:-$root/target/release/cmm}"
runs="${2:-21}"
targets="${BENCH_TARGETS:-x86_64 i686}"
pairs="${BENCH_PAIRS:-5000000}"
chunk="${BENCH_CHUNK:-32768}"
deep_depth="${BENCH_DEEP_DEPTH:-1000000}"
src="$root/tests/lookahead/hot_split.cm"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
command -v strace >/dev/null || { echo "hot_split_bench: strace is required" >&2; exit 1; }

overflows() { # EXE DEPTH N -> the run's overflow count
    STACKRT_STATS=1 "$1" "$2" "$2" "$3" 2>&1 >/dev/null | awk '/overflows/ { print $3 }'
}

syscalls() { # EXE DEPTH N -> total system calls of the run (all threads)
    count_syscalls "$1" "$2" "$2" "$3"
}

count_syscalls() { # EXE ARGS... -> total system calls of the run (all threads)
    strace -f -qq -c -o "$work/strace.txt" "$@" >/dev/null
    # A 32-bit process gets one table per mode (its execve is a 64-bit call): add them up.
    # (columns: % time, seconds, usecs/call, calls, [errors,] "total").
    awk '$NF == "total" { n += $4 } END { print n }' "$work/strace.txt"
}

printf '%-8s %6s %12s %12s %14s %10s %16s\n' target depth "split (ms)" "base (ms)" \
    "ns/pair (min)" "(paired)" "syscalls N/10, N"
for target in $targets; do
    exe="$work/hot-$target"
    "$cmm" compile --mech lookahead --chunk-size "$chunk" --target "$target" "$src" -o "$exe"
    depth=""
    for d in $(seq 11 4000); do
        if [ "$(overflows "$exe" "$d" 1000)" -ge 1000 ]; then depth=$d; break; fi
    done
    [ -n "$depth" ] || { echo "hot_split_bench: $target: no boundary depth found" >&2; exit 1; }
    [ "$(overflows "$exe" 10 1000)" -lt 10 ] || {
        echo "hot_split_bench: $target: depth 10 already crosses a boundary" >&2
        exit 1
    }
    s_small=$(syscalls "$exe" "$depth" $((pairs / 10)))
    s_large=$(syscalls "$exe" "$depth" "$pairs")
    python3 "$root/crates/bench/scripts/interleave.py" --rounds "$runs" --json "$work/t.json" \
        "base=$exe 10 10 $pairs" "split=$exe $depth $depth $pairs" >/dev/null
    python3 - "$work/t.json" "$target" "$depth" "$pairs" "$s_small" "$s_large" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
target, depth, pairs, s_small, s_large = sys.argv[2], sys.argv[3], int(sys.argv[4]), *sys.argv[5:]
b, s = d["runs"]["base"], d["runs"]["split"]
per_min = (min(s) - min(b)) / pairs * 1e9
per_pair = statistics.median(x - y for x, y in zip(s, b)) / pairs * 1e9
print(f"{target:<8} {depth:>6} {min(s)*1e3:12.1f} {min(b)*1e3:12.1f} {per_min:14.1f} "
      f"{per_pair:10.1f} {s_small + ', ' + s_large:>16}")
PY
done

printf '\n%-8s %10s %22s %10s\n' target depth "syscalls 10, 100 reps" overflows
for target in $targets; do
    exe="$work/deep-$target"
    "$cmm" compile --mech lookahead --chunk-size "$chunk" --target "$target" \
        "$root/crates/bench/programs/deep_repeat.cm" -o "$exe"
    s10=$(count_syscalls "$exe" "$deep_depth" 10)
    s100=$(count_syscalls "$exe" "$deep_depth" 100)
    ov=$(STACKRT_STATS=1 "$exe" "$deep_depth" 100 2>&1 >/dev/null | awk '/overflows/ { print $3 }')
    printf '%-8s %10s %22s %10s\n' "$target" "$deep_depth" "$s10, $s100" "$ov"
done
