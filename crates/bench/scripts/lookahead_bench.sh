#!/usr/bin/env bash
# lookahead_bench.sh: the `lookahead` mechanism (32 KiB chunks) against `traditional` (and, for
# many threads with one deep search each, against gcc -fsplit-stack), at the sizes of the thesis
# (J. Moore-Oliva, "A Comparison of Scalable Multi-Threaded Stack Mechanisms", McMaster 2010),
# by wall-clock time and peak resident memory, on x86-64 and i686.
#
# Usage: crates/bench/scripts/lookahead_bench.sh [CMM_BINARY] [RUNS]
#   CMM_BINARY defaults to target/release/cmm (the compiler's speed does not matter here: the
#   runtime is always a release build). RUNS (default 31) interleaved rounds after one warm-up
#   round (crates/bench/scripts/interleave.py).
#
# Rows (each on every target of BENCH_TARGETS unless said otherwise):
#   summation N      tests/programs/thesis/summation_single.cm N: one recursion N calls deep on
#                    the main thread; traditional runs under `ulimit -s unlimited`. The thesis
#                    went up to N = 100 million; default here 10 million (BENCH_SUM_N).
#   sum_multi trad,  tests/programs/thesis/summation_multi.cm THREADS N STACK: THREADS threads
#   sum_multi look   each recursing N = 5 million levels deep (BENCH_MULTI_N; the thesis's
#                    per-thread depth), 1 thread against 2 threads of the same mechanism, all
#                    four executables in one interleaved run: the ratio is time(2 threads) /
#                    time(1 thread), paired within a round. On 2 cores the ideal is 1.0; goal
#                    for lookahead: <= 1.15 (traditional's is shown for comparison).
#   tree Tthr        tests/programs/thesis/tree_multi.cm with the thesis's Unbalanced Binary Tree:
#                    balanced part 2^20-1 = 1048575 nodes, unbalanced branch 1000000, 30% spike
#                    searches (0.3), 100 searches per thread (BENCH_TREE), T = 64 threads
#                    (BENCH_THREADS, a list). Goals: lookahead's time <= 1.05 x traditional's
#                    (paired ratio) and its peak RSS <= traditional's.
#   spike Tthr       (x86-64 only) the same tree with one search per thread, always a spike
#                    (`1048575 1000000 1.0 1 T`, BENCH_SPIKE gives the first two), T = 256 and
#                    1024 (BENCH_SPIKE_THREADS): lookahead against the same program compiled by
#                    gcc -O2 -fno-optimize-sibling-calls -fsplit-stack (linked with gold, which
#                    split-stack needs to call non-split code such as the C library; the thread
#                    library is tests/oracle/sthread.c). Goal: lookahead's peak RSS < gcc's.
#   deep DxR,        crates/bench/programs/deep_repeat.cm D R [8192]: a recursion D deep repeated
#   deep, abs/8192   R times (the tree's spike searches without the tree), the second with a C
#                    call on the way up every 8192 levels (BENCH_DEEP="30000 1000").
#
# Stack sizes. The multi-threaded programs take each thread's stack size as an argument, which
# `lookahead` ignores (its C-- code runs on chunks). For `traditional` the script finds, per
# target and program, the smallest stack size argument (to a page) with which one thread runs
# the row's deepest recursion -- summation_multi with 1 thread at N, tree_multi with 1 thread,
# spike fraction 1.0 and 1 search, i.e. the balanced part's right spine plus the whole
# unbalanced branch (about 1000021 levels of ubt_node_search) -- by doubling from 1 MiB and
# bisecting (a probe that overflows its stack dies of SIGSEGV; ~20 probes of well under a second
# at the thesis's size), and adds 64 KiB: "stacks just big enough", as in the thesis. Measured
# when this was written: 32 bytes per level on x86-64, 16 on i686, i.e. tree 32006144 + 65536
# bytes (x86-64) and 16007168 + 65536 (i686), summation_multi at 5 million 160006144 + 65536
# and 80007168 + 65536 (earlier measurements had said about 48 MB per tree thread on i686).
# The search takes about 10 s on x86-64 and 4 s on i686. BENCH_MULTI_STACK and
# BENCH_TREE_STACK (bytes, either one number or "x86_64=N i686=M") skip it. The threaded rows
# run with a finite soft `ulimit -s` (BENCH_MAIN_STACK_KIB, default 262144 = 256 MiB:
# tree_multi's main thread frees the unbalanced branch recursively, 1 million calls deep):
# with `ulimit -s unlimited` Linux lays out a 32-bit process's mappings bottom-up from 1/3 of
# its address space, which leaves less room for 64 big i686 thread stacks. The spike rows pass
# 16384 (the minimum) as the stack size to both sides: split-stack threads grow their stacks
# on demand (BENCH_SPLIT_STACK overrides).
#
# Environment (defaults in brackets; use small values to try the script out, e.g.
#   BENCH_TREE="1000 3000 0.3 10" BENCH_THREADS=2 BENCH_SUM_N=100000 BENCH_MULTI_N=100000
#   BENCH_SPIKE="1000 3000" BENCH_SPIKE_THREADS="4 16" BENCH_DEEP="3000 100", RUNS 3):
#   BENCH_TARGETS ["x86_64 i686"]   BENCH_ROWS ["sum multi tree spike deep"] rows to measure
#   BENCH_SUM_N [10000000]          BENCH_MULTI_N [5000000]
#   BENCH_TREE ["1048575 1000000 0.3 100"]  BENCH_THREADS ["64"]
#   BENCH_SPIKE ["1048575 1000000"]         BENCH_SPIKE_THREADS ["256 1024"]
#   BENCH_DEEP ["30000 1000"]       BENCH_MULTI_STACK, BENCH_TREE_STACK [searched]
#   BENCH_MAIN_STACK_KIB [262144]   BENCH_SPLIT_STACK [16384]
#
# Measurement: the executables of one row are timed side by side, interleaved round by round
# (interleave.py says why), and each run's peak resident set size (ru_maxrss of that one child,
# from wait4) is recorded. Every executable must print the same as its reference (traditional,
# or gcc for the spike rows; with the same thread count) before it is timed. Table: per side the
# minimum time and the largest peak RSS over all rounds (MiB); the time ratio B/A by minimum
# times and paired (median over rounds of B's time / A's time in the same round; the goals are
# checked against the paired ratio), the RSS ratio of the two largest peaks.
#
# Duration at the defaults, estimated from single runs on a shared 2-core AMD EPYC VM: about
# 70 minutes with RUNS=31 (per round: spike 1024thr ~45 s, tree 64thr ~40 s on x86-64 and
# ~28 s on i686, spike 256thr ~12 s, the rest a few seconds), about 25 minutes with RUNS=11.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cmm="${1:-$root/target/release/cmm}"
runs="${2:-31}"
targets="${BENCH_TARGETS:-x86_64 i686}"
rows="${BENCH_ROWS:-sum multi tree spike deep}"
sum_n="${BENCH_SUM_N:-10000000}"
multi_n="${BENCH_MULTI_N:-5000000}"
tree="${BENCH_TREE:-1048575 1000000 0.3 100}"
threads="${BENCH_THREADS:-64}"
spike="${BENCH_SPIKE:-1048575 1000000}"
spike_threads="${BENCH_SPIKE_THREADS:-256 1024}"
deep="${BENCH_DEEP:-30000 1000}"
main_stack_kib="${BENCH_MAIN_STACK_KIB:-262144}"
split_stack="${BENCH_SPLIT_STACK:-16384}"
interleave="$root/crates/bench/scripts/interleave.py"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ulimit -c 0 # stack-size probes die of SIGSEGV: no core files
ulimit -s unlimited 2>/dev/null || ulimit -s 1048576 || true

results="$work/results.jsonl" # one JSON object per table row
: >"$results"
want() { case " $rows " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
log() { echo "lookahead_bench: $*" >&2; }
die() { log "$*"; exit 1; }

gccflags=(-w -fwrapv -no-pie -DNULL=0 '-Dstacksizeof(x)=0')
if [ "$(gcc -dumpversion | cut -d. -f1)" -ge 14 ]; then gccflags+=(-fpermissive); fi

# same REF CAND ARGS...: CAND must print what REF prints (stdout and exit status 0).
same() {
    local ref="$1" cand="$2"
    shift 2
    local k exe rc
    for k in ref cand; do
        if [ $k = ref ]; then exe="$ref"; else exe="$cand"; fi
        rc=0
        "$exe" "$@" >"$work/$k.out" || rc=$?
        [ "$rc" = 0 ] || die "$(basename "$exe") $*: exit status $rc"
    done
    cmp -s "$work/ref.out" "$work/cand.out" ||
        die "$(basename "$cand") $* prints something else than $(basename "$ref")"
}

# timed JSON NAME=COMMAND...: one interleaved run (stdout: interleave.py's table, discarded).
timed() {
    local json="$1"
    shift
    python3 "$interleave" --rounds "$runs" --json "$json" "$@" >/dev/null
}

# row TARGET BENCHMARK JSON A_LABEL A_NAME B_LABEL B_NAME GOAL: appends a table row comparing
# run B with run A of an interleave.py JSON. GOAL: "" or comma-separated "time<=X", "rss<=X",
# "rss<X" on the paired time ratio and the peak RSS ratio B/A.
row() {
    python3 - "$@" >>"$results" <<'PY'
import json, sys
target, bench, path, alabel, aname, blabel, bname, goal = sys.argv[1:]
d = json.load(open(path))
print(json.dumps({"target": target, "bench": bench, "a": alabel, "b": blabel,
                  "ta": d["runs"][aname], "tb": d["runs"][bname],
                  "ra": d["maxrss_kib"][aname], "rb": d["maxrss_kib"][bname], "goal": goal}))
PY
}

# stack_override VALUE TARGET: the bytes VALUE gives for TARGET ("N" or "x86_64=N i686=M").
stack_override() {
    local v
    for v in $1; do
        case "$v" in
            "$2"=*) echo "${v#*=}"; return ;;
            *=*) ;;
            *) echo "$v"; return ;;
        esac
    done
}

# min_stack EXE ARGS...: the smallest stack size argument (a multiple of 4096) with which
# `EXE ARGS... SIZE` exits 0, plus 64 KiB.
min_stack() {
    local lo=0 hi=1048576 mid max=2147479552
    # (in a subshell whose stderr is discarded: bash's "Segmentation fault" notices)
    probe() { ("$@" >/dev/null 2>&1; exit $?) 2>/dev/null; }
    until probe "$@" "$hi"; do
        [ "$hi" -lt "$max" ] || die "$(basename "$1") $*: fails even with a $max-byte stack"
        lo=$hi
        hi=$((hi * 2 > max ? max : hi * 2))
    done
    while [ $((hi - lo)) -gt 4096 ]; do
        mid=$(((lo + hi) / 2 / 4096 * 4096))
        if probe "$@" "$mid"; then hi=$mid; else lo=$mid; fi
    done
    echo $((hi + 65536))
}

mib() { python3 -c "print(f'{$1 / 1048576:.1f} MiB')"; }

notes="$work/notes.txt"
sizes=()
want sum && sizes+=("summation $sum_n")
want multi && sizes+=("sum_multi $multi_n per thread")
want tree && sizes+=("tree $tree, threads $threads")
want spike && sizes+=("spike $spike 1.0 1, threads $spike_threads (x86-64)")
want deep && sizes+=("deep $deep")
(IFS=';' && echo "Sizes: ${sizes[*]}" | sed 's/;/; /g') >"$notes"
for target in $targets; do
    progs=()
    want sum && progs+=("sum tests/programs/thesis/summation_single.cm")
    want multi && progs+=("multi tests/programs/thesis/summation_multi.cm")
    if want tree || { want spike && [ "$target" = x86_64 ]; }; then
        progs+=("tree tests/programs/thesis/tree_multi.cm")
    fi
    want deep && progs+=("deep crates/bench/programs/deep_repeat.cm")
    for p in "${progs[@]}"; do
        read -r name file <<<"$p"
        src="$root/$file"
        "$cmm" compile --mech traditional --target "$target" "$src" -o "$work/$target-$name-trad"
        "$cmm" compile --mech lookahead --chunk-size 32768 --target "$target" "$src" \
            -o "$work/$target-$name-look"
    done
    t="$work/$target"

    if want sum; then
        log "$target summation $sum_n"
        same "$t-sum-trad" "$t-sum-look" "$sum_n"
        timed "$t-sum.json" "trad=$t-sum-trad $sum_n" "look=$t-sum-look $sum_n"
        row "$target" "summation $sum_n" "$t-sum.json" traditional trad lookahead look ""
    fi

    # The threaded rows: a finite main-thread stack (see the header).
    (
        ulimit -S -s "$main_stack_kib"
        if want multi; then
            stack="$(stack_override "${BENCH_MULTI_STACK:-}" "$target")"
            [ -n "$stack" ] || stack="$(min_stack "$t-multi-trad" 1 "$multi_n")"
            echo "$target sum_multi: traditional thread stack argument $stack ($(mib "$stack"))" \
                >>"$notes"
            cmds=()
            for n in 1 2; do
                same "$t-multi-trad" "$t-multi-look" "$n" "$multi_n" "$stack"
                cmds+=("trad$n=$t-multi-trad $n $multi_n $stack")
                cmds+=("look$n=$t-multi-look $n $multi_n $stack")
            done
            log "$target sum_multi $multi_n, 1 and 2 threads"
            timed "$t-multi.json" "${cmds[@]}"
            for k in trad look; do
                goal=""
                [ "$k" = look ] && goal="time<=1.15"
                row "$target" "sum_multi $k" "$t-multi.json" "1 thread" "${k}1" "2 threads" \
                    "${k}2" "$goal"
            done
        fi

        if want tree; then
            read -r tb tu _ <<<"$tree"
            stack="$(stack_override "${BENCH_TREE_STACK:-}" "$target")"
            [ -n "$stack" ] || stack="$(min_stack "$t-tree-trad" "$tb" "$tu" 1.0 1 1)"
            echo "$target tree: traditional thread stack argument $stack ($(mib "$stack"))" \
                >>"$notes"
            for n in $threads; do
                log "$target tree $tree, $n threads"
                same "$t-tree-trad" "$t-tree-look" $tree "$n" "$stack"
                timed "$t-tree$n.json" "trad=$t-tree-trad $tree $n $stack" \
                    "look=$t-tree-look $tree $n $stack"
                row "$target" "tree ${n}thr" "$t-tree$n.json" traditional trad lookahead look \
                    "time<=1.05,rss<=1"
            done
        fi

        if want spike && [ "$target" = x86_64 ]; then
            gcc -m64 -O2 -w -c "$root/tests/oracle/sthread.c" -o "$work/sthread64.o"
            gcc -m64 "${gccflags[@]}" -O2 -fno-optimize-sibling-calls -fsplit-stack \
                -fuse-ld=gold -x c "$root/tests/programs/thesis/tree_multi.cm" \
                -x none "$work/sthread64.o" -pthread -o "$t-tree-split" ||
                die "gcc -fsplit-stack -fuse-ld=gold failed (binutils' gold linker missing?)"
            for n in $spike_threads; do
                args="$spike 1.0 1 $n $split_stack"
                log "$target spike $args"
                # shellcheck disable=SC2086
                same "$t-tree-split" "$t-tree-look" $args
                timed "$t-spike$n.json" "split=$t-tree-split $args" "look=$t-tree-look $args"
                row "$target" "spike ${n}thr" "$t-spike$n.json" "gcc split-stack" split \
                    lookahead look "rss<1"
            done
        fi
    )

    if want deep; then
        for every in "" 8192; do
            args="$deep${every:+ $every}"
            log "$target deep $args"
            # shellcheck disable=SC2086
            same "$t-deep-trad" "$t-deep-look" $args
            timed "$t-deep$every.json" "trad=$t-deep-trad $args" "look=$t-deep-look $args"
            label="deep ${deep/ /x}"
            [ -n "$every" ] && label="deep, abs per $every"
            row "$target" "$label" "$t-deep$every.json" traditional trad lookahead look ""
        done
    fi
done

cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
python3 - "$results" "$runs" "$notes" "$cpu" "$(nproc)" <<'PY'
import json, statistics, sys
path, runs, notes, cpu, ncpu = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.strip()]
print(f"CPU: {cpu} ({ncpu} online CPUs)")
for line in open(notes):
    print(line.rstrip("\n"))
print(f"Wall time: minimum of {runs} interleaved rounds (ms); B/A by minimum and paired (median "
      "over rounds of B / A in the same round).")
print("Peak RSS: largest ru_maxrss over all rounds (MiB); B/A of those. Goals are checked on "
      "the paired time ratio and the RSS ratio.")
h = (f"{'target':<7}{'benchmark':<19}{'A':<16}{'B':<10}{'A ms':>9}{'B ms':>9}{'B/A min':>8}"
     f"{'paired':>7}{'A MiB':>9}{'B MiB':>9}{'RSS B/A':>8}  goal")
print(h)
for r in rows:
    ta, tb = min(r["ta"]), min(r["tb"])
    pair = statistics.median(b / a for a, b in zip(r["ta"], r["tb"]))
    ra, rb = max(r["ra"]) / 1024, max(r["rb"]) / 1024
    rss = rb / ra
    verdict = []
    for g in filter(None, r["goal"].split(",")):
        for op in ("<=", "<"):
            if op in g:
                what, lim = g.split(op)
                break
        x = pair if what == "time" else rss
        ok = x <= float(lim) if op == "<=" else x < float(lim)
        verdict.append(f"{what} {op} {lim}: {'ok' if ok else 'MISSED'}")
    print(f"{r['target']:<7}{r['bench']:<19}{r['a']:<16}{r['b']:<10}{ta*1e3:9.1f}{tb*1e3:9.1f}"
          f"{tb/ta:8.3f}{pair:7.3f}{ra:9.1f}{rb:9.1f}{rss:8.2f}  {'; '.join(verdict) or '-'}")
PY
