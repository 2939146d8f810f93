#!/usr/bin/env bash
# bless.sh: the gcc oracle of the corpus. Compiles every corpus program that is valid C
# (tests/programs/*.cm and tests/programs/thesis/*.cm; NOT tests/programs/cmm_only/) with gcc
# for x86-64 and i686, runs it with the arguments of each of its `// args:` lines, and writes the
# expected output next to it.
#
# Usage: tests/oracle/bless.sh [--check] [--no32] [PROGRAM.cm...]
#   (no option)  write NAME[.VARIANT].expected (x86-64 output) and NAME[.VARIANT].expected32
#                (i686 output, only when it differs from the x86-64 output; a stale one is removed)
#   --check      write nothing; exit 1 if any stored file differs from what gcc produces now
#   --no32       skip the i686 build (only for machines without gcc-multilib)
#
# Arguments: leading `//` comment lines of a program may contain
#   // args: 4 1000            the default run        -> NAME.expected
#   // args[t64]: 64 1000      an extra run "t64"     -> NAME.t64.expected
# A program with no args line is run once without arguments.
#
# Expected file format: the program's stdout (a newline is added if it does not end with one),
# then the line `exit: N` with the exit status. tests/corpus.rs reads the same format.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
programs="$(cd "$here/../programs" && pwd)"
check=0
want32=1
files=()
for a in "$@"; do
    case "$a" in
        --check) check=1 ;;
        --no32) want32=0 ;;
        -*) echo "bless.sh: unknown option $a" >&2; exit 2 ;;
        *) files+=("$(cd "$(dirname "$a")" && pwd)/$(basename "$a")") ;;
    esac
done
if [ ${#files[@]} -eq 0 ]; then
    files=("$programs"/*.cm "$programs"/thesis/*.cm)
fi

# The oracle's flags. gcc >= 14 turns implicit declarations (C-- needs no forward declarations)
# and int/pointer conversions into errors; -fpermissive restores gcc 12's behaviour.
flags=(-w -fwrapv -O0 -no-pie -DNULL=0 '-Dstacksizeof(x)=0')
if [ "$(gcc -dumpversion | cut -d. -f1)" -ge 14 ]; then
    flags+=(-fpermissive)
fi

# i686: compute doubles in SSE2 registers, not in the x87 unit's 80-bit registers, so that the
# oracle has IEEE double semantics (each operation rounded to 64 bits) on both targets.
fpflags() {
    if [ "$1" = 32 ]; then echo "-msse2 -mfpmath=sse"; fi
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

widths=(64)
if [ $want32 -eq 1 ]; then
    widths+=(32)
fi
for w in "${widths[@]}"; do
    if ! gcc "-m$w" "${flags[@]}" $(fpflags "$w") -c "$here/sthread.c" -o "$work/sthread$w.o" 2>"$work/err"; then
        echo "bless.sh: gcc -m$w cannot compile the thread library (gcc-multilib missing?):" >&2
        cat "$work/err" >&2
        exit 1
    fi
done

gcc -O1 -w "$here/runwait.c" -o "$work/runwait"

# run_prog BINARY ARGS... : prints the expected-file text of one run.
run_prog() {
    local status
    (cd "$work" && "$work/runwait" 30 "$work/status" "$@" < /dev/null > "$work/stdout")
    read -r status < "$work/status"
    case "$status" in
        exit\ *) ;;
        *) echo "bless.sh: $1 $*: $status" >&2; return 1 ;;
    esac
    cat "$work/stdout"
    if [ -s "$work/stdout" ] && [ "$(tail -c 1 "$work/stdout" | od -An -c | tr -d ' ')" != '\n' ]; then
        echo
    fi
    echo "exit: ${status#exit }"
}

failed=0
for f in "${files[@]}"; do
    case "$f" in
        */cmm_only/*) echo "bless.sh: skipping $f (cmm_only has hand-written expectations)" >&2; continue ;;
    esac
    base="${f%.cm}"
    for w in "${widths[@]}"; do
        if ! gcc "-m$w" "${flags[@]}" $(fpflags "$w") -x c "$f" -x none "$work/sthread$w.o" -pthread -o "$work/prog$w" 2>"$work/err"; then
            echo "bless.sh: gcc -m$w rejects $f:" >&2
            cat "$work/err" >&2
            failed=1
            continue 2
        fi
    done
    # Variants: "NAME<TAB>ARGS" lines from the leading comment block; NAME "-" is the default.
    variants="$(awk '
        !/^[ \t]*\/\// { exit }
        match($0, /^[ \t]*\/\/[ \t]*args(\[[A-Za-z0-9_-]+\])?:/) {
            head = substr($0, RSTART, RLENGTH); rest = substr($0, RSTART + RLENGTH)
            name = "-"
            if (match(head, /\[[A-Za-z0-9_-]+\]/)) name = substr(head, RSTART + 1, RLENGTH - 2)
            print name "\t" rest; found = 1
        }
        END { if (!found) print "-\t" }' "$f")"
    while IFS=$'\t' read -r variant args; do
        suffix=""
        [ "$variant" != "-" ] && suffix=".$variant"
        # shellcheck disable=SC2086 # the args are split on blanks, as a shell would.
        if ! run_prog "$work/prog64" $args > "$work/exp64"; then failed=1; continue; fi
        exp="$base$suffix.expected"
        exp32="$base$suffix.expected32"
        if [ $check -eq 1 ]; then
            if ! cmp -s "$work/exp64" "$exp"; then
                echo "STALE: $exp (x86-64) differs from gcc -m64:" >&2
                diff "$exp" "$work/exp64" | head -20 >&2 || true
                failed=1
            fi
        else
            cp "$work/exp64" "$exp"
        fi
        if [ $want32 -eq 1 ]; then
            if ! run_prog "$work/prog32" $args > "$work/exp32"; then failed=1; continue; fi
            if cmp -s "$work/exp32" "$work/exp64"; then
                if [ -e "$exp32" ]; then
                    if [ $check -eq 1 ]; then
                        echo "STALE: $exp32 exists but i686 output equals x86-64 output" >&2
                        failed=1
                    else
                        rm "$exp32"
                    fi
                fi
            elif [ $check -eq 1 ]; then
                if ! cmp -s "$work/exp32" "$exp32"; then
                    echo "STALE: $exp32 (i686) differs from gcc -m32:" >&2
                    diff "$exp32" "$work/exp32" 2>&1 | head -20 >&2 || true
                    failed=1
                fi
            else
                cp "$work/exp32" "$exp32"
            fi
        fi
    done <<< "$variants"
done
exit $failed
