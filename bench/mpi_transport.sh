#!/usr/bin/env bash
# tutti's allreduce over TUTTI_TRANSPORT=mpi, shm and tcp beside MPI's own MPI_Allreduce, in the
# same mpirun (bench/mpi_transport_bench.c), on 2 and 4 ranks, REPS interleaved repetitions;
# prints the median busbw of each method per size and its ratio to MPI_Allreduce's.
#   bash bench/mpi_transport.sh                      # REPS=3 NPS="2 4" SIZES=4 KiB..64 MiB
#   REPS=1 NPS=2 BUILD=build-mpi bash bench/mpi_transport.sh
# Output: $B/mpi_transport.csv (raw lines) and $B/mpi_transport.md (the table); B defaults to
# /tmp/tutti-mpi-transport. Needs an MPI (Debian: openmpi-bin libopenmpi-dev) at configure time.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export B=${B:-/tmp/tutti-mpi-transport}
REPS=${REPS:-3}
NPS=${NPS:-"2 4"}
SIZES=${SIZES:-4096,65536,1048576,16777216,67108864}
cmake --build "$BUILD" --target mpi_transport_bench tuttid >/dev/null
[ -x "$BUILD/bench/mpi_transport_bench" ] || {
  echo "mpi_transport.sh: $BUILD/bench/mpi_transport_bench was not built (no MPI at configure time)" >&2
  exit 2
}
MPIRUN=(mpirun --oversubscribe)
[ "$(id -u)" -ne 0 ] || MPIRUN+=(--allow-run-as-root)
mkdir -p "$B"
OUT=$B/mpi_transport.csv
rm -f "$OUT"
for rep in $(seq "$REPS"); do
  for np in $NPS; do
    echo "mpi_transport.sh: repetition $rep, $np ranks" >&2
    "${MPIRUN[@]}" -np "$np" "$BUILD/bench/mpi_transport_bench" --sizes "$SIZES" | grep '^RESULT,' >>"$OUT"
  done
done
python3 - "$OUT" >"$B/mpi_transport.md" <<'PY'
import collections, statistics, sys
busbw = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, method, np, size, _, _, _, bw = line.strip().split(",")
    busbw[(method, int(np), int(size))].append(float(bw))
methods = ["tutti-mpi", "tutti-shm", "tutti-tcp", "mpi-allreduce"]
def fmt(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
print("busbw in GB/s, median of the repetitions (ratio to MPI_Allreduce's)\n")
print("| ranks | size | " + " | ".join(methods) + " |")
print("|---" * (len(methods) + 2) + "|")
for np, size in sorted({(k[1], k[2]) for k in busbw}):
    mpi = statistics.median(busbw.get(("mpi-allreduce", np, size), [float("nan")]))
    cells = []
    for m in methods:
        values = busbw.get((m, np, size))
        if not values:
            cells.append("")
            continue
        v = statistics.median(values)
        cells.append(f"{v:.2f}" if m == "mpi-allreduce" else f"{v:.2f} ({v / mpi:.2f}x)")
    print(f"| {np} | {fmt(size)} | " + " | ".join(cells) + " |")
PY
cat "$B/mpi_transport.md"
