# Sourced by the GPU machine's scripts (device_check.sh, horovod_torch.sh): sets $root (the
# checkout), $bundle (scripts/gpu_bundle.sh's output, laid out like a build directory; $BUNDLE
# names another) and $out (where logs go: $OUT, absolute or relative to the checkout, or
# gpu-out), and the environment that runs the bundled programs and the Python package there.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bundle=$root/${BUNDLE:-gpu-bundle}
out=${OUT:-gpu-out}
[[ $out = /* ]] || out=$root/$out
if [[ ! -d $bundle ]]; then
  echo "$(basename "$0"): no $bundle (run scripts/gpu_bundle.sh where it builds)"
  exit 2
fi

# NCCL: the machine's own (PyTorch's wheel ships one; its ABI is stable across 2.x).
TUTTI_NCCL_DIR=$(python3 - <<'PY' 2>/dev/null
import glob, os, site
for pattern in ("nvidia/nccl/lib/libnccl.so.2", "torch/lib/libnccl*.so*"):
    for base in site.getsitepackages() + [site.getusersitepackages()]:
        hits = glob.glob(os.path.join(base, pattern))
        if hits:
            print(os.path.dirname(hits[0])); raise SystemExit
PY
)
export TUTTI_NCCL_DIR
export LD_LIBRARY_PATH="$bundle/lib${TUTTI_NCCL_DIR:+:$TUTTI_NCCL_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TUTTI_GPU_MODULE="$bundle/libtutti_cuda.so"
export TUTTI_LIBRARY="$bundle/libtutti.so"
export TUTTI_TUTTID="$bundle/tuttid"
export PATH="$bundle:$PATH"
# The package from the checkout; pytest and the modules Horovod's tests import from the bundle
# only where the machine lacks them (it reaches no package registry).
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c 'import pytest, mock, cloudpickle' 2>/dev/null; then
  export PYTHONPATH="$PYTHONPATH:$bundle/python"
fi
