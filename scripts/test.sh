#!/usr/bin/env bash
# Sets up a fresh Debian machine and runs every test: the release build's full suite, then the
# AddressSanitizer + UndefinedBehaviorSanitizer build's suite. Each stage is timed and capped.
set -euo pipefail
cd "$(dirname "$0")/.."

JOBS=${JOBS:-$(nproc)}
# ccache keyed on paths relative to the checkout, so that a clone in another folder (as CI makes)
# reuses what an earlier build of the same sources compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
stage() {  # stage NAME LIMIT_SECONDS COMMAND...
  local name=$1 limit=$2 start=$SECONDS
  shift 2
  echo "=== $name (limit ${limit}s)"
  if ! timeout --kill-after=10 "$limit" "$@"; then
    echo "=== $name FAILED after $((SECONDS - start))s"
    exit 1
  fi
  echo "=== $name took $((SECONDS - start))s"
}

stage setup 900 bash scripts/setup.sh
# The frameworks Debian lacks (PySpark and Ray; JAX; TensorFlow; MXNet) install from PyPI, pinned, into their own
# virtual environments in the background while C++ builds; the test stages start once they are done.
mkdir -p build
for venv in engines jax tensorflow mxnet; do
  timeout --kill-after=10 900 bash scripts/setup_venv.sh $venv > build/setup_$venv.log 2>&1 &
  eval "setup_$venv=\$!"
done
# Waits for the environment NAME's setup, says how long that took beyond the builds, fails the run
# if it failed.
await_venv() {
  local name=$1 waited=$SECONDS pid_var="setup_$1"
  echo "=== setup $name environment (ran beside the builds)"
  if ! wait "${!pid_var}"; then
    cat "build/setup_$name.log"
    echo "=== setup $name environment FAILED"
    exit 1
  fi
  cat "build/setup_$name.log"
  echo "=== setup $name environment: waited $((SECONDS - waited))s"
}
# The release build carries the GPU module (sm_90 + PTX; docs/gpu.md) wherever the CUDA toolkit
# is installed, as on these machines; its GPU tests skip with "no CUDA device" without a GPU. The
# sanitizer, tsan and fuzz builds are the CPU-only configuration (TUTTI_GPU=OFF).
if [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc >/dev/null; then
  gpu=ON
else
  gpu=OFF
  echo "=== NOTE: no CUDA toolkit on this machine: the GPU module is NOT built"
fi
stage "configure release" 120 cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTUTTI_GPU=$gpu
stage "build release" 1200 cmake --build build -j "$JOBS"
# The C ABI against the committed baseline (docs/abi-policy.md): any difference fails.
stage "abi check" 300 bash scripts/abi_check.sh build/libtutti.so
stage "abi check (MPI mode)" 300 bash scripts/abi_check.sh build/libtutti_mpi.so
# The C++ and Python suites hold functional deadlines (the fast path's patience, detection
# times) on this 2-core machine: pip unpacking four environments beside them made them flaky
# (a fast-path test failed under it in a CI run), so the installs finish first. On a cold
# machine the build outlasts them anyway.
for venv in engines jax tensorflow mxnet; do await_venv $venv; done
stage "test release" 900 ctest --test-dir build --output-on-failure --timeout 300
# The Python package (ctypes over the release build's libtutti.so) with Debian's Python, torch
# and pytest: real jobs under tuttirun.
TUTTI_BUILD_DIR=build stage "test python" 900 /usr/bin/python3 -m pytest -q tests/python
# Spark and Ray (tests/engines): real PySpark in local-cluster mode on Debian's Java, a local Ray
# cluster, both from the engines' virtual environment.
TUTTI_BUILD_DIR=build stage "test engines" 900 .venv-engines/bin/python -m pytest -q tests/engines
# The framework bindings (tests/frameworks), each with its framework's own environment and only
# its own files (another framework's tests would fail there under CI=true); ranks under tuttirun.
TUTTI_BUILD_DIR=build stage "test frameworks (jax, keras on jax)" 600 \
  .venv-jax/bin/python -m pytest -q tests/frameworks/test_jax.py tests/frameworks/test_keras_jax.py
TUTTI_BUILD_DIR=build stage "test frameworks (tensorflow, keras)" 600 \
  .venv-tensorflow/bin/python -m pytest -q tests/frameworks/test_tensorflow.py
TUTTI_BUILD_DIR=build stage "test frameworks (mxnet)" 600 \
  .venv-mxnet/bin/python -m pytest -q tests/frameworks/test_mxnet.py
# tuttid as a service: config file, systemd notify protocol and unit checks, the status page in
# headless chromium, Prometheus metrics.
TUTTI_BUILD_DIR=build stage "test service" 600 /usr/bin/python3 -m pytest -q tests/service
# The Rust and Go bindings over the release build, offline with Debian's toolchains: cargo and
# go tests against a real tuttid, both examples on 4 ranks, and a job whose ranks are Python, C,
# Rust and Go (docs/bindings.md).
stage "test bindings" 600 bash scripts/test_bindings.sh build
stage "configure asan+ubsan" 120 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTUTTI_SANITIZE=ON -DTUTTI_GPU=OFF
stage "build asan+ubsan" 1500 cmake --build build-asan -j "$JOBS"
# The whole suite again under the sanitizers: it takes about as long as the release suite, and the
# multi-process tests are where memory bugs of the runtime and the coordinator would show.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  stage "test asan+ubsan" 1200 ctest --test-dir build-asan --output-on-failure --timeout 300
# ThreadSanitizer over the multi-threaded tests (docs/fuzzing-and-sanitizers.md).
stage "tsan" 900 bash scripts/tsan.sh
# libFuzzer over tuttid's frame decoding and coordinator, 60 s per target after the regressions.
stage "fuzz" 600 bash scripts/fuzz.sh 60
echo "all stages passed"
