#!/usr/bin/env bash
# Coverage-guided fuzzing on a stable toolchain: the same sanitizer-coverage flags
# cargo-fuzz passes, set by hand (cargo fuzz itself needs nightly).
# Usage: fuzz-stable.sh FUZZ_CRATE_DIR [SECONDS per target, default 60] [TARGET ...]
#   (targets default to every [[bin]] of the fuzz crate)
set -euo pipefail
dir="$(cd "$1" && pwd)"
shift
secs="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' "$dir/Cargo.toml" | tail -n +2)
triple="$(rustc -vV | sed -n 's/^host: //p')"
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/fwdscope-fuzz-target}"
RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks" \
  cargo build --release --target "$triple" --manifest-path "$dir/Cargo.toml"
for t in "${targets[@]}"; do
  # Seeds replayed alone first: a regression on a known input always fails.
  if [ -d "$dir/seeds/$t" ] && ! "$CARGO_TARGET_DIR/$triple/release/$t" -runs=0 "$dir/seeds/$t" >"$CARGO_TARGET_DIR/seeds-$t.log" 2>&1; then
    tail -40 "$CARGO_TARGET_DIR/seeds-$t.log" >&2
    echo "fuzz target $t fails on a seed input in $dir/seeds/$t" >&2
    exit 1
  fi
  corpus="$CARGO_TARGET_DIR/corpus/$t"
  mkdir -p "$corpus"
  # Seed inputs shipped with the fuzz crate (real files of the format).
  [ -d "$dir/seeds/$t" ] && cp -n "$dir/seeds/$t"/* "$corpus"/ 2>/dev/null || true
  echo "fuzzing $t for ${secs}s (corpus $corpus)"
  log="$CARGO_TARGET_DIR/fuzz-$t.log"
  if ! "$CARGO_TARGET_DIR/$triple/release/$t" -max_total_time="$secs" -max_len="${FUZZ_MAX_LEN:-65536}" -print_final_stats=1 \
      -artifact_prefix="$CARGO_TARGET_DIR/artifacts-$t-" "$corpus" >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz target $t found a failing input (artifacts under $CARGO_TARGET_DIR)" >&2
    # FUZZ_ADVISORY=1: report new findings loudly but do not fail (exploration is not
    # deterministic; the seeds, replayed first, are).
    if [ "${FUZZ_ADVISORY:-0}" = 1 ]; then
      echo "FUZZ FINDING (advisory): $t: see $log" >&2
      continue
    fi
    exit 1
  fi
  grep -E 'stat::number_of_executed_units|stat::new_units_added' "$log"
done
