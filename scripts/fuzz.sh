#!/usr/bin/env bash
# Builds the libFuzzer targets over tuttid's frame decoding and coordinator logic (tests/fuzz/,
# docs/fuzzing-and-sanitizers.md), replays the committed regression inputs, then fuzzes each target
# for a bounded time from a fresh corpus seeded with real frames. Fails on any crash, sanitizer
# report, timeout or out-of-memory, and names the input that caused it.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 60)
#
# Environment: TUTTI_FUZZ_BUILD_DIR (default build-fuzz), JOBS (build parallelism, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
build=${TUTTI_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${JOBS:-$(nproc)}
targets=(fuzz_client_frame fuzz_coordinator_core)

if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTUTTI_FUZZ=ON -DTUTTI_BUILD_TESTS=OFF -DTUTTI_GPU=OFF
fi
# Only what fuzzing needs: the rest of the tree is built and tested by the other stages.
cmake --build "$build" -j "$jobs" --target "${targets[@]}" make_seeds

work="$build/fuzz"
rm -rf "$work"
mkdir -p "$work/seeds/fuzz_client_frame" "$work/seeds/fuzz_coordinator_core" "$work/artifacts"
"$build/tests/fuzz/make_seeds" "$work/seeds/fuzz_client_frame" "$work/seeds/fuzz_coordinator_core"

failed() {  # failed TARGET LOG
  echo "=== $1 FAILED; the end of its log ($2):"
  tail -n 60 "$2"
  for artifact in "$work"/artifacts/*; do
    [ -e "$artifact" ] || continue
    echo "=== input that failed: $artifact (base64 below); keep it as a regression:"
    echo "    cp $artifact tests/fuzz/regressions/${1#fuzz_}/<what-it-does>"
    base64 -w0 "$artifact"
    echo
  done
  exit 1
}

for target in "${targets[@]}"; do
  binary="$build/tests/fuzz/$target"
  log="$work/$target.log"
  options=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/artifacts/")
  # libFuzzer 14's entropic scheduling spends most of the time bookkeeping the coordinator's many
  # features (UpdateFeatureFrequency): without it, 4x the executions and more coverage per minute.
  if [ "$target" = fuzz_coordinator_core ]; then options+=(-entropic=0); fi

  # Inputs that once crashed a target: each runs once, first.
  shopt -s nullglob
  regressions=(tests/fuzz/regressions/"${target#fuzz_}"/*)
  shopt -u nullglob
  if [ ${#regressions[@]} -gt 0 ]; then
    echo "--- $target: replaying ${#regressions[@]} regression inputs"
    "$binary" "${options[@]}" "${regressions[@]}" >"$log" 2>&1 || failed "$target" "$log"
  fi

  echo "--- $target: fuzzing for ${seconds}s"
  mkdir -p "$work/corpus/$target"
  "$binary" "${options[@]}" -max_total_time="$seconds" -print_final_stats=1 \
    "$work/corpus/$target" "$work/seeds/$target" >"$log" 2>&1 || failed "$target" "$log"
  grep -E '^#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::new_units_added' "$log" || true
done
echo "fuzzing found nothing"
