#!/usr/bin/env bash
# lookahead_bench.sh: the `lookahead` mechanism (32 KiB chunks) against `traditional`, on the
# thesis's deep Summation (single-threaded, one deep recursion) and the multi-threaded
# Unbalanced Binary Tree with 1, 2, 64 and 256 threads, and a repeated deep recursion
# (crates/bench/programs/deep_repeat.cm: the tree's spike searches without the tree), on x86-64
# and i686, by wall-clock time.
#
# Usage: crates/bench/scripts/lookahead_bench.sh [CMM_BINARY] [RUNS]
#   CMM_BINARY defaults to target/release/cmm (the compiler's speed does not matter here: the
#   runtime is always a release build). RUNS (default 31) interleaved rounds after one warm-up
#   round (crates/bench/scripts/interleave.py).
# Environment:
#   BENCH_TARGETS="x86_64 i686"     targets to measure
#   BENCH_THREADS="1 2 64 256"      thread counts of the tree benchmark
#   BENCH_SUM_N=2000000             depth of the Summation
#   BENCH_TREE="1000 30000 0.3 100" balanced, unbalanced, spike fraction, searches per thread
#   BENCH_DEEP="30000 1000"         depth and repetitions of deep_repeat (also timed with a C
#                                   call on the way up every 8192 levels, in both mechanisms)
#
# As in emit_bench.sh, the executables of one row are timed side by side, interleaved round by
# round, and the overhead is the paired one: the median over rounds of lookahead's time divided
# by traditional's in the same round (the minimum times are shown too). Every executable must
# print the same as the `traditional` one before it is timed. `traditional` runs with
# `ulimit -s unlimited` (the main thread's recursion) and tree threads with a 2 MiB stack (30000
# levels of 16 or 32 bytes fit); `lookahead` needs neither.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cmm="${1:-$root/target/release/cmm}"
runs="${2:-31}"
targets="${BENCH_TARGETS:-x86_64 i686}"
threads="${BENCH_THREADS:-1 2 64 256}"
sum_n="${BENCH_SUM_N:-2000000}"
tree="${BENCH_TREE:-1000 30000 0.3 100}"
deep="${BENCH_DEEP:-30000 1000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ulimit -s unlimited 2>/dev/null || ulimit -s 1048576 || true

results="$work/results.tsv" # target row trad_min look_min paired_ratio
: >"$results"

# time_row TARGET ROW ARGS: times $work/$TARGET-{trad,look} with ARGS side by side.
time_row() {
    local target="$1" row="$2" name="$3"
    shift 3
    local args="$*"
    local cmds=()
    for k in trad look; do
        # shellcheck disable=SC2086
        "$work/$target-$name-$k" $args >"$work/$k.out"
        cmds+=("$work/$target-$name-$k $args")
    done
    cmp -s "$work/trad.out" "$work/look.out" || {
        echo "lookahead_bench: $target $row: lookahead prints something else" >&2
        exit 1
    }
    python3 "$root/crates/bench/scripts/interleave.py" --rounds "$runs" --json "$work/t.json" \
        "trad=${cmds[0]}" "look=${cmds[1]}" >/dev/null
    python3 - "$work/t.json" "$target" "$row" >>"$results" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
t, l = d["runs"]["trad"], d["runs"]["look"]
pair = statistics.median(d["ratio"]["look"])
print("\t".join(sys.argv[2:4] + [repr(min(t)), repr(min(l)), repr(pair)]))
PY
}

for target in $targets; do
    for p in "sum tests/programs/thesis/summation_single.cm" \
        "tree tests/programs/thesis/tree_multi.cm" "deep crates/bench/programs/deep_repeat.cm"; do
        read -r name file <<<"$p"
        src="$root/$file"
        "$cmm" compile --mech traditional --target "$target" "$src" -o "$work/$target-$name-trad"
        "$cmm" compile --mech lookahead --chunk-size 32768 --target "$target" "$src" \
            -o "$work/$target-$name-look"
    done
    time_row "$target" "summation $sum_n" sum "$sum_n"
    time_row "$target" "deep ${deep/ /x}" deep "$deep"
    time_row "$target" "deep, abs per 8192" deep "$deep 8192"
    for t in $threads; do
        time_row "$target" "tree ${t}thr" tree "$tree $t 2097152"
    done
done

python3 - "$results" "$runs" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
print(f"Wall time in ms (minimum of {sys.argv[2]} interleaved rounds); overhead = lookahead / "
      "traditional - 1, by minimum and paired (median of the per-round ratio)")
print(f"{'target':<8}{'benchmark':<20}{'traditional':>12}{'lookahead 32K':>14}"
      f"{'overhead min':>14}{'paired':>8}")
for tg, row, tm, lm, pair in rows:
    tm, lm, pair = float(tm), float(lm), float(pair)
    print(f"{tg:<8}{row:<20}{tm*1e3:12.1f}{lm*1e3:14.1f}{(lm/tm-1)*100:13.1f}%"
          f"{(pair-1)*100:7.1f}%")
PY
