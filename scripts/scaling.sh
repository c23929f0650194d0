#!/usr/bin/env bash
# How two workers scale against one, and against the machine's own ceiling: two independent
# single-worker forwarder processes side by side, one per CPU, share nothing but the machine
# (no segment, no table, no counters), so what they reach together is what two cores of
# this host give; what one process with two workers loses beyond that is the forwarder's.
#
#   scripts/scaling.sh [ROUNDS] [SECONDS]
#
# ROUNDS (default 8) rounds of three runs, their order rotating each round:
#   one   one process, --workers 1 (pinned to CPU 0)
#   two   one process, --workers 2 (pinned to CPUs 0 and 1)
#   pair  two processes at once, each --workers 1 --no-pin under taskset -c 0 and -c 1;
#         their rates summed
# All: nocache + dir24 (CACHE and FIB override), the real table with aggregates, 64 B,
# 32768 flows x 10, random destinations, prefetch 2, the synthetic device inline (each
# worker makes its own packets: no sender to outrun), SECONDS (default 3) each. A rate is
# the forwarder's own end-of-run "total: X Mpps". Ratios are geometric means of the rounds'
# ratios with 95% t intervals; the load average and the hypervisor's steal are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/quiet.sh
ROUNDS=${1:-8}
SECS=${2:-3}
CACHE=${CACHE:-nocache}
FIB=${FIB:-dir24}
bin=${FWDSCOPE:-${CARGO_TARGET_DIR:-target}/release/fwdscope}
[[ -x $bin ]] || { echo "scaling: no fwdscope at $bin: cargo build --release, or set FWDSCOPE" >&2; exit 2; }
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 2 ]] || { echo "scaling: ROUNDS must be a whole number >= 2, got '$ROUNDS'" >&2; exit 2; }
[[ $(nproc) -ge 2 ]] || { echo "scaling: needs 2 CPUs, this host has $(nproc)" >&2; exit 2; }
work=$(mktemp -d /tmp/fwdscope-scaling.XXXXXX)
trap 'rm -rf "$work"' EXIT
flags=(--cache "$CACHE" --fib "$FIB" --table fixtures/tables/asn-ipv4-prefixes.txt.gz --aggregates --prefetch 2
  --device inline --duration "$SECS" -i 3600)
rate() { sed -n 's/^ *total: \([0-9.]*\) Mpps.*/\1/p' "$1" | tail -1; }
run() { # kind -> Mpps
  case $1 in
    one) "$bin" forward --workers 1 "${flags[@]}" >"$work/a" 2>&1; rate "$work/a" ;;
    two) "$bin" forward --workers 2 "${flags[@]}" >"$work/a" 2>&1; rate "$work/a" ;;
    pair)
      taskset -c 0 "$bin" forward --workers 1 --no-pin "${flags[@]}" >"$work/a" 2>&1 &
      taskset -c 1 "$bin" forward --workers 1 --no-pin "${flags[@]}" >"$work/b" 2>&1
      wait
      python3 -c "import sys; print(float(sys.argv[1]) + float(sys.argv[2]))" "$(rate "$work/a")" "$(rate "$work/b")"
      ;;
  esac
}
wait_for_quiet
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
stat_before=$(grep '^cpu ' /proc/stat)
kinds=(one two pair)
: >"$work/runs.tsv"
for ((r = 0; r < ROUNDS; r++)); do
  for ((k = 0; k < 3; k++)); do
    kind=${kinds[$(((r + k) % 3))]}
    mpps=$(run "$kind")
    [[ -n $mpps ]] || { echo "scaling: no 'total: X Mpps' from the $kind run:" >&2; cat "$work/a" >&2; exit 1; }
    printf '%s\t%s\t%s\n' "$r" "$kind" "$mpps" >>"$work/runs.tsv"
  done
  echo "round $((r + 1)) of $ROUNDS done" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
stat_after=$(grep '^cpu ' /proc/stat)
SCRIPTS=$PWD/scripts python3 - "$work/runs.tsv" "$load_before" "$load_after" "$stat_before" "$stat_after" "$CACHE+$FIB" "$SECS" <<'EOF'
import os, statistics, sys
sys.path.insert(0, os.environ["SCRIPTS"])
from ratio_ci import log_ratio_ci
path, lb, la, sb, sa, cfg, secs = sys.argv[1:]
tb, ta = [list(map(int, x.split()[1:9])) for x in (sb, sa)]
steal = 100.0 * (ta[7] - tb[7]) / max(sum(ta) - sum(tb), 1)
rounds = {}
for line in open(path):
    r, kind, mpps = line.split()
    rounds.setdefault(int(r), {})[kind] = float(mpps)
print(f"{cfg}, device inline, {secs} s per run, {len(rounds)} rounds; load average before {lb}, after {la}; "
      f"the hypervisor stole {steal:.1f}% of the CPU time")
for kind, what in [("one", "1 worker"), ("two", "2 workers, one process"), ("pair", "2 processes x 1 worker, summed")]:
    v = [x[kind] for x in rounds.values()]
    print(f"  {what:<32} median {statistics.median(v):6.2f} Mpps  (min {min(v):.2f}, max {max(v):.2f})")
for a, b, what in [("two", "one", "2 workers / 1 worker (the scaling)"),
                   ("pair", "one", "2 processes / 1 worker (the machine's ceiling)"),
                   ("two", "pair", "2 workers / 2 processes (the forwarder's own loss)")]:
    ratio, lo, hi, n = log_ratio_ci([(x[a], x[b]) for x in rounds.values()])
    print(f"  {what:<52} {ratio:6.3f}  [{lo:.3f}, {hi:.3f}]")
EOF
