#!/bin/sh
# Do the two instruments agree? For every cache mode x FIB engine x prefetch depth on the
# real table, one worker: record the forwarder (sampling with callchains, stage clocks on),
# then print per stage the sampled and clocked share of the forwarding work, the points
# apart, and the share of the workers' samples no stage claimed (`other`). The host (CPU
# model, TSC rate and where it came from, kernel) heads the table: where the instruments
# part depends on it.
#
# Usage: scripts/agreement.sh [SECONDS per run, default 4] [EXTRA FORWARDER FLAGS...]
# Environment: PREFETCH (depths, default "0 2 4 8"), CACHES (default "rtcache nocache
# nhcache"), FIBS (default "hash lctrie dir24").
# Needs a release build (cargo build --release) and perf sampling allowed.
set -eu
secs=${1:-4}
[ $# -gt 0 ] && shift
bin=${FWDSCOPE:-${CARGO_TARGET_DIR:-target}/release/fwdscope}
table=fixtures/tables/asn-ipv4-prefixes.txt.gz
out=$(mktemp -d /tmp/fwdscope-agreement.XXXXXX)
trap 'rm -rf "$out"' EXIT
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "# host: ${cpu:-unknown CPU}, $(nproc) CPUs, kernel $(uname -r); $secs s per run, 4000 Hz cpu-clock with callchains"
echo "# load before: $(cat /proc/loadavg)"
printf '%-8s %-7s %3s %-7s %7s %6s %5s %-8s %s\n' cache fib pf worst points other runq verdict "stage=sampled/clock %"
for cache in ${CACHES:-rtcache nocache nhcache}; do
  for fib in ${FIBS:-hash lctrie dir24}; do
    for pf in ${PREFETCH:-0 2 4 8}; do
      rec=$out/$cache-$fib-$pf
      "$bin" record -F 4000 -g -o "$rec" -- --duration "$secs" --cache "$cache" --fib "$fib" \
        --prefetch "$pf" --table "$table" --aggregates "$@" >/dev/null 2>&1
      "$bin" report --format json -i "$rec" > "$rec.json"
      python3 - "$cache" "$fib" "$pf" "$rec.json" <<'PY'
import json, sys
cache, fib, pf, path = sys.argv[1:5]
t = json.load(open(path))
c = t.get("clock_check")
if not c:
    print(f"{cache:8} {fib:7} {pf:>3} no stage clocks in the recording")
    sys.exit(0)
rows = [r for r in c["rows"] if r["points_apart"] is not None]
worst = max(rows, key=lambda r: abs(r["points_apart"]))
cells = " ".join(f"{r['stage']}={r['sampled_share']:.1f}/{r['clock_share']:.1f}" for r in rows)
runq = c["clocks"].get("runq_share") or 0
verdict = "UNSURE" if runq > 0.5 else ("AGREE" if all(abs(r["points_apart"]) <= 5 for r in rows) else "DISAGREE")
print(f"{cache:8} {fib:7} {pf:>3} {worst['stage']:7} {worst['points_apart']:+7.1f} {c['other_share']:5.1f}% "
      f"{100*runq:4.1f}% {verdict:8} {cells}")
PY
    done
  done
done
tsc=$(python3 -c "import json,sys; t=json.load(open(sys.argv[1])); c=t.get('clock_check') or {}; print(f\"{c.get('tsc_hz',0)/1e6:.3f} MHz ({c.get('tsc_source','?')})\")" "$rec.json")
echo "# TSC: $tsc"
echo "# load after: $(cat /proc/loadavg)"
