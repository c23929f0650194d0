#!/bin/sh
# Width: the same 60 s budget spent on prefetch 0 against 2, once as a live comparison and
# once as the multi-process sweep (10 runs of 3 s per setting, interleaved), in one go;
# prints both 95% intervals of the rate ratio and how many times narrower the live one is.
# The sweep's interval: Welch's t on the runs' log rates.
#
# Usage: scripts/live-width.sh [EXTRA FORWARDER FLAGS...]
# Needs a release build and python3 with polars. Nothing else should load the machine.
set -eu
bin=${FWDSCOPE:-${CARGO_TARGET_DIR:-target}/release/fwdscope}
[ -x "$bin" ] || { echo "no fwdscope at $bin: cargo build --release, or set FWDSCOPE" >&2; exit 2; }
flags="--cache nocache --fib dir24 --table fixtures/tables/asn-ipv4-prefixes.txt.gz --aggregates $*"
out=$(mktemp -d /tmp/fwdscope-width.XXXXXX)
echo "# load before: $(cat /proc/loadavg)"
"$bin" sweep --live --prefetch 0,2 --duration 60 -o "$out/live" -- $flags >/dev/null 2>&1
"$bin" sweep --prefetch 0,2 --repeat 10 --duration 3 -o "$out/sweep" -- --device inline $flags >/dev/null 2>&1
python3 - "$out" <<'PY'
import json, math, sys
import polars as pl
out = sys.argv[1]

def t_quantile(p, df):
    # Student's t quantile by bisection on the CDF (Simpson's rule over the density).
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    pdf = lambda x: c * (1 + x * x / df) ** (-(df + 1) / 2)
    def cdf(x, n=2000):
        h = x / n
        s = pdf(0) + pdf(x) + sum((4 if i % 2 else 2) * pdf(i * h) for i in range(1, n))
        return 0.5 + s * h / 3
    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2

e = json.load(open(f"{out}/live/live.json"))["results"][1]["effect"]
lw = e["ci"][1] / e["ci"][0]
df = pl.read_parquet(f"{out}/sweep/results.parquet")
a = [math.log(x) for x in df.filter(pl.col("prefetch") == "0")["mpps"]]
b = [math.log(x) for x in df.filter(pl.col("prefetch") == "2")["mpps"]]
def mv(x):
    m = sum(x) / len(x)
    return m, sum((v - m) ** 2 for v in x) / (len(x) - 1) / len(x)
(ma, va), (mb, vb) = mv(a), mv(b)
d, se = mb - ma, math.sqrt(va + vb)
df_w = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
h = t_quantile(0.975, df_w) * se
ratio = math.exp(d)
sw = math.exp(2 * h)
print(f"live : ratio {e['ratio']:.4f} [{e['ci'][0]:.4f}, {e['ci'][1]:.4f}]  width {100*(lw-1):.2f}%")
print(f"sweep: ratio {ratio:.4f} [{math.exp(d-h):.4f}, {math.exp(d+h):.4f}]  width {100*(sw-1):.2f}%  (Welch, {len(a)}+{len(b)} runs)")
print(f"the live interval is {math.log(sw)/math.log(lw):.1f} times narrower")
PY
echo "# load after: $(cat /proc/loadavg)"
rm -rf "$out"
