#!/bin/sh
# Do the two instruments agree? For every cache mode x FIB engine on the real table, one
# worker: record the forwarder (sampling with callchains, stage clocks on), then print per
# stage the sampled and clocked share of the forwarding work, the points apart, and the
# share of the workers' samples no stage claimed (`other`).
#
# Usage: scripts/agreement.sh [SECONDS per run, default 4] [EXTRA FORWARDER FLAGS...]
# Needs a release build (cargo build --release) and perf sampling allowed.
set -eu
secs=${1:-4}
[ $# -gt 0 ] && shift
bin=${FWDSCOPE:-${CARGO_TARGET_DIR:-target}/release/fwdscope}
table=fixtures/tables/asn-ipv4-prefixes.txt.gz
out=$(mktemp -d /tmp/fwdscope-agreement.XXXXXX)
echo "# load before: $(cat /proc/loadavg)"
for cache in rtcache nocache nhcache; do
  for fib in hash lctrie dir24; do
    rec=$out/$cache-$fib
    "$bin" record -F 4000 -g -o "$rec" -- --duration "$secs" --cache "$cache" --fib "$fib" \
      --table "$table" --aggregates "$@" >/dev/null 2>&1
    "$bin" report --format json -i "$rec" > "$rec.json"
    python3 - "$cache" "$fib" "$rec.json" <<'PY'
import json, sys
cache, fib, path = sys.argv[1:4]
t = json.load(open(path))
c = t.get("clock_check")
if not c:
    print(f"{cache:8} {fib:7} no stage clocks in the recording")
    sys.exit(0)
rows = [r for r in c["rows"] if r["points_apart"] is not None]
worst = max(rows, key=lambda r: abs(r["points_apart"]))
cells = " ".join(f"{r['stage']}={r['sampled_share']:.1f}/{r['clock_share']:.1f}" for r in rows)
print(f"{cache:8} {fib:7} worst {worst['stage']:7} {worst['points_apart']:+5.1f} pts  other {c['other_share']:4.1f}%  "
      f"runq {100*(c['clocks'].get('runq_share') or 0):4.1f}%  {'AGREE' if all(abs(r['points_apart'])<=5 for r in rows) else 'DISAGREE'}  [{cells}]")
PY
  done
done
echo "# load after: $(cat /proc/loadavg)"
rm -rf "$out"
