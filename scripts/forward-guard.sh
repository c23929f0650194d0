#!/usr/bin/env bash
# The forwarder's regression guard: this checkout's forwarder against a baseline commit's,
# both built here (release, `fwdscope-forwarder` only: no polars), run in interleaved rounds
# on the same configurations, and compared as ratios with 95% intervals.
#
#   scripts/forward-guard.sh [BASELINE] [ROUNDS] [SECONDS]
#
# BASELINE: a commit (default d23a6c0, the last one before the stage clocks were always on);
# ROUNDS: rounds of every configuration (default 6); SECONDS: per run (default 3).
# Configurations: nocache + dir24 and rtcache + lctrie, on the real table in fixtures/ with
# aggregates, 64 B, 32768 flows x 10, random destinations, prefetch 2; the synthetic device
# inline (1 and 2 workers) and on its own thread (1 worker: with 2 workers the device thread
# would share a core on a 2-CPU host). Within a round the two builds run back to back in
# alternating order (A B in even rounds, B A in odd ones), so drift and warm-up fall on both.
# A run's rate is the forwarder's own end-of-run "total: X Mpps" (tx packets over its
# forwarding time, CLOCK_MONOTONIC). The ratio per configuration is the geometric mean of the
# per-round ratios, with a t interval on their logs. The load average before and after is
# printed, and the share of the host's CPU time the hypervisor stole during the rounds: a
# figure taken on a loaded machine is worth nothing. Before the rounds the guard waits (up
# to two minutes) for the 1-minute load average to fall under 0.5, and says if it did not.
# Every run's figure is kept in $TARGET/last-runs.tsv (round, configuration, build, Mpps).
#
# Builds go to $GUARD_TARGET (default $HOME/.cache/fwdscope-target-guard), one directory per
# side, so a second run reuses them.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/quiet.sh
BASE=${1:-d23a6c0}
ROUNDS=${2:-6}
SECS=${3:-3}
TARGET=${GUARD_TARGET:-$HOME/.cache/fwdscope-target-guard}
TABLE=$PWD/fixtures/tables/asn-ipv4-prefixes.txt.gz
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 2 ]] || { echo "forward-guard: ROUNDS must be a whole number >= 2, got '$ROUNDS'" >&2; exit 2; }
[[ $SECS =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "forward-guard: SECONDS must be a number, got '$SECS'" >&2; exit 2; }
base_rev=$(git rev-parse --verify --quiet "$BASE^{commit}") || { echo "forward-guard: '$BASE' is not a commit here" >&2; exit 2; }
head_rev=$(git rev-parse HEAD)
dirty=$(git status --porcelain --untracked-files=no | head -1)

work=$(mktemp -d /tmp/fwdscope-guard.XXXXXX)
trap 'git worktree remove --force "$work/base-src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

echo "building this checkout (${head_rev:0:12}${dirty:+, with uncommitted changes}) and the baseline (${base_rev:0:12})" >&2
CARGO_TARGET_DIR=$TARGET/head cargo build -q --release -p forwarder-under-test --bin fwdscope-forwarder
cp "$TARGET/head/release/fwdscope-forwarder" "$work/head"
git worktree add -q --detach "$work/base-src" "$base_rev"
(cd "$work/base-src" && CARGO_TARGET_DIR=$TARGET/base cargo build -q --release -p forwarder-under-test --bin fwdscope-forwarder)
cp "$TARGET/base/release/fwdscope-forwarder" "$work/base"

configs=(
  "nocache dir24 inline 1"
  "nocache dir24 thread 1"
  "rtcache lctrie inline 1"
  "rtcache lctrie thread 1"
  "nocache dir24 inline 2"
  "rtcache lctrie inline 2"
)
# Let the builds' load settle first.
wait_for_quiet
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
stat_before=$(grep '^cpu ' /proc/stat)
: > "$work/runs.tsv"
run() { # build cache fib device workers
  local out
  out=$("$work/$1" --cache "$2" --fib "$3" --device "$4" --workers "$5" --prefetch 2 \
    --table "$TABLE" --aggregates --duration "$SECS" 2>&1) || { echo "forward-guard: $1 failed on $2 $3 $4 $5:" >&2; echo "$out" >&2; exit 1; }
  echo "$out" | sed -n 's/^ *total: \([0-9.]*\) Mpps.*/\1/p' | tail -1
}
for ((r = 0; r < ROUNDS; r++)); do
  for c in "${configs[@]}"; do
    if ((r % 2 == 0)); then order="head base"; else order="base head"; fi
    for b in $order; do
      # shellcheck disable=SC2086
      mpps=$(run "$b" $c)
      [[ -n $mpps ]] || { echo "forward-guard: no 'total: X Mpps' line from $b on $c" >&2; exit 1; }
      printf '%s\t%s\t%s\t%s\n' "$r" "$c" "$b" "$mpps" >> "$work/runs.tsv"
    done
  done
  echo "round $((r + 1)) of $ROUNDS done" >&2
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
stat_after=$(grep '^cpu ' /proc/stat)
cp "$work/runs.tsv" "$TARGET/last-runs.tsv"

SCRIPTS=$PWD/scripts python3 - "$work/runs.tsv" "$head_rev" "$base_rev" "$dirty" "$load_before" "$load_after" "$SECS" "$stat_before" "$stat_after" <<'EOF'
import math, os, platform, statistics, sys
sys.path.insert(0, os.environ["SCRIPTS"])
from ratio_ci import log_ratio_ci
path, head, base, dirty, lb, la, secs, sb, sa = sys.argv[1:]
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal ...
tb, ta = [list(map(int, x.split()[1:9])) for x in (sb, sa)]
total = sum(ta) - sum(tb)
steal = 100.0 * (ta[7] - tb[7]) / max(total, 1)
runs = {}
for line in open(path):
    r, cfg, b, mpps = line.rstrip("\n").split("\t")
    runs.setdefault(cfg, {}).setdefault(int(r), {})[b] = float(mpps)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(f"host: {platform.node()}, {os.cpu_count()} CPUs ({cpu}), kernel {platform.release()}")
print(f"load average before {lb}, after {la} (the guard's own forwarder adds about 1-2); "
      f"the hypervisor stole {steal:.1f}% of the host's CPU time during the rounds")
print(f"this checkout {head[:12]}{' + uncommitted changes' if dirty else ''} against baseline {base[:12]}; {secs} s per run")
print(f"{'configuration':<28} {'rounds':>6} {'head Mpps':>10} {'base Mpps':>10} {'ratio':>7}  {'95% interval':>16}")
for cfg, rounds in runs.items():
    pairs = [(v["head"], v["base"]) for v in rounds.values() if "head" in v and "base" in v and v["head"] > 0 and v["base"] > 0]
    ratio, lo, hi, n = log_ratio_ci(pairs)
    c, f, dev, w = cfg.split()
    name = f"{c}+{f} device {dev} x{w}"
    print(f"{name:<28} {n:>6} {statistics.median(p[0] for p in pairs):>10.2f} {statistics.median(p[1] for p in pairs):>10.2f} "
          f"{ratio:>7.3f}  [{lo:.3f}, {hi:.3f}]")
print("ratio: this checkout's rate over the baseline's, geometric mean of the rounds' ratios; above 1 is faster")
EOF
