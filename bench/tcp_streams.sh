#!/usr/bin/env bash
# Whether one TCP stream fills a shaped cross-host link, or several connections per host pair
# would (issue 24): two network namespaces through a bridge, each egress shaped with tbf as
# bench/multihost.sh shapes it (netem where the kernel has it), iperf3 with 1, 2 and 4 parallel
# streams per link rate. Prints one line per (rate, streams): received Gbit/s and the sender's
# CPU %.
#
#   sudo bench/tcp_streams.sh          # as root, needs iperf3; about 1 minute
# Environment: RATES ("1gbit 10gbit"), STREAMS ("1 2 4"), SECONDS_EACH (5).
set -euo pipefail
RATES=${RATES:-"1gbit 10gbit"}
STREAMS=${STREAMS:-"1 2 4"}
SECONDS_EACH=${SECONDS_EACH:-5}
TAG=tcs$$
[ "$(id -u)" -eq 0 ] || { echo "tcp_streams.sh: needs root (network namespaces, tc)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "tcp_streams.sh: iperf3 is missing (apt-get install iperf3)" >&2; exit 2; }

cleanup() {
  ip link del ${TAG}b 2>/dev/null || true
  for h in 0 1; do ip netns del $TAG-$h 2>/dev/null || true; done
}
trap cleanup EXIT

setup() {  # setup RATE
  ip link add ${TAG}b type bridge
  ip link set ${TAG}b up
  for h in 0 1; do
    ip netns add $TAG-$h
    ip link add ${TAG}r$h type veth peer name ${TAG}n$h
    ip link set ${TAG}n$h netns $TAG-$h
    ip link set ${TAG}r$h master ${TAG}b
    ip link set ${TAG}r$h up
    ip -n $TAG-$h addr add 10.234.0.$((h + 1))/24 dev ${TAG}n$h
    ip -n $TAG-$h link set ${TAG}n$h up
    ip -n $TAG-$h link set lo up
    tc -n $TAG-$h qdisc add dev ${TAG}n$h root tbf rate "$1" burst 2mb latency 50ms
  done
}

echo "rate,streams,received_gbit_s,sender_cpu_percent"
for rate in $RATES; do
  setup "$rate"
  for streams in $STREAMS; do
    # -1: the server serves one test and exits; the client retries until it listens.
    ip netns exec $TAG-1 iperf3 -s -1 >/dev/null 2>&1 &
    server=$!
    for _ in $(seq 50); do
      ip netns exec $TAG-0 iperf3 -c 10.234.0.2 -t "$SECONDS_EACH" -P "$streams" -J >/tmp/$TAG.json 2>/dev/null && break
      sleep 0.1  # the server is not listening yet: retry (not a synchronisation of results)
    done
    wait $server || true
    python3 - "$rate" "$streams" /tmp/$TAG.json <<'PY'
import json, sys
rate, streams, path = sys.argv[1:]
end = json.load(open(path))["end"]
print(f'{rate},{streams},{end["sum_received"]["bits_per_second"] / 1e9:.3f},'
      f'{end["cpu_utilization_percent"]["host_total"]:.1f}')
PY
  done
  cleanup
done
rm -f /tmp/$TAG.json
