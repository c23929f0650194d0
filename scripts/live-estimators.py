#!/usr/bin/env python3
"""Re-estimate live comparisons offline: the same blocks, several ways of turning them into a
ratio and an interval, so that estimators are compared on identical data (paired by run).

    scripts/live-estimators.py [--shift PCT] DIR [DIR ...]

Each DIR is a `fwdscope sweep --live` output (its live.json) comparing two settings: an A/A
run, or one with a planted cost (scripts/live-power.sh with KEEP=DIR keeps them). Per
estimator it prints the median 95% half-width (percent) over the A/A runs and over the
planted runs, how many A/A runs it called different at p < 0.01 (false alarms) and how many
planted runs it found slower at p < 0.01, and its half-width against trim20's on the same
runs (geometric mean of the per-run ratios, with a t interval: below 1 is narrower).

Estimators (unit: an ABBA/BAAB quad, its difference the mean log rate of B's blocks less
A's; units with a flagged block left out, as the tool does):
  trim20      20% trimmed mean of the unit differences, Tukey-McLaughlin interval (the tool's)
  mean        their plain mean, Student t interval
  trim10      10% trimmed mean
  median      their median, with the distribution-free order-statistic interval
  cpu-trim20  trim20 on rates over the workers' CPU time (schedstat run time, read by the
              controller next to each snapshot) instead of their CLOCK_MONOTONIC publish stamps

With --shift PCT, every A/A run is also estimated with its second setting's block rates
lowered by exactly PCT percent: a planted effect of that exact size on the host's real noise
(the calibration stage plants whole nanoseconds only), with how many each estimator found.

It also prints how far the workers' two clocks (TSC and CLOCK_MONOTONIC, both stamped at
each switch) disagree on the length of one block to the next: the most a rate by TSC stamps
could differ from the rate by monotonic stamps.
"""
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratio_ci import log_ratio_ci  # noqa: E402


def betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz, as Numerical
    Recipes' betacf): every denominator and ratio kept off zero by FPMIN."""
    fpmin = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) >= fpmin else fpmin)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) >= fpmin else fpmin)
            c = 1.0 + aa / c
            c = c if abs(c) >= fpmin else fpmin
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def betai(a, b, x):
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    bt = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return bt * betacf(a, b, x) / a
    return 1.0 - bt * betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t, df):
    return betai(df / 2.0, 0.5, df / (df + t * t))


def t_quantile_975(df):
    lo, hi = 0.0, 50.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if t_two_sided_p(mid, df) > 0.05:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def trimmed(d, trim):
    """(mean, se, df) of the trimmed mean with the Tukey-McLaughlin standard error."""
    n = len(d)
    v = sorted(d)
    g = int(math.floor(trim * n))
    h = n - 2 * g
    if h < 2:
        return None
    m = sum(v[g:n - g]) / h
    lo, hi = v[g], v[n - 1 - g]
    w = [min(max(x, lo), hi) for x in v]
    wm = sum(w) / n
    wvar = sum((x - wm) ** 2 for x in w) / (n - 1)
    se = math.sqrt(wvar) / ((1 - 2 * g / n) * math.sqrt(n))
    return m, se, h - 1


def t_estimate(d, trim):
    r = trimmed(d, trim)
    if r is None or r[1] == 0:
        return None
    m, se, df = r
    half = t_quantile_975(df) * se
    return m, half, t_two_sided_p(abs(m / se), df)


def median_estimate(d):
    """Median with the order-statistic interval (binomial, about 95%) and the sign test's p."""
    n = len(d)
    v = sorted(d)
    m = statistics.median(v)
    # Largest k with P(Binom(n, 1/2) < k) <= 0.025: the interval is v[k-1] .. v[n-k].
    cdf, k = 0.0, 0
    for i in range(n + 1):
        p = math.comb(n, i) / 2 ** n
        if cdf + p > 0.025:
            k = i
            break
        cdf += p
    if k < 1:
        return None
    half = (v[n - k] - v[k - 1]) / 2
    pos = sum(1 for x in d if x > 0)
    tail = sum(math.comb(n, i) for i in range(0, min(pos, n - pos) + 1)) / 2 ** n
    return m, half, min(1.0, 2 * tail)


def unit_diffs(blocks, key, shift=0.0):
    """One log difference per unit (setting 1 less setting 0), setting 1's rates scaled by
    (1 - shift)."""
    units = {}
    for b in blocks:
        units.setdefault(b["unit"], []).append(b)
    out = []
    for u in sorted(units):
        bs = units[u]
        if any(b["flags"] or not b.get(key) or b[key] <= 0 for b in bs):
            continue
        logs = {s: [math.log(b[key] * (1 - shift if s == 1 else 1)) for b in bs if b["setting"] == s] for s in (0, 1)}
        if logs[0] and logs[1]:
            out.append(statistics.fmean(logs[1]) - statistics.fmean(logs[0]))
    return out


def clock_spread(blocks):
    """Largest relative difference, over consecutive blocks of one worker, between the TSC
    rate measured over that block and the median (ticks per monotonic ns)."""
    per_worker = {}
    for b in blocks:
        for w in b["workers"]:
            if w.get("switch_tsc") and w.get("switch_mono_ns"):
                per_worker.setdefault(w["worker"], []).append((w["switch_mono_ns"], w["switch_tsc"]))
    worst = 0.0
    for stamps in per_worker.values():
        stamps.sort()
        f = [(t2 - t1) / (m2 - m1) for (m1, t1), (m2, t2) in zip(stamps, stamps[1:]) if m2 > m1]
        if len(f) >= 2:
            med = statistics.median(f)
            worst = max(worst, max(abs(x / med - 1) for x in f))
    return worst if per_worker else None


ESTIMATORS = [
    ("trim20", "mpps", lambda d: t_estimate(d, 0.2)),
    ("mean", "mpps", lambda d: t_estimate(d, 0.0)),
    ("trim10", "mpps", lambda d: t_estimate(d, 0.1)),
    ("median", "mpps", median_estimate),
    ("cpu-trim20", "cpu_mpps", lambda d: t_estimate(d, 0.2)),
]


def main(args):
    shift = 0.0
    if args[:1] == ["--shift"]:
        shift, args = float(args[1]) / 100, args[2:]
    dirs = args
    rows = {name: {"aa": [], "planted": [], "shifted": []} for name, _, _ in ESTIMATORS}
    widths = {name: [] for name, _, _ in ESTIMATORS}  # per run, None where not estimated
    spreads = []
    kinds = {"aa": 0, "planted": 0}
    for d in dirs:
        r = json.load(open(f"{d}/live.json"))
        labels = [x["setting"]["label"] for x in r["results"]]
        kind = "aa" if labels[1].endswith("(again)") else "planted"
        kinds[kind] += 1
        s = clock_spread(r["blocks"])
        if s is not None:
            spreads.append(s)
        for name, key, est in ESTIMATORS:
            diffs = unit_diffs(r["blocks"], key)
            e = est(diffs) if len(diffs) >= 10 else None
            widths[name].append(e[1] if e else None)
            if e is not None:
                rows[name][kind].append(e)
            if shift and kind == "aa":
                diffs = unit_diffs(r["blocks"], key, shift)
                e = est(diffs) if len(diffs) >= 10 else None
                if e is not None:
                    rows[name]["shifted"].append(e)
    print(f"{len(dirs)} runs: {kinds['aa']} A/A, {kinds['planted']} planted")
    print(f"{'estimator':<12} {'A/A half-width %':>17} {'false alarms':>13} {'planted half-width %':>21} "
          f"{'planted effect %':>17} {'found':>7}  {'width vs trim20':>26}")
    for name, _, _ in ESTIMATORS:
        aa, pl = rows[name]["aa"], rows[name]["planted"]
        hw = lambda xs: f"{100 * statistics.median(h for _, h, _ in xs):.3f}" if xs else "-"
        eff = f"{100 * (math.exp(statistics.median(m for m, _, _ in pl)) - 1):+.2f}" if pl else "-"
        alarms = f"{sum(1 for _, _, p in aa if p < 0.01)}/{len(aa)}"
        found = f"{sum(1 for m, _, p in pl if p < 0.01 and m < 0)}/{len(pl)}"
        pairs = [(a, b) for a, b in zip(widths[name], widths["trim20"]) if a and b]
        ratio, lo, hi, _ = log_ratio_ci(pairs)
        vs = f"{ratio:.3f} [{lo:.3f}, {hi:.3f}]" if name != "trim20" else "1"
        line = f"{name:<12} {hw(aa):>17} {alarms:>13} {hw(pl):>21} {eff:>17} {found:>7}  {vs:>26}"
        if shift:
            sh = rows[name]["shifted"]
            line += f"   A/A shifted {100 * shift:.2f}%: found {sum(1 for m, _, p in sh if p < 0.01 and m < 0)}/{len(sh)}"
        print(line)
    if spreads:
        print(f"TSC against CLOCK_MONOTONIC over one block: at most {max(spreads):.2e} apart (median of runs "
              f"{statistics.median(spreads):.2e}): a rate by TSC stamps is the rate by monotonic stamps to that")
    else:
        print("TSC against CLOCK_MONOTONIC: no switch_tsc in these runs (written by builds from this change on)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
