#!/usr/bin/env bash
# Runs bench/training_step over a matrix of models x ranks x fusion on/off x response cache on/off
# and prints one Markdown table per model: step time, control-plane traffic per step (rank 0's
# counters), and the ratios fusion-off / fusion-on step time and cache-off / cache-on announce
# bytes (each against the run that differs only in that switch).
#
#   bench/training_step.sh [BUILD_DIR]        (default: ./build, with tuttirun and bench/training_step)
#
# Environment (all optional):
#   MODELS     models to run, among resnet50 bert_base synthetic, or paths to .tsv files
#              (default: "resnet50 bert_base synthetic")
#   RANKS      rank counts (default: "2 4")
#   FUSION     "on off" (default): on = the library's default threshold, off = TUTTI_FUSION_THRESHOLD=0
#   CACHE      "on off" (default): on = the library's default capacity, off = TUTTI_CACHE_CAPACITY=0
#   STEPS      measured steps per run (default 3)
#   WARMUP     warm-up steps per run (default 1; the first step fills the response cache)
#   SYNTHETIC  COUNTxBYTES of the synthetic model (default 200x4096)
#   TIMEOUT    seconds per run before it is killed (default 900)
#   BIN        the benchmark binary (default BUILD_DIR/bench/training_step)
#   LOGDIR     where each run's output and results.txt go (default BUILD_DIR/bench/training_step-logs)
#   TORCH_STEP  1: then the comm-bound PyTorch step beside Horovod 0.28.1 and DDP
#              (bench/torch_step.sh; its own NPS, REPS, STEPS)
# Quick run: MODELS=synthetic RANKS=2 STEPS=2 bench/training_step.sh
# Exits 1 if any run failed (its row says so and the tail of its log is shown on stderr).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" 2>/dev/null && pwd) || { echo "training_step.sh: no build directory '${1:-build}'" >&2; exit 2; }
tuttirun=$build/tuttirun
bin=${BIN:-$build/bench/training_step}
models=${MODELS:-resnet50 bert_base synthetic}
ranks_list=${RANKS:-2 4}
fusion_list=${FUSION:-on off}
cache_list=${CACHE:-on off}
steps=${STEPS:-3}
warmup=${WARMUP:-1}
synthetic=${SYNTHETIC:-200x4096}
limit=${TIMEOUT:-900}
logdir=${LOGDIR:-$build/bench/training_step-logs}

for exe in "$tuttirun" "$bin"; do
  [ -x "$exe" ] || { echo "training_step.sh: $exe is missing (build the tuttirun and training_step targets)" >&2; exit 2; }
done
mkdir -p "$logdir" || exit 2
results=$logdir/results.txt
: >"$results"

model_args() {  # model_args MODEL: sets args to the benchmark's arguments for it
  case $1 in
    synthetic) args=(--synthetic "$synthetic") ;;
    *.tsv) args=("$1") ;;
    *) args=("$here/models/$1.tsv") ;;
  esac
}

failed=0
for model in $models; do
  model_args "$model"
  if [ "$model" != synthetic ] && [ ! -f "${args[0]}" ]; then
    echo "training_step.sh: no size list ${args[0]}" >&2
    exit 2
  fi
  for np in $ranks_list; do
    for fusion in $fusion_list; do
      for cache in $cache_list; do
        settings=(-u TUTTI_FUSION_THRESHOLD -u TUTTI_CACHE_CAPACITY)
        [ "$fusion" = off ] && settings+=(TUTTI_FUSION_THRESHOLD=0)
        [ "$cache" = off ] && settings+=(TUTTI_CACHE_CAPACITY=0)
        tag="$(basename "$model" .tsv)-np$np-fusion_$fusion-cache_$cache"
        log=$logdir/$tag.log
        printf 'training_step.sh: %-40s ' "$tag" >&2
        start=$SECONDS
        timeout --kill-after=15 "$limit" env "${settings[@]}" \
          "$tuttirun" -np "$np" "$bin" --warmup "$warmup" --steps "$steps" "${args[@]}" >"$log" 2>&1
        rc=$?
        line=$(grep -m1 '^\[0\] RESULT ' "$log" | sed 's/^\[0\] RESULT //')
        if [ "$rc" -eq 0 ] && [ -n "$line" ]; then
          echo "$((SECONDS - start))s" >&2
          echo "fusion=$fusion cache=$cache $line" >>"$results"
        else
          [ "$rc" -eq 124 ] && why="timed out after ${limit}s" || why="exit status $rc"
          echo "FAILED ($why), log: $log" >&2
          tail -n 15 "$log" | sed 's/^/    /' >&2
          # The model's name as the benchmark would print it, so the row lands in its table.
          name=$(basename "$model" .tsv)
          [ "$model" = synthetic ] && name=synthetic-$synthetic
          echo "fusion=$fusion cache=$cache model=$name ranks=$np failed=$rc" >>"$results"
          failed=1
        fi
      done
    done
  done
done

echo "results: $results" >&2
awk '
  function get(line, key,    n, i, kv, parts) {
    n = split(line, parts, " ")
    for (i = 1; i <= n; ++i) {
      split(parts[i], kv, "=")
      if (kv[1] == key) return substr(parts[i], length(key) + 2)
    }
    return ""
  }
  function ratio(x, y) { return (x == "" || y == "" || y + 0 == 0) ? "-" : sprintf("%.2f", x / y) }
  {
    m = get($0, "model"); r = get($0, "ranks"); f = get($0, "fusion"); c = get($0, "cache")
    if (!(m in seen)) { seen[m] = 1; models[++nmodels] = m }
    rows[m, ++nrows[m]] = $0
    k = m SUBSEP r SUBSEP f SUBSEP c
    if (get($0, "failed") == "") {
      step[k] = get($0, "step_ms_median"); abytes[k] = get($0, "announce_bytes_per_step")
      if (!(m in info)) info[m] = sprintf("%s tensors, %.1f MiB of float32 gradients; median and min over %s steps after %s warm-up", \
                                          get($0, "tensors"), get($0, "bytes") / 1048576, get($0, "steps"), get($0, "warmup"))
    }
  }
  END {
    for (i = 1; i <= nmodels; ++i) {
      m = models[i]
      printf "### %s\n\n", m
      if (m in info) printf "%s. Counters are rank 0'"'"'s, per step.\n\n", info[m]
      print "| ranks | fusion | cache | step ms (median) | step ms (min) | fusion off/on step time | announce msgs | announce bytes | cache off/on announce bytes | execute msgs | execute bytes | collectives | tensors fused |"
      print "|---:|:---:|:---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
      for (j = 1; j <= nrows[m]; ++j) {
        line = rows[m, j]
        r = get(line, "ranks"); f = get(line, "fusion"); c = get(line, "cache")
        if (get(line, "failed") != "") {
          printf "| %s | %s | %s | FAILED (status %s) | | | | | | | | | |\n", r, f, c, get(line, "failed")
          continue
        }
        k = m SUBSEP r SUBSEP f SUBSEP c
        fr = (f == "off") ? ratio(step[k], step[m, r, "on", c]) : "-"
        cr = (c == "off") ? ratio(abytes[k], abytes[m, r, f, "on"]) : "-"
        printf "| %s | %s | %s | %.1f | %.1f | %s | %.1f | %.0f | %s | %.1f | %.0f | %.1f | %.1f |\n", \
          r, f, c, get(line, "step_ms_median"), get(line, "step_ms_min"), fr, \
          get(line, "announce_msgs_per_step"), get(line, "announce_bytes_per_step"), cr, \
          get(line, "execute_msgs_per_step"), get(line, "execute_bytes_per_step"), \
          get(line, "collectives_per_step"), get(line, "tensors_fused_per_step")
      }
      print ""
    }
  }
' "$results"

if [ "${TORCH_STEP:-0}" = 1 ]; then
  bash "$here/torch_step.sh" "$build" || failed=1
fi
exit "$failed"
