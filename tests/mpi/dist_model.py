#!/usr/bin/env python3
"""bench/dist/model.py computes the catalogue's run time from its measured inputs: a tune --json
report's search times and scaling.sh's start-up and replay rows (docs/distributed.md). Checked on
hand-made inputs whose answers are known: the dynamic hand-out, the machinery's cost per problem,
the start-up, a catalogue larger than the report, problems from a database left out.

Usage: dist_model.py MODEL.py WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

model, work = sys.argv[1:3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def rows(out):
    """ranks -> (start-up s, schedule s, T s) from the model's table."""
    got = {}
    for m in re.finditer(r"^\| (\d+) \| ([\d.]+)[^|]*\| ([\d.]+) \| ([\d.]+) \|", out, re.M):
        got[int(m[1])] = tuple(float(x) for x in m.group(2, 3, 4))
    return got


costs = os.path.join(work, "costs.json")
scaling = os.path.join(work, "scaling.json")
# Five searches, 4000 ms then four of 1000 ms, and one problem from a database (no cost).
with open(costs, "w") as f:
    json.dump({"backend": "cudnn", "problems": [{"search_ms": 4000, "source": "search"}] +
               [{"search_ms": 1000, "source": "search"}] * 4 + [{"search_ms": 0, "source": "database"}]}, f)
# Start-up 2 s at 1 rank, 3 s at 2; the replay at 1 rank: 100 problems in 2 + 10 s = 100 ms a problem.
with open(scaling, "w") as f:
    json.dump([{"catalogue": "startup", "ranks": 1, "problems": 1, "wall_s": 2.0},
               {"catalogue": "startup", "ranks": 2, "problems": 1, "wall_s": 3.0},
               {"catalogue": "replay", "ranks": 1, "problems": 100, "wall_s": 12.0},
               {"catalogue": "replay", "ranks": 2, "problems": 100, "wall_s": 9.0}], f)

p = subprocess.run([sys.executable, model, costs, "--ranks", "1,2,4"], capture_output=True, text=True)
print(p.stdout)
if p.returncode != 0:
    fail(p.stderr)
# No machinery: 1 rank 8 s; 2 ranks: the 4 s problem on one, the four 1 s ones on the other: 4 s;
# 4 ranks: still 4 s (the long problem), where a static share or total/N would say 2 s.
if rows(p.stdout) != {1: (0, 8, 8), 2: (0, 4, 4), 4: (0, 4, 4)}:
    fail(f"schedule without machinery: {rows(p.stdout)}")
if "1 taken from a database, left out" not in p.stdout or "p90 2800.0, max 4000.0" not in p.stdout:
    fail("the problem from a database is not said to be left out")

p = subprocess.run([sys.executable, model, costs, "--scaling", scaling, "--ranks", "1,2,8", "--problems", "10"], capture_output=True,
                   text=True)
print(p.stdout)
if p.returncode != 0:
    fail(p.stderr)
# 10 problems: the five costs twice (4, 1, 1, 1, 1, 4, 1, 1, 1, 1 s), each + 0.1 s of machinery.
# 1 rank: 2 + 17 s; 2 ranks: rank A 4.1, rank B 1.1 x4 = 4.4 -> A takes the second 4.1 (8.2), B the
# last four (8.8): 3 + 8.8; 8 ranks (start-up as at 2, the largest measured): the first eight at
# once, both 4.1 s ones among them, the last two on ranks free at 1.1 s: 3 + 4.1.
want = {1: (2, 17, 19), 2: (3, 8.8, 11.8), 8: (3, 4.1, 7.1)}
got = rows(p.stdout)
if set(got) != set(want) or any(abs(a - b) > 0.011 for r in want for a, b in zip(got[r], want[r])):
    fail(f"with machinery and start-up: {got}, expected {want}")
if "100.00 ms a problem" not in p.stdout or "(as at 2)" not in p.stdout:
    fail("the machinery's per-problem cost or the start-up's source is not shown")

p = subprocess.run([sys.executable, model, scaling], capture_output=True, text=True)
if p.returncode != 2 or "not a `convtune tune --json` report" not in p.stderr:
    fail(f"a file that is not a tune report: exit {p.returncode}, {p.stderr}")
print("PASS")
