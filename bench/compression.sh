#!/usr/bin/env bash
# Library compression on real training between emulated hosts (docs/compression.md): two network
# namespaces ("hosts") joined through a bridge, each egress shaped to RATE with tbf (netem where
# the kernel has it: then DELAY too), tuttid in host 0 and one rank per host running
# bench/compression_train.py with each compressor in turn, all in one session on the same link.
# Writes docs/bench/compression-raw.jsonl and prints the table (bench/compression_report.py).
#
#   sudo bench/compression.sh            # as root; about 3 minutes on 2 cores
# Environment: BUILD (build), RATE (1gbit), DELAY (0us), STEPS (100),
# COMPRESSORS ("none fp16 wire_fp16 wire_bf16 topk adaptive"), DOCS (docs/bench).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
RATE=${RATE:-1gbit}
DELAY=${DELAY:-0us}
STEPS=${STEPS:-100}
COMPRESSORS=${COMPRESSORS:-"none fp16 wire_fp16 wire_bf16 topk adaptive"}
DOCS=${DOCS:-$ROOT/docs/bench}
TAG=tcb$$
[ "$(id -u)" -eq 0 ] || { echo "compression.sh: needs root (network namespaces, tc)" >&2; exit 2; }
[ -x "$BUILD/tuttid" ] && [ -e "$BUILD/libtutti.so" ] || { echo "compression.sh: build tutti first" >&2; exit 2; }

source bench/emulated_hosts.sh
teardown() {
  [ -n "${TUTTID:-}" ] && kill "$TUTTID" 2>/dev/null && wait "$TUTTID" 2>/dev/null
  hosts_down $TAG 2
}
trap teardown EXIT
hosts_up $TAG 2 10.235.0 "$RATE" "$DELAY"
applied=$HOSTS_LINK
echo "compression.sh: link $applied, $STEPS steps per compressor" >&2

# tuttid in host 0 on an OS-chosen port; its first line names the endpoint.
exec 3< <(ip netns exec $TAG-0 "$BUILD/tuttid" --bind "tcp://10.235.0.1:*")
TUTTID=$!
read -r -t 30 line <&3 || { echo "compression.sh: tuttid did not start" >&2; exit 1; }
ENDPOINT=$(echo "$line" | grep -o 'tcp://[^ ]*')
mkdir -p "$DOCS"
RAW=$DOCS/compression-raw.jsonl
: >"$RAW"
for name in $COMPRESSORS; do
  pids=()
  for r in 0 1; do
    ip netns exec $TAG-$r env PYTHONPATH="$ROOT/python" TUTTI_LIBRARY="$ROOT/$BUILD/libtutti.so" \
      TUTTI_COORDINATOR="$ENDPOINT" TUTTI_JOB="compression-$name" TUTTI_TOKEN=bench \
      TUTTI_RANK=$r TUTTI_SIZE=2 TUTTI_TRANSPORT=tcp \
      timeout 600 /usr/bin/python3 bench/compression_train.py "$name" "$STEPS" >>"$RAW.$r" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  cat "$RAW.0" >>"$RAW"
  rm -f "$RAW.0" "$RAW.1"
  tail -1 "$RAW" >&2
done
python3 bench/compression_report.py "$RAW" "$applied"
