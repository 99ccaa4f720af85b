#!/usr/bin/env python3
"""Puts a grid's new cold kernel-cache measurements in place of an older grid's, keeping the
older one's warm measurements, and writes the library's compact copy.

    bench/sim/replace_cold.py OLD-measure.json NEW-cold.json OUT-measure.json LIBRARY.json.gz

For grids measured before `pytorch_measure.py grid` handed each process its new kernel cache
(2026-12-07): their warm measurements are right, their cold ones were not cold. NEW is
`pytorch_measure.py grid --caches cold` over the same problems on the same GPU model. The
library copy has every time rounded to 4 significant digits, one measurement per line, gzip
(data/recordings/README.md)."""
import gzip
import json
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from compact_recording import rounded  # noqa: E402


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    old_path, new_path, out_path, lib_path = sys.argv[1:]
    old, new = (json.load(open(p)) for p in (old_path, new_path))
    for doc, p in ((old, old_path), (new, new_path)):
        if doc.get("format") != "convtune-pytorch-measurement-grid":
            sys.exit(f"replace_cold: {p}: not a pytorch_measure.py grid file")
    cold = [m for m in new["measurements"] if m["cache"] == "cold"]
    if not cold or len(cold) != len(new["measurements"]):
        sys.exit(f"replace_cold: {new_path}: expected cold measurements only")
    keys = lambda m: sorted(p["key"] for p in m["problems"])
    want = keys(old["measurements"][0])
    for m in cold:
        if keys(m) != want:
            sys.exit(f"replace_cold: {new_path}: run {m['run']} {m['name']} measured other problems than {old_path}")
        if not m.get("kernel_cache_folder"):
            sys.exit(f"replace_cold: {new_path}: a measurement without its own kernel cache folder")
    if old["measurements"][0]["environment"]["device"] != cold[0]["environment"]["device"]:
        sys.exit("replace_cold: the two grids were measured on different GPU models")
    warm = [m for m in old["measurements"] if m["cache"] == "warm"]
    doc = dict(old, measurements=cold + warm)
    with open(out_path, "w") as f:
        json.dump(doc, f)
        f.write("\n")
    r = rounded(doc)
    ms = r.pop("measurements")
    head = json.dumps(r, separators=(",", ":"), sort_keys=True)[:-1]
    with gzip.open(lib_path, "wt") as f:
        f.write(head + ',"measurements":[\n' +
                ",\n".join(json.dumps(m, separators=(",", ":"), sort_keys=True) for m in ms) + "\n]}\n")
    first = lambda ms, s, c: [round(sum(p["first_ms"] for p in m["problems"]) / 1e3, 2)
                              for m in ms if m["name"] == s and m["cache"] == c]
    for s in ("bm0", "bm1"):
        print(f"{out_path}: {s} cold first calls, s: old {first(old['measurements'], s, 'cold')}, "
              f"new {first(cold, s, 'cold')}; warm {first(warm, s, 'warm')}")


if __name__ == "__main__":
    main()
