#!/usr/bin/env bash
# The comm-bound PyTorch step (bench/torch_step.py: ResNet-50's 161 gradients under
# DistributedOptimizer, and 200 x 4 KiB allreduce_async_ then synchronize) side by side, in the same
# run, REPS interleaved repetitions: tutti.torch, Horovod 0.28.1 itself over MPI and over Gloo
# (built by bench/horovod_venv.sh into a venv; skipped, saying so, if it cannot be built), and
# torch DistributedDataParallel with Gloo (torchrun). Prints a Markdown table: medians (min-max)
# of each binding's per-run medians, and each peer's time over tutti's.
#   bash bench/torch_step.sh [BUILD_DIR]         (default ./build)
# Environment: NPS (default "2"), REPS (default 3), STEPS per run (default 10), HOROVOD_VENV.
set -uo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
NPS=${NPS:-2}
REPS=${REPS:-3}
STEPS=${STEPS:-10}
out=$(mktemp -d /tmp/torch-step.XXXXXX)
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} TUTTI_LIBRARY=$build/libtutti.so
script=$PWD/bench/torch_step.py

horovod_python=$(bash bench/horovod_venv.sh "${HOROVOD_VENV:-/tmp/horovod-0.28.1}" 2>"$out/horovod_venv.err") || {
  echo "torch_step.sh: no Horovod 0.28.1 ($(tail -1 "$out/horovod_venv.err")): its rows are skipped" >&2
  horovod_python=""
}
# Horovod's own Python: tutti's package must not shadow anything there, so its PYTHONPATH is empty.
run() {  # run BINDING NP: one run, its STEP and SMALL lines appended to $out/lines
  local binding=$1 np=$2
  case $binding in
    tutti) timeout 600 "$build/tuttirun" --no-prefix -np "$np" /usr/bin/python3 "$script" \
             --binding tutti --steps "$STEPS" ;;
    horovod-mpi) PYTHONPATH= timeout 600 mpirun --allow-run-as-root --oversubscribe -np "$np" \
                   --bind-to none -x PYTHONPATH -x HOROVOD_CPU_OPERATIONS=MPI \
                   "$horovod_python" "$script" --binding horovod --steps "$STEPS" ;;
    horovod-gloo) PYTHONPATH= timeout 600 "$(dirname "$horovod_python")/horovodrun" --gloo \
                    -np "$np" -H "localhost:$np" "$horovod_python" "$script" --binding horovod \
                    --steps "$STEPS" ;;
    ddp) timeout 600 /usr/bin/python3 -m torch.distributed.run --redirects 1 --tee 1 \
           --nproc_per_node "$np" "$script" --binding ddp --steps "$STEPS" ;;
  esac 2>>"$out/errors" | sed -E "s/^(\[[^]]*\](<[a-z]+>)?:?)? *//" | grep -E "^(STEP|SMALL) " \
    | sed "s/^\(STEP\|SMALL\) [a-z]*/\1 $binding/" >>"$out/lines"
}

bindings="tutti ddp"
[ -n "$horovod_python" ] && bindings="tutti horovod-mpi horovod-gloo ddp"
for np in $NPS; do
  for rep in $(seq "$REPS"); do
    for binding in $bindings; do
      run "$binding" "$np"
    done
  done
done
/usr/bin/python3 - "$out/lines" <<'EOF'
import collections, statistics, sys
rows = collections.defaultdict(list)  # (kind, what, ranks) -> {binding: [median of each run]}
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    kind, binding, what, ranks, median, low, high = line.split()
    runs[(kind, what, int(ranks))][binding].append(float(median))
print("| step | ranks | binding | ms, median (min-max) of runs | binding / tutti |")
print("|---|---:|---|---:|---:|")
for key in sorted(runs):
    kind, what, ranks = key
    tutti = statistics.median(runs[key]["tutti"]) if runs[key].get("tutti") else None
    for binding, values in runs[key].items():
        median = statistics.median(values)
        ratio = f"{median / tutti:.2f}x" if tutti else "-"
        print(f"| {what} | {ranks} | {binding} | {median:.2f} ({min(values):.2f}-{max(values):.2f}) "
              f"| {ratio} |")
EOF
[ -s "$out/errors" ] && echo "torch_step.sh: the runs' stderr is in $out/errors" >&2
