#!/usr/bin/env bash
# Packs what tests/gpu/device_check.sh and tests/gpu/horovod_torch.sh need into gpu-bundle/
# (git-ignored, carried to the GPU machine), for a machine that reaches no package registry and
# has Python 3.12, PyTorch 2.x and its NCCL, but no ZeroMQ, Protobuf and the rest:
#  - the release build's programs, laid out as in the build directory (so that the Python tests'
#    TUTTI_BUILD_DIR can name the bundle), with their debug sections stripped to stay small;
#  - lib/: every shared library they load except glibc's, the driver's, NCCL (the machine's own
#    serves), and libstdc++, libgcc_s and OpenSSL, which the machine has in newer versions;
#  - python/: pure-Python pytest, mock and cloudpickle, used there only if the machine lacks them;
#  - horovod/: Horovod 0.28.1's test/parallel/test_torch.py and what it imports, taken from a
#    Horovod git directory (HOROVOD_GIT, default: the search tool's mirror), and a shim package
#    whose horovod.torch is tutti.torch. Fetched here and carried, never committed.
# Usage: scripts/gpu_bundle.sh [build]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=gpu-bundle
rm -rf "$out"
mkdir -p "$out/tests" "$out/bench" "$out/lib" "$out/python"

# file in the build -> same place in the bundle, without debug sections.
programs=(tuttid tuttirun libtutti_cuda.so tests/gpu_tests tests/gpu_conformance_tests
          bench/gpu_copy_bench)
for p in "${programs[@]}"; do
  [[ -e $build/$p ]] || { echo "gpu_bundle: $build/$p is missing; build with the GPU module first" >&2; exit 1; }
  objcopy --strip-debug "$build/$p" "$out/$p"
done
objcopy --strip-debug "$(readlink -f "$build/libtutti.so.0")" "$out/libtutti.so.0"
cp "$out/libtutti.so.0" "$out/libtutti.so"

# Shared libraries, resolved here.
skip='^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda|libnccl|libstdc\+\+|libgcc_s|libssl|libcrypto)\.so'
for f in "$out"/tuttid "$out"/tuttirun "$out"/*.so* "$out"/tests/* "$out"/bench/*; do
  ldd "$f" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  [[ $name =~ $skip ]] && continue
  [[ -e $out/lib/$name ]] || objcopy --strip-debug "$lib" "$out/lib/$name"
done

# Pure-Python test tools for Python 3.12, unpacked (no pip needed there).
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation py \
  --dest "$wheels" pytest==8.3.4 mock==5.1.0 cloudpickle==3.1.0
for wheel in "$wheels"/*.whl; do python3 -m zipfile -e "$wheel" "$out/python"; done

# Horovod's own test_torch.py and the shim.
horovod_git=${HOROVOD_GIT:-/work/.mirror/horovod+horovod/repo}
if git --git-dir="$horovod_git" rev-parse -q --verify v0.28.1 >/dev/null 2>&1; then
  tests=$out/horovod/test
  pkg=$out/horovod/pkg/horovod
  mkdir -p "$tests/parallel" "$tests/utils" "$pkg/torch" "$pkg/runner/util"
  git --git-dir="$horovod_git" show v0.28.1:test/parallel/test_torch.py > "$tests/parallel/test_torch.py"
  git --git-dir="$horovod_git" show v0.28.1:test/utils/common.py > "$tests/utils/common.py"
  git --git-dir="$horovod_git" show v0.28.1:horovod/runner/util/threads.py > "$pkg/runner/util/threads.py"
  touch "$pkg/__init__.py" "$pkg/runner/__init__.py" "$pkg/runner/util/__init__.py"
  cat > "$pkg/torch/__init__.py" <<'PY'
# horovod.torch is tutti.torch (the one-import switch), with one change for a machine whose ranks
# outnumber its GPUs: the tests place tensors with .cuda(hvd.local_rank()), so local_rank()
# answers modulo the device count there (rank 1 of 2 sharing one GPU uses cuda:0).
import sys
import types

import torch
import tutti.torch as _tutti_torch

module = types.ModuleType(__name__)
module.__dict__.update({k: v for k, v in vars(_tutti_torch).items() if not k.startswith("__")})
module.__file__, module.__path__ = __file__, []
if torch.cuda.is_available():
    module.local_rank = lambda: _tutti_torch.local_rank() % torch.cuda.device_count()
sys.modules[__name__] = module
PY
else
  echo "gpu_bundle: no Horovod v0.28.1 in $horovod_git (HOROVOD_GIT): tests/gpu/horovod_torch.sh will not run" >&2
fi
du -sh "$out"
