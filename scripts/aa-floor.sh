#!/usr/bin/env bash
# The live comparison's noise floor for several block lengths and warm-up discards, measured
# the same way for each: A/A live comparisons (`sweep --live --aa`) of the same budget, the
# variants interleaved in rotating order within each round, so the host's slow changes fall
# on every variant alike.
#
#   scripts/aa-floor.sh [ROUNDS] [SECONDS] [BLOCK_MS:DISCARD_MS ...]
#
# ROUNDS (default 4), SECONDS per comparison (default 30), variants (default 50:10 40:5
# 50:20 100:10; a block must leave 30 ms after its discard). Prints each run's interval, then per variant the median half-width of the
# 95% interval (in % of the rate), the median number of units and the A/A false alarms
# (p < 0.01). nocache + dir24 on the real table with aggregates, the device inline. Needs a
# release build; nothing else should load the machine (the load average is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/quiet.sh
ROUNDS=${1:-4}
SECS=${2:-30}
shift $(($# < 2 ? $# : 2))
variants=("$@")
((${#variants[@]})) || variants=(50:10 40:5 50:20 100:10)
bin=${FWDSCOPE:-${CARGO_TARGET_DIR:-target}/release/fwdscope}
[[ -x $bin ]] || { echo "aa-floor: no fwdscope at $bin: cargo build --release, or set FWDSCOPE" >&2; exit 2; }
for v in "${variants[@]}"; do
  [[ $v =~ ^[0-9]+:[0-9]+$ ]] || { echo "aa-floor: a variant is BLOCK_MS:DISCARD_MS, got '$v'" >&2; exit 2; }
done
work=$(mktemp -d /tmp/fwdscope-aa.XXXXXX)
trap 'rm -rf "$work"' EXIT
wait_for_quiet
echo "# load before: $(cat /proc/loadavg)"
n=${#variants[@]}
for ((r = 0; r < ROUNDS; r++)); do
  for ((k = 0; k < n; k++)); do
    v=${variants[$(((r + k) % n))]}
    out=$work/$r-${v/:/-}
    "$bin" sweep --live --aa --block-ms "${v%:*}" --discard-ms "${v#*:}" --duration "$SECS" -o "$out" --force -- \
      --cache nocache --fib dir24 --table fixtures/tables/asn-ipv4-prefixes.txt.gz --aggregates >/dev/null 2>&1 ||
      { echo "aa-floor: the $v run failed (its log: $out/forwarder.log)" >&2; exit 1; }
    python3 - "$out/live.json" "$v" <<'PY' | tee -a "$work/runs"
import json, sys
r = json.load(open(sys.argv[1])); e = r["results"][1]["effect"]
half = 100 * ((e["ci"][1] / e["ci"][0]) ** 0.5 - 1)
print(f"{sys.argv[2]} {half:.3f} {e['units']} {e['p']:.3g} {e['ratio']:.4f} {e['ci'][0]:.4f} {e['ci'][1]:.4f}")
PY
  done
done
echo "# load after: $(cat /proc/loadavg)"
python3 - "$work/runs" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    v, half, units, p, *_ = line.split()
    by.setdefault(v, []).append((float(half), int(units), float(p)))
print(f"{'block:discard ms':<18} {'runs':>4} {'median half-width %':>20} {'min':>6} {'max':>6} {'units':>6} {'false alarms':>13}")
for v, xs in by.items():
    h = [x[0] for x in xs]
    print(f"{v:<18} {len(xs):>4} {statistics.median(h):>20.3f} {min(h):>6.2f} {max(h):>6.2f} "
          f"{statistics.median(x[1] for x in xs):>6.0f} {sum(x[2] < 0.01 for x in xs):>13}")
PY
