#!/usr/bin/env bash
# runtime_check.sh: checks the Rust runtime (crates/stackrt) against the gcc oracle, without
# the cmm compiler. Every valid-C corpus program is compiled by gcc with its `main` renamed
# `cmm_main`, linked with libstackrt.a (instead of tests/oracle/sthread.c) and an object
# defining `__cmm_abi = 0`, run with each of its `// args:` lines, and compared with its
# expected file. This exercises the runtime's start code, the sthread_* library (handles,
# join, exit, mutexes, stack sizes) and the exit-status/flush path on x86-64 and i686.
#
# Usage: tests/oracle/runtime_check.sh [--no32]
# Builds stackrt with cargo into $CARGO_TARGET_DIR (default: target-runtime-check).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
programs="$root/tests/programs"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target-runtime-check}"
widths=(64 32)
[ "${1:-}" = "--no32" ] && widths=(64)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gcc -O1 -w "$here/runwait.c" -o "$work/runwait"
echo 'unsigned int __cmm_abi = 0;' > "$work/abi.c"

failed=0
for w in "${widths[@]}"; do
    if [ "$w" = 64 ]; then
        triple=x86_64-unknown-linux-gnu
        fp=""
    else
        triple=i686-unknown-linux-gnu
        fp="-msse2 -mfpmath=sse"
    fi
    (cd "$root" && cargo build --quiet -p stackrt --target "$triple")
    lib="$CARGO_TARGET_DIR/$triple/debug/libstackrt.a"
    gcc "-m$w" -c "$work/abi.c" -o "$work/abi$w.o"
    for f in "$programs"/*.cm "$programs"/thesis/*.cm; do
        base="${f%.cm}"
        # shellcheck disable=SC2086 # $fp is a list of flags.
        if ! gcc "-m$w" $fp -w -fwrapv -O0 -no-pie -DNULL=0 '-Dstacksizeof(x)=0' -Dmain=cmm_main \
            -x c "$f" -x none "$work/abi$w.o" "$lib" -pthread -ldl -lm -o "$work/prog" 2> "$work/err"; then
            echo "FAIL (link, -m$w): $f" >&2
            head -5 "$work/err" >&2
            failed=1
            continue
        fi
        while IFS=$'\t' read -r variant args; do
            suffix=""
            [ "$variant" != "-" ] && suffix=".$variant"
            exp="$base$suffix.expected"
            if [ "$w" = 32 ] && [ -e "$base$suffix.expected32" ]; then
                exp="$base$suffix.expected32"
            fi
            # shellcheck disable=SC2086 # the args are split on blanks, as a shell would.
            (cd "$work" && "$work/runwait" 30 "$work/status" "$work/prog" $args < /dev/null > "$work/stdout" 2> "$work/stderr")
            read -r status < "$work/status"
            {
                cat "$work/stdout"
                if [ -s "$work/stdout" ] && [ "$(tail -c 1 "$work/stdout" | od -An -c | tr -d ' ')" != '\n' ]; then
                    echo
                fi
                case "$status" in
                    exit\ *) echo "exit: ${status#exit }" ;;
                    *) echo "$status" ;;
                esac
            } > "$work/got"
            if ! cmp -s "$work/got" "$exp"; then
                echo "FAIL (-m$w): $f ${variant/#-/default} ($args)" >&2
                diff "$exp" "$work/got" | head -10 >&2 || true
                head -3 "$work/stderr" >&2
                failed=1
            fi
        done < <(awk '
            !/^[ \t]*\/\// { exit }
            match($0, /^[ \t]*\/\/[ \t]*args(\[[A-Za-z0-9_-]+\])?:/) {
                head = substr($0, RSTART, RLENGTH); rest = substr($0, RSTART + RLENGTH)
                name = "-"
                if (match(head, /\[[A-Za-z0-9_-]+\]/)) name = substr(head, RSTART + 1, RLENGTH - 2)
                print name "\t" rest; found = 1
            }
            END { if (!found) print "-\t" }' "$f")
    done
done
if [ $failed -eq 0 ]; then
    echo "runtime_check: all corpus runs match the oracle (widths: ${widths[*]})"
fi
exit $failed
