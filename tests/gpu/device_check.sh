#!/usr/bin/env bash
# Every GPU check, on a machine with a GPU, in at most 5 minutes (docs/gpu.md). Prepare here with
#   cmake --build build && scripts/gpu_bundle.sh build
# then run on the GPU machine from the repository root, carrying gpu-bundle/:
#   bash tests/gpu/device_check.sh        (logs under $OUT, an absolute or relative path; ./gpu-out)
# Steps, each capped, in order:
#   1. the batched copy kernel against cudaMemcpy (bench/gpu_copy_bench);
#   2. tests/gpu (NCCL with one rank, ranks sharing the GPU through staging, stream order, device
#      results, the timeline) and the conformance suite against libtutti_cuda.so (the suite the
#      simulator passes in CI: tests/gpu_conformance);
#   3. every Python CUDA check (tests/python/test_cuda.py): one tutti.torch job on 1 rank (NCCL)
#      and one on 2 ranks sharing the GPU (staged);
#   4. tutti.jax on GPU arrays (tests/frameworks/test_jax_gpu.py): 1 rank and 2 sharing the GPU,
#      eagerly (DLPack) and inside jit, with the time of a 64 MiB allreduce both ways
#      ($OUT/jax_gpu_times.txt);
#   5. bench/gpu_allreduce.py: tutti beside torch.distributed/Gloo on 2 ranks sharing the GPU.
# Each step gets at most its limit and what is left of the 5 minutes.
# A failed step fails the check; the summary at the end says which.
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tests/gpu/bundle_env.sh
source tests/gpu/bundle_env.sh
mkdir -p "$out"
export TUTTI_GPU_ARTIFACTS="$out"

statuses=$out/statuses
rm -rf "$statuses" && mkdir -p "$statuses"
# step NAME LIMIT_SECONDS COMMAND...: runs and times one step; its status goes to $statuses/NAME.
budget=300
step() {
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  ((limit > budget - SECONDS)) && limit=$((budget - SECONDS))
  if ((limit <= 0)); then
    echo "== $name: not run, the 5 minutes are spent"
    echo "not-run" > "$statuses/$name"
    return
  fi
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=5 "$limit" "$@"
  local status=$?
  echo "== $name: exit $status after $((SECONDS - start))s"
  echo "$status" > "$statuses/$name"
}

{
  echo "== $(date -u) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  echo "NCCL from: ${TUTTI_NCCL_DIR:-not found}"
  step copy_bench 45 "$bundle/bench/gpu_copy_bench"
  step gpu_tests 90 env TUTTID="$bundle/tuttid" "$bundle/tests/gpu_tests" --gtest_color=no \
    --gtest_output=xml:"$out/gpu_tests.xml"
  step conformance 45 env TUTTI_CONFORMANCE_MODULE="$bundle/libtutti_cuda.so" \
    "$bundle/tests/gpu_conformance_tests" --gtest_color=no --gtest_output=xml:"$out/conformance.xml"
  step python_cuda 120 env TUTTI_BUILD_DIR="$bundle" python3 -m pytest -q -p no:cacheprovider \
    --junitxml="$out/python_cuda.xml" tests/python/test_cuda.py
  step jax_gpu 90 env TUTTI_BUILD_DIR="$bundle" python3 -m pytest -q -p no:cacheprovider \
    --junitxml="$out/jax_gpu.xml" tests/frameworks/test_jax_gpu.py
  cat "$out/jax_gpu_times.txt" 2>/dev/null
  step gloo_bench 60 "$bundle/tuttirun" -np 2 --bind-to none python3 bench/gpu_allreduce.py
} 2>&1 | tee "$out/device_check.log"

failed=()
for name in copy_bench gpu_tests conformance python_cuda jax_gpu gloo_bench; do
  status=$(cat "$statuses/$name" 2>/dev/null || echo missing)
  [[ $status == 0 ]] || failed+=("$name (exit $status)")
done
if ((${#failed[@]})); then
  echo "device_check: FAILED: ${failed[*]}" | tee -a "$out/device_check.log"
  exit 1
fi
echo "device_check: passed" | tee -a "$out/device_check.log"
