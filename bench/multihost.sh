#!/usr/bin/env bash
# Multi-host allreduce on emulated hosts (issue 24): every "host" is a network namespace with its
# own UTS hostname (h0, h1, ...), joined through one bridge by a veth whose host-side egress is
# shaped with netem (rate, and delay), two ranks per host. Runs, in the same session and on the
# same links: tutti with the flat ring forced (TUTTI_HIERARCHICAL=0), tutti hierarchical
# (TUTTI_HIERARCHICAL=1), and Open MPI's MPI_Allreduce with its daemons started inside each
# namespace (plm_rsh_agent is a wrapper doing `ip netns exec`), btl_tcp_if_include naming the
# veth, and btl_base_verbose so that the log shows which BTLs it used. Then
# bench/multihost_report.py writes the table and the plot.
#
#   sudo bench/multihost.sh            # as root; about 5 minutes on 2 cores
# Environment: BUILD (build), HOSTS ("2 4"), LINKS ("10gbit:50us 1gbit:0us", rate:delay),
# SIZES (bytes, comma-separated), VARIANTS ("flat hier mpi"; also flat-integrity and
# flat-encrypt: the flat ring with TUTTI_DATA_SECURITY, docs/security.md), MPI_BTL (tcp,self),
# PEERS (../shared/bench-peers),
# B (/tmp/tutti-peers: where mpi_allreduce is built), WORK (/tmp/tutti-multihost: raw output),
# DOCS (docs/bench: where the table and plot go).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
HOSTS=${HOSTS:-"2 4"}
LINKS=${LINKS:-"10gbit:50us 1gbit:0us"}
SIZES=${SIZES:-65536,1048576,16777216,67108864}
VARIANTS=${VARIANTS:-"flat hier mpi"}
MPI_BTL=${MPI_BTL:-tcp,self}
PEERS=${PEERS:-$ROOT/../shared/bench-peers}
B=${B:-/tmp/tutti-peers}
WORK=${WORK:-/tmp/tutti-multihost}
DOCS=${DOCS:-$ROOT/docs/bench}
PER_HOST=2
TAG=tmh$$  # names of this run's namespaces and links (interface names stay within 15 characters)

[ "$(id -u)" -eq 0 ] || { echo "multihost.sh: needs root (network namespaces, tc)" >&2; exit 2; }
for tool in ip tc unshare mpirun; do
  command -v $tool >/dev/null || { echo "multihost.sh: $tool is missing (scripts/setup.sh)" >&2; exit 2; }
done
[ -x "$BUILD/bench/allreduce_bench" ] && [ -x "$BUILD/tuttid" ] ||
  { echo "multihost.sh: build tutti first ($BUILD/bench/allreduce_bench, $BUILD/tuttid)" >&2; exit 2; }
make -s -C "$PEERS" B="$B" "$B/mpi_allreduce" >/dev/null
mkdir -p "$WORK" "$DOCS"
# Kernels built without sch_netem (this project's 6.18 Firecracker VMs) can shape the rate (tbf)
# but cannot add delay: say so, and label the links by what was applied.
HAVE_NETEM=0
ip link add ${TAG}t0 type veth peer name ${TAG}t1
tc qdisc add dev ${TAG}t0 root netem delay 1us 2>/dev/null && HAVE_NETEM=1
ip link del ${TAG}t0
[ $HAVE_NETEM = 1 ] || echo "multihost.sh: no netem qdisc in this kernel: rates shaped with tbf, delays NOT emulated" >&2
RAW=$WORK/raw.csv
: >"$RAW"

# nsrun I CMD...: CMD on host I, under its own UTS namespace named hI.
NSRUN=$WORK/nsrun
cat >"$NSRUN" <<EOF
#!/bin/sh
i=\$1; shift
exec ip netns exec $TAG-\$i unshare --uts sh -c 'hostname h'\$i'; exec "\$@"' sh "\$@"
EOF
# Open MPI's remote shell: "AGENT hI <orted command line>", the line as ssh would hand it to a shell.
AGENT=$WORK/rsh-agent
cat >"$AGENT" <<EOF
#!/bin/sh
host=\$1; shift
i=\${host#h}
exec ip netns exec $TAG-\$i unshare --uts sh -c "hostname \$host; \$*"
EOF
chmod +x "$NSRUN" "$AGENT"

teardown() {
  for i in $(seq 0 7); do
    ip netns del $TAG-$i 2>/dev/null || true
    rm -rf /etc/netns/$TAG-$i
  done
  ip link del ${TAG}br 2>/dev/null || true
}
trap teardown EXIT

# setup H RATE DELAY: H namespaces at 10.233.0.(i+1) on bridge ${TAG}br; each host's veth is
# named hveth inside, and its egress there is shaped: a packet between two hosts passes one
# shaper (the sender's), as with one NIC per host on an unshaped switch.
setup() {
  local hosts=$1 rate=$2 delay=$3
  ip link add ${TAG}br type bridge
  ip link set ${TAG}br up
  for i in $(seq 0 $((hosts - 1))); do
    local ns=$TAG-$i
    ip netns add $ns
    ip link add ${TAG}r$i type veth peer name ${TAG}n$i
    ip link set ${TAG}n$i netns $ns
    ip -n $ns link set ${TAG}n$i name hveth
    ip link set ${TAG}r$i master ${TAG}br
    ip link set ${TAG}r$i up
    ip -n $ns addr add 10.233.0.$((i + 1))/24 dev hveth
    ip -n $ns link set hveth up
    ip -n $ns link set lo up
    if [ "$HAVE_NETEM" = 1 ]; then
      local netem="rate $rate limit 100000"
      [ "$delay" = 0us ] || netem="delay $delay $netem"
      tc -n $ns qdisc add dev hveth root netem $netem
    else
      # Rate only. The burst must hold a GSO packet (64 KiB) and a timer tick's worth at 10 Gbit/s.
      tc -n $ns qdisc add dev hveth root tbf rate $rate burst 2mb latency 50ms
    fi
    # ip netns exec mounts /etc/netns/NAME/hosts over /etc/hosts: every host resolves the others.
    mkdir -p /etc/netns/$ns
    for j in $(seq 0 $((hosts - 1))); do echo "10.233.0.$((j + 1)) h$j"; done >/etc/netns/$ns/hosts
  done
}

# CPU use during a run, as "ours/machine" percent of all cores: ours from the CPU time of this
# shell's reaped children (the ranks; mpirun and, through it, its daemons), the machine's from
# /proc/stat (other users of the machine included).
NCPU=$(nproc)
# Sets SAMPLE; `times` runs in this shell (a $(...) subshell would see no children of its own).
cpu_sample() {
  times >"$WORK/times"
  SAMPLE="$(date +%s.%N) $(tail -1 "$WORK/times" | sed 's/[ms]/ /g' | awk '{print $1*60+$2+$3*60+$4}')"
  SAMPLE+=" $(awk '/^cpu /{print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat)"
}
cpu_busy() {
  echo "$1 $2" | awk -v n=$NCPU '{printf "%.0f/%.0f", 100 * ($6 - $2) / (($5 - $1) * n), 100 * ($7 - $3) / ($8 - $4)}'
}

# record LINK HOSTS CPU FILE: rank 0's RESULT lines, prefixed.
record() { grep "^RESULT," "$4" | sed "s|^|$1,$2,$3,|" >>"$RAW" || true; }

run_tutti() {
  local link=$1 hosts=$2 mode=$3 label=$4 endpoint=$5 security=${6:-off}
  local n=$((hosts * PER_HOST)) out=$WORK/$label-$link-$hosts.out pids=()
  cpu_sample; local before=$SAMPLE
  for r in $(seq 0 $((n - 1))); do
    env TUTTI_COORDINATOR="$endpoint" TUTTI_JOB="$label-$link-$hosts-$$" TUTTI_TOKEN=bench \
      TUTTI_RANK=$r TUTTI_SIZE=$n TUTTI_HIERARCHICAL=$mode TUTTI_TIMEOUT_MS=120000 \
      TUTTI_DATA_SECURITY=$security \
      "$NSRUN" $((r / PER_HOST)) "$ROOT/$BUILD/bench/allreduce_bench" --label "$label" \
      --sizes "$SIZES" --no-step >"$( [ $r = 0 ] && echo "$out" || echo /dev/null)" 2>>"$WORK/tutti.err" &
    pids+=($!)
  done
  wait "${pids[@]}"
  cpu_sample; record "$link" "$hosts" "$(cpu_busy "$before" "$SAMPLE")" "$out"
}

run_mpi() {
  local link=$1 hosts=$2 n=$(($2 * PER_HOST)) out=$WORK/mpi-$1-$2.out
  local hostfile=$WORK/hosts-$hosts
  for i in $(seq 0 $((hosts - 1))); do echo "h$i slots=$PER_HOST"; done >"$hostfile"
  cpu_sample; local before=$SAMPLE
  # mpi_yield_when_idle: every "host" has as many slots as ranks, so Open MPI would busy-poll;
  # on 2 shared cores that would starve the other hosts' ranks (tutti's ranks sleep in poll()).
  "$NSRUN" 0 mpirun --allow-run-as-root --oversubscribe -np $n --hostfile "$hostfile" \
    --mca plm_rsh_agent "$AGENT" --mca pml ob1 --mca btl "$MPI_BTL" \
    --mca btl_tcp_if_include hveth --mca oob_tcp_if_include hveth --mca mpi_yield_when_idle 1 \
    --mca btl_base_verbose 30 "$B/mpi_allreduce" --label mpi-tcp --sizes "$SIZES" --no-step \
    >"$out" 2>"$WORK/mpi-$link-$hosts.err"
  cpu_sample; record "$link" "$hosts" "$(cpu_busy "$before" "$SAMPLE")" "$out"
  # Which BTLs Open MPI opened, on which interface: the proof that nothing crossed a "host"
  # through shared memory.
  echo "  Open MPI BTLs opened (count of ranks): $(grep -ohE 'select: init(ializing)? btl component [a-z]+' \
    "$out" "$WORK/mpi-$link-$hosts.err" | sed 's/.*component //' | sort | uniq -c | tr -s ' ' | paste -sd',' -);" \
    "interfaces: $(grep -ohE 'btl: tcp: Using interface: [a-z0-9]+' "$out" "$WORK/mpi-$link-$hosts.err" |
    sed 's/.*: //' | sort | uniq -c | tr -s ' ' | paste -sd',' -)"
}

for link_spec in $LINKS; do
  rate=${link_spec%%:*} delay=${link_spec#*:}
  link=$rate
  [ "$HAVE_NETEM" = 1 ] && [ "$delay" != 0us ] && link=$rate-$delay
  for hosts in $HOSTS; do
    echo "== $hosts hosts x $PER_HOST ranks, links $link"
    setup "$hosts" "$rate" "$delay"
    "$NSRUN" 0 "$ROOT/$BUILD/tuttid" --bind "tcp://10.233.0.1:*" --log-level warn >"$WORK/tuttid.out" 2>&1 &
    tuttid=$!
    for _ in $(seq 100); do grep -q 'tuttid listening on ' "$WORK/tuttid.out" && break; sleep 0.1; done
    endpoint=$(sed -n 's/.*tuttid listening on //p' "$WORK/tuttid.out" | head -1)
    for variant in $VARIANTS; do
      case $variant in
        flat) run_tutti "$link" "$hosts" 0 tutti-flat "$endpoint" ;;
        hier) run_tutti "$link" "$hosts" 1 tutti-hier "$endpoint" ;;
        flat-integrity|flat-encrypt)
          run_tutti "$link" "$hosts" 0 "tutti-$variant" "$endpoint" "${variant#flat-}" ;;
        mpi) run_mpi "$link" "$hosts" ;;
        *) echo "multihost.sh: unknown variant $variant" >&2; exit 2 ;;
      esac
    done
    kill $tuttid; wait $tuttid 2>/dev/null || true
    teardown
  done
done
grep -c . "$RAW" >/dev/null || { echo "multihost.sh: no results (see $WORK)" >&2; exit 1; }
/usr/bin/env python3 "$ROOT/bench/multihost_report.py" "$RAW" "$DOCS"
