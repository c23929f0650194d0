#!/bin/sh
# Power and false alarms of the live comparison: RUNS live comparisons of 30 s with a
# planted cost of PLANT% (default 2) of the measured ns per packet (the calibration stage,
# in whole ns: the planted share is printed as it came out), interleaved with
# RUNS A/A comparisons; prints each run's ratio, interval and p, then how many planted runs
# were found at p < 0.01 and how many A/A runs raised a false alarm at p < 0.01.
#
# With KEEP=DIR (a new or empty directory) the runs' outputs are kept in DIR (planted-N/,
# aa-N/), for scripts/live-estimators.py to re-estimate offline.
#
# Usage: scripts/live-power.sh [RUNS, default 20] [EXTRA FORWARDER FLAGS...]
# Needs a release build (cargo build --release). Nothing else should load the machine.
set -eu
runs=${1:-20}
plant=${PLANT:-2}
[ $# -gt 0 ] && shift
bin=${FWDSCOPE:-${CARGO_TARGET_DIR:-target}/release/fwdscope}
flags="--cache nocache --fib dir24 --table fixtures/tables/asn-ipv4-prefixes.txt.gz --aggregates $*"
[ -x "$bin" ] || { echo "no fwdscope at $bin: cargo build --release, or set FWDSCOPE" >&2; exit 2; }
if [ -n "${KEEP:-}" ]; then
  # Runs are named planted-N and aa-N: a second set in the same directory would replace them.
  if [ -d "$KEEP" ] && [ -n "$(ls -A "$KEEP")" ]; then echo "KEEP=$KEEP is not empty: give each set a directory of its own" >&2; exit 2; fi
  out=$KEEP; mkdir -p "$out"
else out=$(mktemp -d /tmp/fwdscope-power.XXXXXX); fi
echo "# load before: $(cat /proc/loadavg)"
# ns per packet of a worker, device inline as live mode runs it.
mpps=$("$bin" forward --duration 3 --device inline $flags --json 2>&1 | tail -1 |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["total_mpps"])')
spin=$(python3 -c "print(max(1, round($plant / 100 * 1e3 / $mpps)))")
echo "# $mpps Mpps on one worker: $plant% of $(python3 -c "print(round(1e3/$mpps,1))") ns/packet = --spin-ns $spin ($(python3 -c "print(round(100 * $spin * $mpps / 1e3, 2))")%)"
found=0; alarms=0
i=1
while [ "$i" -le "$runs" ]; do
  for kind in planted aa; do
    if [ $kind = planted ]; then axis="--spin-ns 0,$spin"; else axis="--aa"; fi
    "$bin" sweep --live $axis --duration 30 -o "$out/$kind-$i" --force -- $flags >/dev/null 2>&1
    line=$(python3 - "$out/$kind-$i/live.json" "$kind" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); e = r["results"][1]["effect"]; v = r["results"][1]["verdict"]
flag = sum(1 for b in r["blocks"] if b["flags"])
hit = e["p"] < 0.01 and (sys.argv[2] == "aa" or e["ratio"] < 1)
print(f"{int(hit)} ratio {e['ratio']:.4f} [{e['ci'][0]:.4f}, {e['ci'][1]:.4f}] p {e['p']:.2e} units {e['units']} left out {e['left_out']} flagged blocks {flag} verdict {v['kind']}")
PY
)
    echo "$kind $i: ${line#* }"
    if [ "${line%% *}" = 1 ]; then
      if [ $kind = planted ]; then found=$((found + 1)); else alarms=$((alarms + 1)); fi
    fi
  done
  i=$((i + 1))
done
echo "# planted $plant% found at p < 0.01 in $found of $runs runs; A/A false alarms at p < 0.01: $alarms of $runs"
echo "# load after: $(cat /proc/loadavg)"
if [ -n "${KEEP:-}" ]; then echo "# kept in $out"; else rm -rf "$out"; fi
