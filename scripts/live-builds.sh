#!/usr/bin/env bash
# Decide a code change of the forwarder live: two builds of `fwdscope-forwarder` (a baseline
# commit's and a candidate's) compared by `fwdscope sweep --live --program`: one process
# each, only the one measured running, in ABBA/BAAB blocks of 50 ms for SECONDS (default 30),
# the first 10 ms after each switch discarded. Prints the comparison's table: the candidate's
# rate against the baseline's with a 95% interval, the p value and the verdict.
#
#   scripts/live-builds.sh BASELINE [CANDIDATE] [SECONDS] [-- FORWARDER FLAGS]
#
# BASELINE, CANDIDATE: commits; CANDIDATE `.` (the default) is this checkout as it is, with
# uncommitted changes. The forwarder runs nocache + dir24 on the real table in fixtures/ with
# aggregates, 64 B, 32768 flows x 10, random destinations, prefetch 2, one worker, the
# synthetic device inline; flags after `--` are added (a later flag wins). The builds go to
# $GUARD_TARGET (default $HOME/.cache/fwdscope-target-guard), one directory per side; the
# `fwdscope` that runs the comparison is this checkout's, built in $CARGO_TARGET_DIR
# (default $HOME/.cache/fwdscope-target). The script waits for a quiet machine first (see
# quiet.sh) and prints the load average before and after, and the share of the host's CPU
# time the hypervisor stole during the comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/quiet.sh
BASE=${1:?usage: scripts/live-builds.sh BASELINE [CANDIDATE] [SECONDS] [-- FLAGS]}
shift
CAND=.
SECS=30
if [[ $# -gt 0 && $1 != -- ]]; then CAND=$1; shift; fi
if [[ $# -gt 0 && $1 != -- ]]; then SECS=$1; shift; fi
[[ $# -gt 0 && $1 == -- ]] && shift
[[ $SECS =~ ^[0-9]+$ && $SECS -ge 2 ]] || { echo "live-builds: SECONDS must be a whole number >= 2, got '$SECS'" >&2; exit 2; }
TARGET=${GUARD_TARGET:-$HOME/.cache/fwdscope-target-guard}
MAIN_TARGET=${CARGO_TARGET_DIR:-$HOME/.cache/fwdscope-target}
TABLE=$PWD/fixtures/tables/asn-ipv4-prefixes.txt.gz
base_rev=$(git rev-parse --verify --quiet "$BASE^{commit}") || { echo "live-builds: '$BASE' is not a commit here" >&2; exit 2; }
work=$(mktemp -d /tmp/fwdscope-live-builds.XXXXXX)
trap 'git worktree remove --force "$work/base-src" >/dev/null 2>&1 || true; git worktree remove --force "$work/cand-src" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

build() { # side rev-or-dot
  local src=$PWD
  if [[ $2 != . ]]; then
    git worktree add -q --detach "$work/$1-src" "$2"
    src=$work/$1-src
  fi
  (cd "$src" && CARGO_TARGET_DIR=$TARGET/$1 cargo build -q --release -p forwarder-under-test --bin fwdscope-forwarder)
  cp "$TARGET/$1/release/fwdscope-forwarder" "$work/$1"
}
if [[ $CAND == . ]]; then
  cand_name="this checkout ($(git rev-parse --short HEAD)$(git status --porcelain --untracked-files=no | head -1 | sed 's/.\+/ + uncommitted changes/'))"
else
  cand_rev=$(git rev-parse --verify --quiet "$CAND^{commit}") || { echo "live-builds: '$CAND' is not a commit here" >&2; exit 2; }
  CAND=$cand_rev
  cand_name=${cand_rev:0:12}
fi
echo "building the baseline (${base_rev:0:12}) and the candidate ($cand_name)" >&2
build base "$base_rev"
build cand "$CAND"
CARGO_TARGET_DIR=$MAIN_TARGET cargo build -q --release --bin fwdscope
wait_for_quiet
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
read -r s0 t0 < <(steal)
"$MAIN_TARGET/release/fwdscope" sweep --live -o "$work/live" --duration "$SECS" \
  --program "base=$work/base" --program "candidate=$work/cand" -- \
  --cache nocache --fib dir24 --prefetch 2 --table "$TABLE" --aggregates "$@"
read -r s1 t1 < <(steal)
echo "baseline ${base_rev:0:12}, candidate $cand_name"
echo "load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg) (the comparison's own forwarder adds about 1); the hypervisor stole $(awk -v s="$((s1 - s0))" -v t="$((t1 - t0))" 'BEGIN{printf("%.1f", (t > 0 ? 100 * s / t : 0))}')% of the host's CPU time"
