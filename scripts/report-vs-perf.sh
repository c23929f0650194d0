#!/usr/bin/env bash
# `fwdscope report` against `perf report --stdio --sort sym -g none` on the same system-wide
# perf.data with callchains: wall time and peak resident memory of each, in interleaved
# rounds, with the medians' ratios.
#
#   scripts/report-vs-perf.sh [SECONDS] [ROUNDS]
#   PERF_DATA=FILE scripts/report-vs-perf.sh 0 [ROUNDS]     # an existing file instead
#
# SECONDS (default 25, about 2M samples on a 2-CPU host): how long to record
# `perf record -a -g -e cpu-clock -c 20000` (every CPU every 20 us) while the bundled
# forwarder (rtcache + lctrie on the real table: deep user stacks) and dd (kernel stacks)
# keep both CPUs busy. 10M samples take about 120 s. ROUNDS (default 3): each round runs
# both readers once, the order alternating. Time and memory are GNU time's wall clock and
# maximum resident set size. Needs root (or perf_event_paranoid <= -1), perf, GNU time
# and a release build; nothing else should load the machine: the load average is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/quiet.sh
SECS=${1:-25}
ROUNDS=${2:-3}
bin=${FWDSCOPE:-${CARGO_TARGET_DIR:-target}/release/fwdscope}
[[ -x $bin ]] || { echo "report-vs-perf: no fwdscope at $bin: cargo build --release, or set FWDSCOPE" >&2; exit 2; }
command -v perf >/dev/null || { echo "report-vs-perf: perf is not installed" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "report-vs-perf: GNU time (/usr/bin/time) is not installed" >&2; exit 2; }
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 1 ]] || { echo "report-vs-perf: ROUNDS must be a whole number >= 1" >&2; exit 2; }

work=$(mktemp -d /tmp/fwdscope-report-vs-perf.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [[ -n ${PERF_DATA:-} ]]; then
  file=$PERF_DATA
else
  file=$work/perf.data
  echo "recording $SECS s system-wide with callchains" >&2
  perf record -q -a -g -e cpu-clock -c 20000 -o "$file" -- sh -c "
    '$bin' forward --cache rtcache --fib lctrie --table fixtures/tables/asn-ipv4-prefixes.txt.gz \
      --duration $SECS -i 3600 >/dev/null &
    timeout $SECS dd if=/dev/zero of=/dev/null bs=64 2>/dev/null
    wait" >/dev/null 2>&1
fi
samples=$("$bin" report -i "$file" 2>/dev/null | sed -n 's/^# event: .*(\([0-9]*\) samples)$/\1/p')
echo "# $file: $(du -h "$file" | cut -f1), $samples samples"
# Let the recording's load settle.
wait_for_quiet
echo "# load before: $(cat /proc/loadavg)"
ours() { /usr/bin/time -f "%e %M" -o "$work/t" "$bin" report -i "$file" >/dev/null 2>&1; echo "ours $(cat "$work/t")"; }
theirs() {
  /usr/bin/time -f "%e %M" -o "$work/t" perf report -i "$file" --stdio --sort sym -g none >/dev/null 2>&1
  echo "perf $(cat "$work/t")"
}
for ((r = 0; r < ROUNDS; r++)); do
  if ((r % 2 == 0)); then ours; theirs; else theirs; ours; fi
done | tee "$work/runs"
echo "# load after: $(cat /proc/loadavg)"
python3 - "$work/runs" <<'PY'
import statistics, sys
runs = {"ours": [], "perf": []}
for line in open(sys.argv[1]):
    who, secs, kb = line.split()
    runs[who].append((float(secs), int(kb)))
med = {k: (statistics.median(s for s, _ in v), statistics.median(m for _, m in v)) for k, v in runs.items()}
(ot, om), (pt, pm) = med["ours"], med["perf"]
print(f"median: fwdscope report {ot:.2f} s {om / 1024:.0f} MB; perf report {pt:.2f} s {pm / 1024:.0f} MB")
print(f"fwdscope is {pt / ot:.1f}x faster and uses {om / pm:.2f}x perf's memory (goal: 10x faster, at most 0.5x)")
PY
