#!/usr/bin/env python3
"""Makes a `convtune record` file compact enough for the recording library (data/recordings/<name>/).

    bench/sim/compact_recording.py IN.json[.gz] OUT.json.gz

Two things go, neither of which a replay reads differently:
  * per problem, the entries of algorithms of another direction (refused by `supports()` with
    "direction: ..."; a replay never asks them, and an algorithm missing from a problem is
    treated as not supported there);
  * digits: every time is rounded to 4 significant digits (0.1 us at 1 ms; cudaEvent timing
    resolves about 0.5 us).
The file is written gzip-compressed when OUT ends in .gz (Recording::load reads either).
"""
import gzip
import json
import math
import sys


def rounded(x):
    if isinstance(x, float):
        return 0.0 if x == 0 or not math.isfinite(x) else round(x, 3 - int(math.floor(math.log10(abs(x)))))
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1:]
    with (gzip.open if src.endswith(".gz") else open)(src, "rt") as f:
        doc = json.load(f)
    if doc.get("format") != "convtune-recording":
        sys.exit(f"compact_recording: {src} is not a convtune recording (format {doc.get('format')!r})")
    dropped = 0
    for p in doc["problems"]:
        keep = {k: v for k, v in p["algorithms"].items() if not str(v.get("unsupported", "")).startswith("direction:")}
        dropped += len(p["algorithms"]) - len(keep)
        p["algorithms"] = keep
    doc = rounded(doc)
    with (gzip.open if dst.endswith(".gz") else open)(dst, "wt") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"compact_recording: {dst}: {len(doc['problems'])} problems, {dropped} entries of other directions left out")


if __name__ == "__main__":
    main()
