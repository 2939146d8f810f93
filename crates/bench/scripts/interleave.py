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
Output: a table on stdout (min, median, paired median ratio against the baseline, the
  interquartile range of that ratio, and the largest peak resident set size over the rounds);
  --json writes {"runs": {NAME: [seconds...]}, "ratio": {NAME: [per-round ratio...]},
  "maxrss_kib": {NAME: [KiB...]}, "rounds": N} for other scripts (all lists in round order).

Peak resident memory: each run is forked and reaped with wait4 by a small C helper
(runrss.c next to this script, compiled on the fly with cc), whose rusage is that one child's:
ru_maxrss, its largest resident set size in KiB (all threads; any processes it waited for
itself). Not getrusage(RUSAGE_CHILDREN), whose ru_maxrss is the largest of all children so far;
and not a child forked from Python, whose ru_maxrss would start at the interpreter's ~15 MiB
(runrss.c says why). The helper also times the run (fork to wait4, CLOCK_MONOTONIC). Without a
C compiler, Python forks and reaps with os.wait4 itself and warns that small peaks are inflated.
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


RUNRSS = None  # the compiled runrss.c, or None: fall back to os.wait4 from Python


def build_runrss(tmp):
    global RUNRSS
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runrss.c")
    exe = os.path.join(tmp, "runrss")
    cc = os.environ.get("CC", "cc")
    try:
        proc = subprocess.run([cc, "-O1", "-w", src, "-o", exe], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
        ok = proc.returncode == 0
    except OSError:
        ok = False
    if ok:
        RUNRSS = exe
    else:
        print(f"interleave.py: cannot compile {src} with {cc}: peak RSS is measured from a "
              "child of Python and includes the interpreter's ~15 MiB", file=sys.stderr)


def run_once(argv):
    """Runs argv once; returns (wall seconds, peak resident set size in KiB)."""
    if RUNRSS is not None:
        out = subprocess.run([RUNRSS] + argv, stdout=subprocess.PIPE, check=True).stdout
        status, elapsed, maxrss = out.split()
        status, elapsed, maxrss = int(status), float(elapsed), int(maxrss)
    else:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = 0  # reaped here, not by Popen
        maxrss = usage.ru_maxrss
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"interleave.py: {shlex.join(argv)} exited with {code}")
    return elapsed, maxrss


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
    tmp = tempfile.mkdtemp(prefix="interleave.")
    try:
        build_runrss(tmp)
        measure(a, names, argvs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def measure(a, names, argvs):
    for _ in range(a.warmup):
        for argv in argvs:
            run_once(argv)
    runs = {n: [] for n in names}
    for r in range(a.rounds):
        k = r % len(names)
        for i in list(range(k, len(names))) + list(range(k)):
            runs[names[i]].append((r, run_once(argvs[i])))
    times = {n: [t for _, (t, _) in sorted(v)] for n, v in runs.items()}
    maxrss = {n: [m for _, (_, m) in sorted(v)] for n, v in runs.items()}
    base = times[names[0]]
    ratio = {n: [x / b for x, b in zip(times[n], base)] for n in names}
    print(f"{a.rounds} interleaved rounds; ratio = paired median against {names[0]}")
    print(f"{'name':<24}{'min ms':>10}{'median ms':>11}{'ratio':>8}{'(q1':>8}{'q3)':>7}"
          f"{'max RSS MiB':>13}")
    for n in names:
        q1, med, q3 = quartiles(ratio[n])
        print(f"{n:<24}{min(times[n])*1e3:10.1f}{statistics.median(times[n])*1e3:11.1f}"
              f"{med:8.3f}{q1:8.3f}{q3:7.3f}{max(maxrss[n])/1024:13.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": times, "ratio": ratio, "maxrss_kib": maxrss, "rounds": a.rounds},
                      f)


if __name__ == "__main__":
    os.environ.setdefault("LC_ALL", "C")
    main()
