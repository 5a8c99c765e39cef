#!/usr/bin/env bash
# Per-set autotuning on two sets with different workloads (docs/autotune.md): one job of RANKS
# ranks on this machine, set "many" (every rank, 200 tensors of 4 KiB a step) and set "few" (every
# rank but the last, 4 of 8 MiB), in one step loop; run once with the defaults and once with
# TUTTI_AUTOTUNE=1, against one tuttid with the given trial lengths. Prints each set's chosen
# values and its mean time (rank 0's part of the step) over the last LAST steps of each run, with
# the ratio tuned / defaults. RANKS >= 3: two sets of the same ranks would be one set.
#
#   bench/autotune.sh          # about 4 minutes on 2 cores
# Environment: BUILD (build), RANKS (3), STEPS (1500), LAST (300), TRIAL_TENSORS (200),
# TRIAL_MS (1000), TRANSPORT (tcp), TUTTID_LOG (tuttid's log, with every trial: /dev/null).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
RANKS=${RANKS:-3}
STEPS=${STEPS:-1500}
LAST=${LAST:-300}
TRIAL_TENSORS=${TRIAL_TENSORS:-200}
TRIAL_MS=${TRIAL_MS:-1000}
TRANSPORT=${TRANSPORT:-tcp}
exec 3< <("$BUILD/tuttid" --bind "tcp://127.0.0.1:*" --http 127.0.0.1:0 \
            --autotune-trial-tensors "$TRIAL_TENSORS" --autotune-trial-ms "$TRIAL_MS" 2>"${TUTTID_LOG:-/dev/null}")
TUTTID=$!
trap 'kill $TUTTID 2>/dev/null; wait $TUTTID 2>/dev/null || true' EXIT
read -r -t 30 line <&3
ENDPOINT=$(echo "$line" | grep -o 'tcp://[^ ]*')
read -r -t 30 line <&3
STATUS=$(echo "$line" | grep -o 'http://[^ ]*' | sed 's|/status$||')
run() {  # run JOB AUTOTUNE
  local pids=() out=/tmp/autotune-bench.$$ r
  for ((r = 0; r < RANKS; r++)); do
    env PYTHONPATH=python TUTTI_LIBRARY="$BUILD/libtutti.so" TUTTI_COORDINATOR="$ENDPOINT" \
      TUTTI_JOB="$1" TUTTI_TOKEN=bench TUTTI_RANK=$r TUTTI_SIZE=$RANKS TUTTI_AUTOTUNE=$2 \
      TUTTI_TRANSPORT="$TRANSPORT" timeout 900 /usr/bin/python3 bench/autotune_job.py "$STEPS" "$LAST" "$STATUS" \
      >"$out.$r" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  cat "$out.0"
  rm -f "$out".*
}
defaults=$(run defaults 0)
tuned=$(run tuned 1)
python3 - "$defaults" "$tuned" "$RANKS" "$STEPS" "$LAST" <<'PY'
import json, sys
defaults, tuned = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ranks, steps, last = sys.argv[3:]
print(f"{ranks} ranks, {steps} steps, mean of the last {last}\n")
print("| set | workload | tuned values (fusion / small cut-off / pipeline) | trials | defaults ms | tuned ms | tuned / defaults |")
print("|---|---|---|---:|---:|---:|---:|")
work = {"many": f"200 x 4 KiB, {ranks} ranks", "few": f"4 x 8 MiB, {int(ranks) - 1} ranks"}
for name in ("many", "few"):
    t = tuned[name]
    values = t.get("autotune", {}).get("values", {})
    shown = " / ".join(f"{values.get(k, 0) / 1024:.0f} KiB" for k in ("fusion_threshold", "small_allreduce_bytes", "pipeline_bytes"))
    print(f"| {name} | {work[name]} | {shown} ({t.get('autotune', {}).get('state', '?')}) | "
          f"{t.get('autotune', {}).get('trials', 0)} | {defaults[name]['mean_ms']:.2f} | {t['mean_ms']:.2f} | "
          f"{t['mean_ms'] / defaults[name]['mean_ms']:.2f}x |")
PY
