#!/usr/bin/env bash
# tutti beside OpenMPI, Gloo and torch.distributed, in the same run on this machine, measured by
# ../shared/bench-peers (the peers' method; tutti's bench/allreduce_bench prints the same lines).
# Installs the peers from Debian packages when missing, builds everything, runs REPS interleaved
# repetitions, and prints the table with ratios tutti/peer and a PNG plot of busbw against size.
#   bash bench/compare.sh                       # REPS=5 NPS="2 4", about 10 minutes
#   REPS=3 NPS=2 PEERS="mpi-tcp gloo-new" bash bench/compare.sh
#   REPS=5 NPS="2 4" PEERS= TUTTIS="tutti-tcp tutti-tcp-integrity tutti-tcp-encrypt" bash bench/compare.sh
#                                               # only what the sealed data plane costs
# Output: $B/compare.csv (raw lines), $B/compare.md (the table), $B/compare.png (the plot);
# B defaults to /tmp/tutti-peers.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
P=${PEERS_DIR:-$ROOT/../shared/bench-peers}
export B=${B:-/tmp/tutti-peers}
REPS=${REPS:-5}
NPS=${NPS:-"2 4"}
PEERS=${PEERS-"mpi-sm mpi-tcp gloo-new torch-gloo"}

[ -d "$P" ] || { echo "compare.sh: no peer benchmarks at $P (set PEERS_DIR)" >&2; exit 2; }
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=()
for p in openmpi-bin libopenmpi-dev libgloo-dev python3-torch python3-matplotlib; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "compare.sh: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build --target tuttirun allreduce_bench
make -s -C "$P" B="$B" all

mkdir -p "$B"
OUT=$B/compare.csv
rm -f "$OUT"
bench="$ROOT/build/tuttirun --no-prefix -np {np} $ROOT/build/bench/allreduce_bench"
# The data plane is chosen per run (docs/transports.md): shared memory, or TCP over loopback as
# between hosts, plain and sealed (TUTTI_DATA_SECURITY, docs/security.md: what each mode costs).
TUTTIS=${TUTTIS:-"tutti-shm tutti-tcp tutti-tcp-integrity tutti-tcp-encrypt"}
EXTRA="tutti-shm=env TUTTI_TRANSPORT=shm $bench --label tutti-shm"
EXTRA+=";tutti-tcp=env TUTTI_TRANSPORT=tcp $bench --label tutti-tcp"
EXTRA+=";tutti-tcp-integrity=env TUTTI_TRANSPORT=tcp TUTTI_DATA_SECURITY=integrity $bench --label tutti-tcp-integrity"
EXTRA+=";tutti-tcp-encrypt=env TUTTI_TRANSPORT=tcp TUTTI_DATA_SECURITY=encrypt $bench --label tutti-tcp-encrypt"
EXTRA=$EXTRA PEERS="$PEERS $TUTTIS" REPS=$REPS NPS=$NPS OUT=$OUT \
  "$P/run_all.sh" 2> "$B/compare.log" || { echo "compare.sh: a run failed; see $B/compare.log" >&2; }
/usr/bin/python3 bench/compare_report.py "$OUT" $(printf -- '--tutti %s ' $TUTTIS) \
  --cost tutti-tcp-integrity:tutti-tcp --cost tutti-tcp-encrypt:tutti-tcp \
  --plot "$B/compare.png" | tee "$B/compare.md"
# The Python rows: what tutti.torch adds over the C path above, in and out of place, beside
# torch.distributed/Gloo on the same ranks (bench/torch_calls.py interleaves its own repetitions).
if [ "${PYTHON_ROWS:-1}" = 1 ]; then
  for np in $NPS; do
    echo
    PYTHONPATH=$ROOT/python TUTTI_LIBRARY=$ROOT/build/libtutti.so \
      "$ROOT/build/tuttirun" --no-prefix -np "$np" /usr/bin/python3 bench/torch_calls.py \
      --reps "$REPS" --sizes 4K,64K,1M,16M,64M 2>>"$B/compare.log"
  done | tee "$B/compare_python.md"
fi
echo "compare.sh: table $B/compare.md, plot $B/compare.png, raw $OUT"
