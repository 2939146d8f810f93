#!/usr/bin/env bash
# emit_bench.sh: the emission stage against gcc -O0/-O2 and the native back end on the
# single-threaded thesis programs (Summation, Unbalanced Binary Tree, Real World with reduced
# parameters, Quicksort), on x86-64 and i686. Each executable is timed with hyperfine (median
# of several runs after a warm-up) and the medians are printed side by side, with the ratios
# the emission stage is judged by (traditional vs gcc -O0 and -O2; callee-cleanup vs
# traditional).
#
# Usage: crates/bench/scripts/emit_bench.sh [CMM_BINARY] [RUNS]
#   CMM_BINARY defaults to target/release/cmm (build it first: cargo build --release).
# gcc compiles the same .cm sources as C, with the corpus oracle's flags (tests/oracle/bless.sh)
# plus -fno-optimize-sibling-calls at -O2 so its recursion stays recursion (runtime-facts.md).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cmm="${1:-$root/target/release/cmm}"
runs="${2:-11}"
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

# BENCH_STAT=min reports the fastest run instead of the median (useful on a loaded machine,
# where other processes only ever add time).
stat="${BENCH_STAT:-median}"
median() { # hyperfine JSON -> median (or min) seconds
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print(r[sys.argv[2]] if sys.argv[2]=="median" else min(r["times"]))' "$1" "$stat"
}

printf '%-6s %-10s %9s %9s %9s %9s %9s %8s %8s %8s\n' target program gcc-O0 gcc-O2 native \
    trad callee trad/O0 trad/O2 callee/trad
for target in x86_64 i686; do
    if [ "$target" = i686 ]; then m=-m32; fp="-msse2 -mfpmath=sse"; else m=-m64; fp=""; fi
    for p in "${programs[@]}"; do
        read -r name file args <<<"$p"
        src="$root/tests/programs/$file"
        cp "$src" "$work/$name.c"
        declare -A t=()
        gcc $m "${gccflags[@]}" $fp -O0 "$work/$name.c" -o "$work/$name-O0"
        gcc $m "${gccflags[@]}" $fp -O2 -fno-optimize-sibling-calls "$work/$name.c" -o "$work/$name-O2"
        "$cmm" compile --backend emit --mech traditional --target "$target" "$src" -o "$work/$name-trad"
        "$cmm" compile --backend emit --mech callee-cleanup --target "$target" "$src" -o "$work/$name-callee"
        kinds=(O0 O2 trad callee)
        if [ "$target" = x86_64 ]; then
            "$cmm" compile --backend native --target x86_64 "$src" -o "$work/$name-native"
            kinds+=(native)
        fi
        for k in "${kinds[@]}"; do
            # shellcheck disable=SC2086
            hyperfine -N --warmup 1 --runs "$runs" --export-json "$work/$k.json" \
                "$work/$name-$k $args" >/dev/null 2>&1
            t[$k]=$(median "$work/$k.json")
        done
        native="${t[native]:-}"
        python3 - "$target" "$name" "${t[O0]}" "${t[O2]}" "${native:-nan}" "${t[trad]}" "${t[callee]}" <<'PY'
import sys
tg, name, o0, o2, nat, tr, cc = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
fmt = lambda x: "      -  " if x != x else f"{x*1000:7.1f}ms"
print(f"{tg:<6} {name:<10} {fmt(o0)} {fmt(o2)} {fmt(nat)} {fmt(tr)} {fmt(cc)} "
      f"{tr/o0:8.2f} {tr/o2:8.2f} {cc/tr:8.2f}")
PY
        unset t
    done
done
