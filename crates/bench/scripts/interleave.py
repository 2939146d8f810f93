#!/usr/bin/env python3
"""interleave.py: times several executables side by side, interleaved round by round.

Why not `hyperfine A B`: hyperfine runs all of A, then all of B. On the shared virtual machines
this project runs on, speed changes in phases lasting seconds (the same binary alternates
between two speeds, e.g. 65 ms and 95 ms for the deep Summation, in runs of ten or more), so
whichever command happens to run during a slow phase loses. Here every round runs each command
once, in an order rotated from round to round, and the comparison that matters is the *paired*
one: the ratio of two commands' times within the same round, whose median over all rounds is
insensitive to phases that last longer than a round.

Usage: interleave.py [--rounds N] [--warmup W] [--json OUT] NAME=COMMAND [NAME=COMMAND...]
  COMMAND is split like a shell would (shlex), run with stdout and stderr discarded, and must
  exit 0. The first NAME is the baseline of the ratios.
Output: a table on stdout (min, median, paired median ratio against the baseline and the
  interquartile range of that ratio); --json writes {"runs": {NAME: [seconds...]},
  "ratio": {NAME: [per-round ratio...]}, "rounds": N} for other scripts.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time


def run_once(argv):
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"interleave.py: {shlex.join(argv)} exited with {proc.returncode}")
    return elapsed


def quartiles(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 4], statistics.median(xs), xs[(3 * n) // 4]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("commands", nargs="+", metavar="NAME=COMMAND")
    a = ap.parse_args()
    names, argvs = [], []
    for spec in a.commands:
        name, sep, cmd = spec.partition("=")
        if not sep or not name or not cmd:
            sys.exit(f"interleave.py: expected NAME=COMMAND, got {spec!r}")
        names.append(name)
        argvs.append(shlex.split(cmd))
    for _ in range(a.warmup):
        for argv in argvs:
            run_once(argv)
    runs = {n: [] for n in names}
    for r in range(a.rounds):
        k = r % len(names)
        for i in list(range(k, len(names))) + list(range(k)):
            runs[names[i]].append((r, run_once(argvs[i])))
    times = {n: [t for _, t in sorted(v)] for n, v in runs.items()}
    base = times[names[0]]
    ratio = {n: [x / b for x, b in zip(times[n], base)] for n in names}
    print(f"{a.rounds} interleaved rounds; ratio = paired median against {names[0]}")
    print(f"{'name':<24}{'min ms':>10}{'median ms':>11}{'ratio':>8}{'(q1':>8}{'q3)':>7}")
    for n in names:
        q1, med, q3 = quartiles(ratio[n])
        print(f"{n:<24}{min(times[n])*1e3:10.1f}{statistics.median(times[n])*1e3:11.1f}"
              f"{med:8.3f}{q1:8.3f}{q3:7.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": times, "ratio": ratio, "rounds": a.rounds}, f)


if __name__ == "__main__":
    os.environ.setdefault("LC_ALL", "C")
    main()
