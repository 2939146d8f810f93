#!/usr/bin/env bash
# emit_bench.sh: the emission stage against gcc -O0/-O2 and the native back end on the
# single-threaded thesis programs (Summation, Unbalanced Binary Tree, Real World with reduced
# parameters, Quicksort), on x86-64 and i686, by wall-clock time and by instruction count.
#
# Usage: crates/bench/scripts/emit_bench.sh [CMM_BINARY] [RUNS]
#   CMM_BINARY defaults to target/release/cmm (build it first: cargo build --release).
#   RUNS (default 21) interleaved rounds (crates/bench/scripts/interleave.py), after one warm-up
#   round; each round runs every executable once.
# Environment:
#   BENCH_TARGETS="x86_64 i686"   targets to measure
#   BENCH_PROGRAMS="summation tree realworld quicksort"   programs to measure
#   BENCH_IR=1                    also count instructions with valgrind (0: wall time only)
#
# Executables per program and target: gcc -O0, gcc -O2, the native back end (x86-64 only) and
# the emission stage's `traditional` and `callee-cleanup`. gcc compiles the same .cm sources as
# C, with the corpus oracle's flags (tests/oracle/bless.sh) plus -fno-optimize-sibling-calls at
# -O2 so its recursion stays recursion (runtime-facts.md); on i686 with -msse2 -mfpmath=sse like
# the emission stage.
#
# Wall time: all executables of one program are timed side by side, interleaved round by round
# (interleave.py explains why: this machine has slow phases lasting seconds). Reported: the
# minimum and median time of each, and for each pair the minimum-time ratio and the paired
# ratio (median over rounds of the two times' ratio within a round). Instruction counts:
# valgrind's `I refs` (Ir: user-space instructions of the whole process, C library included;
# deterministic), same arguments, counted by `--tool=cachegrind --cache-sim=no`: the same Ir as
# `--tool=callgrind` (which runs out of memory on callee-cleanup's deep recursion: its shadow
# call stack never sees the `jmp` returns) and faster.
#
# Output: one table of absolute figures and one of ratios. `x/O2` is x's figure divided by gcc
# -O2's (the emission stage's requirement: traditional <= 1.5), `trad/O0` traditional divided by
# gcc -O0 (requirement: < 1); columns `min`, `pair` (wall time) and `Ir` (instructions).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cmm="${1:-$root/target/release/cmm}"
runs="${2:-21}"
targets="${BENCH_TARGETS:-x86_64 i686}"
want="${BENCH_PROGRAMS:-summation tree realworld quicksort}"
want_ir="${BENCH_IR:-1}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
ulimit -s unlimited 2>/dev/null || ulimit -s 1048576 || true

gccflags=(-w -fwrapv -no-pie -DNULL=0 '-Dstacksizeof(x)=0')
if [ "$(gcc -dumpversion | cut -d. -f1)" -ge 14 ]; then gccflags+=(-fpermissive); fi

# name  file  args
programs=(
    "summation thesis/summation_single.cm 2000000"
    "tree thesis/tree_single.cm 1000 30000 0.3 4000"
    "realworld thesis/realworld_single.cm 10 100 3000000 10000"
    "quicksort thesis/quicksort.cm 2000000 12345"
)

results="$work/results.tsv" # target program kind min median ir
: >"$results"
for target in $targets; do
    if [ "$target" = i686 ]; then m=-m32; fp="-msse2 -mfpmath=sse"; else m=-m64; fp=""; fi
    for p in "${programs[@]}"; do
        read -r name file args <<<"$p"
        case " $want " in *" $name "*) ;; *) continue ;; esac
        src="$root/tests/programs/$file"
        cp "$src" "$work/$name.c"
        # shellcheck disable=SC2086
        gcc $m "${gccflags[@]}" $fp -O0 "$work/$name.c" -o "$work/$name-O0"
        # shellcheck disable=SC2086
        gcc $m "${gccflags[@]}" $fp -O2 -fno-optimize-sibling-calls "$work/$name.c" \
            -o "$work/$name-O2"
        "$cmm" compile --backend emit --mech traditional --target "$target" "$src" \
            -o "$work/$name-trad"
        "$cmm" compile --backend emit --mech callee-cleanup --target "$target" "$src" \
            -o "$work/$name-callee"
        kinds=(O0 O2 trad callee)
        if [ "$target" = x86_64 ]; then
            "$cmm" compile --backend native --target x86_64 "$src" -o "$work/$name-native"
            kinds+=(native)
        fi
        # Every executable must print what gcc -O0 prints before it is timed.
        "$work/$name-O0" $args >"$work/expected.out"
        cmds=()
        for k in "${kinds[@]}"; do
            "$work/$name-$k" $args >"$work/$k.out"
            cmp -s "$work/expected.out" "$work/$k.out" || {
                echo "emit_bench: $target $name-$k prints something else than gcc -O0" >&2
                exit 1
            }
            cmds+=("$k=$work/$name-$k $args")
        done
        python3 "$root/crates/bench/scripts/interleave.py" --rounds "$runs" \
            --json "$work/$target-$name.json" "${cmds[@]}" >/dev/null
        for k in "${kinds[@]}"; do
            ir=nan
            if [ "$want_ir" = 1 ]; then
                # shellcheck disable=SC2086
                # Valgrind gives the client an 8 MiB stack unless told otherwise; Summation
                # recurses 2 million calls deep.
                ir=$(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
                    --main-stacksize=1073741824 "$work/$name-$k" $args 2>&1 >/dev/null |
                    sed -n 's/^==[0-9]*== I *refs: *\([0-9,]*\)$/\1/p' | tr -d ,)
                if [ -z "$ir" ]; then
                    echo "emit_bench: valgrind could not count $target $name-$k" >&2
                    exit 1
                fi
            fi
            printf '%s\t%s\t%s\t%s\n' "$target" "$name" "$k" "$ir" >>"$results"
        done
    done
done

python3 - "$results" "$runs" "$work" <<'PY'
import json, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
work = sys.argv[3]
data, order = {}, []
for tg, name, k, ir in rows:
    if (tg, name) not in data:
        order.append((tg, name))
        data[(tg, name)] = {"ir": {}, "runs": json.load(open(f"{work}/{tg}-{name}.json"))["runs"]}
    data[(tg, name)]["ir"][k] = float(ir)
kinds = ["O0", "O2", "native", "trad", "callee"]
print(f"Wall time (min / median of {sys.argv[2]} interleaved rounds, ms) and instructions "
      "(valgrind Ir, 1e6)")
print(f"{'target':<7}{'program':<11}" + "".join(f"{k:>22}" for k in kinds))
for key in order:
    d = data[key]
    cells = []
    for k in kinds:
        if k in d["runs"]:
            t = d["runs"][k]
            cells.append(f"{min(t)*1e3:7.1f}/{statistics.median(t)*1e3:7.1f} "
                         f"{d['ir'][k]/1e6:6.0f}")
        else:
            cells.append("-")
    print(f"{key[0]:<7}{key[1]:<11}" + "".join(f"{c:>22}" for c in cells))
print()
print("Ratios: min = of the minimum wall times, pair = median over rounds of the ratio of the")
print("two times in the same round (robust to the machine's slow phases), Ir = of instructions")
cols = [("O0", "O2"), ("native", "O2"), ("trad", "O2"), ("callee", "O2"), ("trad", "O0"),
        ("callee", "trad"), ("trad", "native")]
print(f"{'':<18}" + "".join(f"{a + '/' + b:>20}" for a, b in cols))
print(f"{'target':<7}{'program':<11}" + "".join(f"{'min  pair    Ir':>20}" for _ in cols))
for key in order:
    d = data[key]
    cells = []
    for a, b in cols:
        if a in d["runs"] and b in d["runs"]:
            ta, tb = d["runs"][a], d["runs"][b]
            r = [min(ta) / min(tb),
                 statistics.median(x / y for x, y in zip(ta, tb)),
                 d["ir"][a] / d["ir"][b]]
            cells.append(" ".join("  -  " if x != x else f"{x:5.2f}" for x in r))
        else:
            cells.append("-")
    print(f"{key[0]:<7}{key[1]:<11}" + "".join(f"{c:>20}" for c in cells))
PY
