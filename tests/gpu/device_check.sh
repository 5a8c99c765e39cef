#!/usr/bin/env bash
# The GPU checks, on a machine with a GPU, in under 5 minutes (docs/gpu.md). Prepare here with
#   cmake --build build && scripts/gpu_bundle.sh build
# then run on the GPU machine from the repository root, carrying gpu-bundle/:
#   bash tests/gpu/device_check.sh            (results and the timeline go to $OUT or ./gpu-out)
# It runs: the batched copy kernel against cudaMemcpy (bench/gpu_copy_bench), then every test of
# tests/gpu (fused allreduce of every dtype and op through NCCL with one rank, two ranks sharing
# the GPU through host staging, producer-stream order and stream waits, device results, the
# timeline of one fused step).
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=${BUNDLE:-gpu-bundle}
out=${OUT:-gpu-out}
mkdir -p "$out"
[[ -d $bundle ]] || { echo "device_check: no $bundle/ (run scripts/gpu_bundle.sh where it builds)"; exit 2; }

# NCCL: the machine's own (PyTorch's wheel ships one), unless the bundle carries it.
nccl_dir=$(python3 - <<'PY' 2>/dev/null
import glob, os
for pattern in ("nvidia/nccl/lib/libnccl.so.2", "torch/lib/libnccl*.so*"):
    import site
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        hits = glob.glob(os.path.join(base, pattern))
        if hits:
            print(os.path.dirname(hits[0])); raise SystemExit
PY
)
export LD_LIBRARY_PATH="$PWD/$bundle/lib${nccl_dir:+:$nccl_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TUTTI_GPU_MODULE="$PWD/$bundle/lib/libtutti_cuda.so"
export TUTTI_GPU_ARTIFACTS="$PWD/$out"
export PATH="$PWD/$bundle/bin:$PATH"
# The group below runs in a subshell (it feeds tee): its steps leave their exit statuses here.
statuses=$(mktemp -d)
trap 'rm -rf "$statuses"' EXIT
{
  echo "== $(date -u) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  echo "NCCL from: ${nccl_dir:-not found}"
  echo "== bench: batched copy kernel vs cudaMemcpy"
  timeout 120 "$bundle/bin/gpu_copy_bench"
  echo $? > "$statuses/bench"
  echo "== tests/gpu"
  # gpu_tests starts tuttid from its build path; point it at the bundled one.
  timeout 240 env TUTTID=$bundle/bin/tuttid "$bundle/bin/gpu_tests" --gtest_color=no \
    --gtest_output=xml:"$out/gpu_tests.xml"
  tests=$?
  echo "== exit $tests"
  echo $tests > "$statuses/tests"
} 2>&1 | tee "$out/device_check.log"
# A failed benchmark or GPU test fails the check: the log alone would hide it.
bench=$(cat "$statuses/bench" 2>/dev/null || echo missing)
tests=$(cat "$statuses/tests" 2>/dev/null || echo missing)
if [[ $bench != 0 || $tests != 0 ]]; then
  echo "device_check: FAILED (gpu_copy_bench exit $bench, gpu_tests exit $tests)" | tee -a "$out/device_check.log"
  exit 1
fi
echo "device_check: passed" | tee -a "$out/device_check.log"
