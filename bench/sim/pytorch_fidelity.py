#!/usr/bin/env python3
"""Fidelity against real PyTorch: does `convtune simulate` predict what whole networks really cost?

For each workload of bench/sim/pytorch-truth.sh's output (OUT/<w>-measure.json: PyTorch's
per-problem measurements; OUT/<w>-runs.json: the network run for real, benchmark off and on,
cold and warm kernel cache, several fresh processes each):

  * the prediction: `convtune simulate --stream trace:<the network's convolutions>
    --pytorch-measured OUT/<w>-measure.json --kernel-cache C --iterations N --json`, plus the
    non-convolution part of a step (`other_ms`), which a user's capture measures: here the
    steady step time of the FIRST benchmark-off run minus the predicted steady convolution time
    of `off` (one number per workload and position in its cycle of shapes, the same for every
    setting and cache state);
  * the measurement: per run, the measured steps, then for the steps past them the steady step
    of their position in the cycle (the median over the cycles after the first); the median over
    runs and their range;
  * break-even: the iteration from which benchmark on's cumulative time stays at or below off's,
    predicted (from the simulated per-iteration totals + other_ms) and measured (from the
    per-iteration medians over the runs of each setting).

A workload whose runs change shape (a `cycle` > 1: a stream from torch_networks.py --batch or
--size lists) is simulated from <w>.trace, its cycle one iteration per step.

    bench/sim/pytorch_fidelity.py --cli build/cpu/tools/convtune --results bench/sim/results/h200 \
        --problems bench/sim/data --iterations 100,1000 --out fidelity.md
    bench/sim/pytorch_fidelity.py --cli build/cpu/tools/convtune --results bench/sim/results/h100 --replay h100 --hold-out

--replay NAME takes PyTorch's costs from the measured library NAME (what a user without a GPU
gets) instead of each workload's own measurements; --hold-out leaves each workload's own file
out of that library (the library's model then predicts the problems no other network shares).

The per-problem measurements and the network runs are separate processes, so the prediction
never sees the runs it is checked against (except other_ms, from the first off run, as above).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

SETTING_OF = {0: "off", 1: "pytorch"}


def load_runs(path):
    runs = []
    with open(path) as f:
        for line in f:
            if line.strip():
                runs.append(json.loads(line))
    return runs


def steady_cycle(run):
    """Per position of the run's cycle of shapes (1 for a fixed shape): the median of that
    position's steps after the first cycle."""
    it, c = run["iterations_ms"], run.get("cycle", 1)
    return [statistics.median(it[c + i::c]) for i in range(c)]


def measured_series(run, n):
    """The run's first n steps: those measured, then each position's steady step."""
    it, cyc = run["iterations_ms"], steady_cycle(run)
    return [it[i] if i < len(it) else cyc[i % len(cyc)] for i in range(n)]


def measured_total(run, n):
    return sum(measured_series(run, n))


def simulate(cli, trace, source, cache, n):
    """source: ("file", measure.json) or ("library", name, recordings dir or None)."""
    env = dict(os.environ)
    if source[0] == "file":
        how = ["--pytorch-measured", source[1]]
    else:
        how = ["--replay", source[1]]
        if source[2]:
            env["CONVTUNE_RECORDINGS_DIR"] = source[2]
    # Only PyTorch's own two settings are checked (a library's recording may add convtune's).
    cmd = [cli, "simulate", "--stream", "trace:" + trace] + how + ["--kernel-cache", cache, "--iterations", str(n),
                                                                   "--flags", "off", "--flags", "pytorch", "--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0 and "kernel_cache_folder" in p.stderr:
        return None  # cold measurements made before each process had its own kernel cache: not replayed
    if p.returncode not in (0,):
        sys.exit(f"pytorch_fidelity: {' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    doc = json.loads(p.stdout)
    out = {"predicted": len(doc.get("pytorch_library", {}).get("predicted", [])),
           "problems": doc.get("pytorch_library", {}).get("problems", 0),
           "recommendation": doc["recommendation"]["setting"]}
    for s in doc["settings"]:
        if s.get("failure"):
            sys.exit(f"pytorch_fidelity: {s['name']} failed: {s['failure']}")
        per = [x["search_ms"] + x["exec_ms"] + x.get("other_ms", 0.0) for x in s["per_iteration"]]
        out[s["name"]] = dict(total=s["total_ms"], per=per, lo=s["range_ms"][0], hi=s["range_ms"][1])
    return out


def legacy_trace(a, w, tmp):
    """A workload without its own capture: its problems (bench/sim/make-problems.sh) as a trace,
    or the stream trace beside them (changing shapes: one iteration per step of its cycle)."""
    if not a.problems:
        sys.exit(f"pytorch_fidelity: {w}: no {w}.trace with a plain timing in --results; give --problems")
    trace = os.path.join(a.problems, w + ".trace")
    if os.path.exists(trace):
        return trace
    with open(os.path.join(a.problems, w + ".json")) as f:
        problems = json.load(f)
    trace = os.path.join(tmp, w + ".trace")
    with open(trace, "w") as f:
        f.write("# convtune-trace 1\n" + "\n".join(p["key"] for p in problems) + "\n")
    return trace


def break_even(per0, per1, other=None):
    """The iteration from which setting 1's cumulative time stays at or below setting 0's, over
    the per-iteration series per0 and per1 (plus other[i mod len(other)] each, when given), or
    projected past their end with the steady gain of their second halves; None when never."""
    other = other or [0.0]
    c0 = c1 = 0.0
    last_above = 0
    for i, (a, b) in enumerate(zip(per0, per1)):
        c0 += a + other[i % len(other)]
        c1 += b + other[i % len(other)]
        if c1 > c0:
            last_above = i + 1
    if last_above == len(per0):
        h = len(per0) // 2
        gain = statistics.mean(per0[h:]) - statistics.mean(per1[h:])
        return None if gain <= 0 else int(len(per0) + (c1 - c0) / gain) + 1
    return last_above + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--results", required=True, help="folder with <w>-measure.json and <w>-runs.json")
    ap.add_argument("--problems", help="folder with <w>.json (bench/sim/make-problems.sh), for results without their own "
                    "<w>.trace")
    ap.add_argument("--iterations", default="100,1000")
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--replay", metavar="NAME", help="take PyTorch's costs from the measured library NAME (`simulate --replay NAME`, "
                    "no GPU) instead of each workload's own measurements (the advise way on a GPU)")
    ap.add_argument("--hold-out", action="store_true", help="with --replay: each workload against the library without its own "
                    "file (leave one network out: its problems then come from the library's model, or from other networks that "
                    "share them)")
    ap.add_argument("--out")
    a = ap.parse_args()
    ns = [int(x) for x in a.iterations.split(",")]
    lines = ["| workload | cache | setting | N | predicted | predicted range | measured median | measured range | measured spread | error | "
             "in range | inside measured |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    be_lines = ["| workload | cache | predicted break-even | measured break-even (medians) | over the pairs of runs | "
                "determined | error |", "|---|---|---:|---:|---:|---|---:|"]
    diff_lines = ["| workload | cache | N | predicted on-off | measured on-off | ratio |", "|---|---|---:|---:|---:|---:|"]
    rec_lines = ["| workload | cache | N | recommended | measured faster (medians) | measured runs separate | right way | "
                 "made inside the spread |", "|---|---|---:|---|---|---|---|---|"]
    rec_right, rec_inside, rec_changes = 0, 0, 0
    plain_timed, ratios, be_errors, warm_timed, be_determined = [], [], [], set(), []
    worst, outside, off_runs, cases, same, decided = 0.0, 0, 0, 0, 0, 0
    tmp = tempfile.mkdtemp()
    library = None
    if a.replay:
        doc = json.loads(subprocess.run([a.cli, "list", "recordings", "--json"], stdout=subprocess.PIPE, text=True, check=True).stdout)
        library = next((e["pytorch"]["folder"] for e in doc["recordings"] if e["name"] == a.replay and "pytorch" in e),
                       None)
        if not library:
            sys.exit(f"pytorch_fidelity: the recording library has no PyTorch measurements named {a.replay}")
    predicted_of = {}
    for measure in sorted(glob.glob(os.path.join(a.results, "*-measure.json"))):
        w = os.path.basename(measure)[: -len("-measure.json")]
        runs_path = os.path.join(a.results, w + "-runs.json")
        if not os.path.exists(runs_path) or os.path.getsize(runs_path) == 0:
            print(f"pytorch_fidelity: {w}: no network runs, skipped", file=sys.stderr)
            continue
        runs = load_runs(runs_path)
        missing = [f"benchmark={bm} {c}" for bm in (0, 1) for c in ("cold", "warm")
                   if not any(r["benchmark"] == bm and r["cache"] == c for r in runs)]
        if missing:
            print(f"pytorch_fidelity: {w}: no network runs with {', '.join(missing)}, skipped", file=sys.stderr)
            continue
        cycle = runs[0].get("cycle", 1)
        source = ("file", measure)
        if a.replay:
            held = None
            if a.hold_out:
                held = os.path.join(tmp, "lono-" + w)
                os.makedirs(os.path.join(held, a.replay, "pytorch"))
                kept = [f for f in os.listdir(library) if not f.startswith(w + ".json")]
                if len(kept) == len(os.listdir(library)):
                    sys.exit(f"pytorch_fidelity: {w}: no file {w}.json[.gz] in {library} to hold out")
                for f in kept:
                    os.symlink(os.path.join(library, f), os.path.join(held, a.replay, "pytorch", f))
            source = ("library", a.replay, held)
        own = os.path.join(a.results, w + ".trace")
        if os.path.exists(own) and "# timing plain" in open(own).read(4096):
            # The advise way: the network's own capture on the GPU, its steps timed in a plain run.
            # The simulated totals include each step's time outside convolutions; nothing is
            # taken from the runs checked against.
            trace, other = own, [0.0] * cycle
            plain_timed.append(w)
        else:
            trace, other = legacy_trace(a, w, tmp), None
        if other is None:
            # other_ms, per position of the cycle: the first off run's steady step there minus off's
            # predicted steady convolutions there (what a user's capture of their own steps measures).
            first_off = next(r for r in runs if r["benchmark"] == 0)
            probe = simulate(a.cli, trace, source, first_off["cache"], 2 * cycle)
            if probe is None:
                first_off = next(r for r in runs if r["benchmark"] == 0 and r["cache"] == "warm")
                probe = simulate(a.cli, trace, source, "warm", 2 * cycle)
            other = [m - p for m, p in zip(steady_cycle(first_off), probe["off"]["per"][cycle:])]

        def plus_other(x, n):
            return x + sum(other[i % cycle] for i in range(n))

        for cache in ("cold", "warm"):
            sel = {bm: [r for r in runs if r["benchmark"] == bm and r["cache"] == cache] for bm in (0, 1)}
            # The warm state's steps from the plain run on a warm kernel cache where the capture
            # timed one (capture.py --warm-out: <w>-warm.trace), as advise does.
            timed = os.path.join(a.results, w + "-warm.trace")
            timed = timed if cache == "warm" and w in plain_timed and os.path.exists(timed) else trace
            if timed != trace:
                warm_timed.add(w)
            sims = {n: simulate(a.cli, timed, source, cache, n) for n in ns}
            if any(v is None for v in sims.values()):
                print(f"pytorch_fidelity: {w}: {cache} kernel cache not replayed (its measurements predate "
                      "kernel_cache_folder), skipped", file=sys.stderr)
                continue
            predicted_of[w] = f"{sims[ns[0]]['predicted']} of {sims[ns[0]]['problems']}"
            for n in ns:
                sim = sims[n]
                pred_of, med_of = {}, {}
                for bm in (0, 1):
                    s = sim[SETTING_OF[bm]]
                    pred = plus_other(s["total"], n)
                    lo, hi = plus_other(s["lo"], n), plus_other(s["hi"], n)
                    meas = [measured_total(r, n) for r in sel[bm]]
                    med = statistics.median(meas)
                    pred_of[bm], med_of[bm] = pred, med
                    err = (pred - med) / med
                    inside = all(lo * (1 - 1e-9) <= m <= hi * (1 + 1e-9) for m in meas)
                    worst = max(worst, abs(err))
                    outside += 0 if inside else 1
                    # the prediction against the span of the real runs themselves: outside it, the
                    # error is larger than the difference between identical PyTorch processes
                    spanned = min(meas) <= pred <= max(meas)
                    off_runs += 0 if spanned else 1
                    cases += 1
                    lines.append(f"| {w} | {cache} | {SETTING_OF[bm]} | {n} | {pred / 1e3:.2f} s | {lo / 1e3:.2f}-{hi / 1e3:.2f} s | "
                                 f"{med / 1e3:.2f} s | {min(meas) / 1e3:.2f}-{max(meas) / 1e3:.2f} s | "
                                 f"{100 * (max(meas) / min(meas) - 1):.0f}% | {100 * err:+.1f}% | "
                                 f"{'yes' if inside else 'no'} | {'yes' if spanned else 'no'} |")
                same += (pred_of[1] < pred_of[0]) == (med_of[1] < med_of[0])
                pd, md = pred_of[1] - pred_of[0], med_of[1] - med_of[0]
                ratio = pd / md if md else float("nan")
                ratios.append(ratio)
                diff_lines.append(f"| {w} | {cache} | {n} | {pd / 1e3:+.2f} s | {md / 1e3:+.2f} s | {ratio:.2f} |")
                decided += 1
                # The recommendation: 'off' keeps PyTorch's default; 'pytorch' asks the user to turn
                # benchmark on, which the measured runs must bear out beyond their spread.
                runs_of = {bm: [measured_total(r, n) for r in sel[bm]] for bm in (0, 1)}
                separate = max(runs_of[1]) < min(runs_of[0]) or max(runs_of[0]) < min(runs_of[1])
                faster = "pytorch" if med_of[1] < med_of[0] else "off"
                rec = sim["recommendation"]
                right = rec == faster or (rec == "off" and not separate)
                inside = rec != "off" and not separate
                rec_right += right
                rec_inside += inside
                rec_changes += rec != "off"
                rec_lines.append(f"| {w} | {cache} | {n} | {rec} | {faster} | {'yes' if separate else 'no'} | "
                                 f"{'yes' if right else 'NO'} | {'YES' if inside else 'no'} |")
            n = max(ns)
            sim = sims[n]
            pbe = break_even(sim["off"]["per"], sim["pytorch"]["per"], other)
            # measured: per iteration, the median over the runs of each setting
            series = {bm: [statistics.median(x) for x in zip(*(measured_series(r, n) for r in sel[bm]))] for bm in (0, 1)}
            mbe = break_even(series[0], series[1])
            # What the runs themselves determine: the break-even of every (off run, on run) pair.
            # Where some pairs never break even and others do, the steady gain is inside the
            # spread of identical processes, and no break-even is measured.
            pairs = [break_even(measured_series(r0, n), measured_series(r1, n)) for r0 in sel[0] for r1 in sel[1]]
            found = [b for b in pairs if b]
            determined = len(found) == len(pairs) and mbe is not None
            span = f"{min(found)}-{max(found)}" if found else "never"
            if len(found) < len(pairs) and found:
                span += f" ({len(pairs) - len(found)} of {len(pairs)} pairs never)"
            e = "-" if not (pbe and mbe) else f"{100 * (pbe - mbe) / mbe:+.0f}%"
            if pbe and mbe:
                be_errors.append(abs(pbe - mbe) / mbe)
                if determined:
                    be_determined.append(abs(pbe - mbe) / mbe)
            be_lines.append(f"| {w} | {cache} | {pbe or 'never'} | {mbe or 'never'} | {span} | "
                            f"{'yes' if determined else 'no'} | {e} |")
        print(f"pytorch_fidelity: {w}: other_ms {', '.join(f'{o:.1f}' for o in other)}", file=sys.stderr)
    src = ("each workload's own PyTorch measurements (--pytorch-measured)" if not a.replay else
           f"the measured library '{a.replay}' (--replay {a.replay})" + (", each workload held out of it" if a.hold_out else ""))
    how = (f"PyTorch's costs from {src}" +
           (" (problems predicted by the library's model: " + ", ".join(f"{w} {v}" for w, v in predicted_of.items()) + ")"
            if a.replay else "") + ".\n\n" +
           f"Totals (predicted = simulate's total; for {', '.join(plain_timed) or 'no workload'} the trace's own plain-run step "
           "times give the time outside convolutions (the warm kernel cache's from a second plain run on the cache the first filled for "
           f"{', '.join(sorted(warm_timed)) or 'none'}, from the cold run for the others), for the others N x other_ms from the first "
           "off run):\n\n")
    text = (how + "\n".join(lines) +
            "\n\nBenchmark on minus off (the cost or gain of the flag), predicted against measured medians:\n\n" +
            "\n".join(diff_lines) +
            "\n\nBreak-even of benchmark=True against benchmark=False:\n\n" + "\n".join(be_lines) +
            "\n\nThe recommendation (simulate's, between off and pytorch) against the measured runs: right where it names the "
            "faster median, or keeps benchmark off where the runs do not separate; no recommendation to change may rest on a "
            "difference inside the runs' spread:\n\n" + "\n".join(rec_lines) +
            f"\n\nworst error {100 * worst:.1f}% (tolerance {100 * a.tolerance:.0f}%); measured runs outside the predicted range: {outside}; "
            f"predictions outside the span of the measured runs: {off_runs} of {cases}; "
            f"the faster setting predicted is the faster one measured (medians) in {same} of {decided} (workload, cache, N) cases; "
            f"on-off ratio in [0.67, 1.5] in {sum(0.67 <= r <= 1.5 for r in ratios)} of {len(ratios)}; "
            f"the recommendation right in {rec_right} of {decided}, to turn benchmark on in {rec_changes}, inside the measured "
            f"spread in {rec_inside}; "
            f"break-even within 25% in {sum(e <= 0.25 for e in be_errors)} of {len(be_errors)} where both exist, "
            f"{sum(e <= 0.25 for e in be_determined)} of {len(be_determined)} where every pair of runs breaks even\n")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)
    sys.exit(0 if worst <= a.tolerance else 1)


if __name__ == "__main__":
    main()
