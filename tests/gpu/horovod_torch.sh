#!/usr/bin/env bash
# Horovod 0.28.1's own test/parallel/test_torch.py on tutti, on a GPU machine: each test in a fresh
# 2-rank job (tuttirun --bind-to none; both ranks share the machine's GPU when it has one), 8 jobs
# at a time, within 5 minutes. Needs gpu-bundle/horovod/ (scripts/gpu_bundle.sh with a Horovod git
# directory). Logs and a summary (passed, failed, skipped per test) go under $OUT/horovod. It runs
# on a machine without a GPU too (Horovod's CPU tests; its GPU tests skip there).
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu/bundle_env.sh
source tests/gpu/bundle_env.sh
out=$out/horovod
rm -rf "$out" && mkdir -p "$out"
tests_dir=$bundle/horovod/test/parallel
[[ -f $tests_dir/test_torch.py ]] || { echo "horovod_torch: no $tests_dir/test_torch.py (scripts/gpu_bundle.sh with HOROVOD_GIT)"; exit 2; }
export PYTHONPATH="$bundle/horovod/pkg:$PYTHONPATH"
export TUTTIRUN="$bundle/tuttirun" OUT_DIR=$out TESTS_DIR=$tests_dir
start=$SECONDS
# FILTER (an extended regex) picks some of the tests, for a quick look.
grep -oP '^    def \Ktest_\w+' "$tests_dir/test_torch.py" | grep -E "${FILTER:-.}" > "$out/tests.txt"
echo "== $(wc -l < "$out/tests.txt") tests, 8 jobs at a time ($(date -u))"
# One job: pytest's outcome for the test on each rank; the job's exit status.
run_one() {
  cd "$TESTS_DIR" || exit 1
  timeout --kill-after=5 100 "$TUTTIRUN" -np 2 --bind-to none python3 -m pytest -q -p no:cacheprovider \
    -rs "test_torch.py::TorchTests::$1" > "$OUT_DIR/$1.log" 2>&1
  local status=$?
  local outcome=failed
  if grep -q "1 passed" "$OUT_DIR/$1.log" && [[ $status == 0 ]]; then outcome=passed
  elif grep -q "1 skipped" "$OUT_DIR/$1.log" && [[ $status == 0 ]]; then outcome=skipped
  fi
  echo "$outcome $1 (exit $status)"
}
export -f run_one
timeout 290 xargs -P 8 -I{} bash -c 'run_one {}' < "$out/tests.txt" | tee "$out/results.txt"
sort -o "$out/results.txt" "$out/results.txt"
passed=$(grep -c '^passed' "$out/results.txt"); failed=$(grep -c '^failed' "$out/results.txt")
skipped=$(grep -c '^skipped' "$out/results.txt"); total=$(wc -l < "$out/tests.txt")
echo "== horovod test_torch.py: $passed passed, $failed failed, $skipped skipped of $total in $((SECONDS - start))s"
grep '^failed' "$out/results.txt"
[[ $((passed + failed + skipped)) == "$total" ]] || echo "== $((total - passed - failed - skipped)) did not finish within the 5 minutes"
