#!/usr/bin/env bash
# Packs what tests/gpu/device_check.sh needs into gpu-bundle/ (git-ignored), for a GPU machine
# that reaches no package registry and lacks ZeroMQ, Protobuf and the rest: the release build's
# programs, libtutti.so, the GPU module, the CUDA runtime it was built against, and every shared
# library they load that is not part of glibc, the driver or NCCL (the machine's own NCCL, e.g.
# PyTorch's wheel, serves: its ABI is stable across 2.x). Usage: scripts/gpu_bundle.sh [build]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=gpu-bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
programs=("$build/tuttid" "$build/tests/gpu_tests" "$build/bench/gpu_copy_bench")
for p in "${programs[@]}"; do
  [[ -x $p ]] || { echo "gpu_bundle: $p is missing; build with the GPU module first" >&2; exit 1; }
  cp "$p" "$out/bin/"
done
cp -L "$build/libtutti.so.0" "$out/lib/"
cp "$build/libtutti_cuda.so" "$out/lib/"
# Shared libraries, resolved here, minus glibc's, the driver's and NCCL.
skip='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda|libnccl)\.so'
for f in "$out"/bin/* "$out"/lib/*; do
  ldd "$f" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ $name =~ $skip ]] && continue
  [[ -e $out/lib/$name ]] || cp -L "$lib" "$out/lib/"
done
du -sh "$out"
