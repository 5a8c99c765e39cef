#!/usr/bin/env bash
# Whether one TCP stream fills a shaped cross-host link, or several connections per host pair
# would (issue 24): two network namespaces through a bridge, each egress shaped with tbf as
# bench/multihost.sh shapes it (bench/emulated_hosts.sh), iperf3 with 1, 2 and 4 parallel
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

source "$(dirname "$0")/emulated_hosts.sh"
trap 'hosts_down $TAG 2' EXIT

echo "rate,streams,received_gbit_s,sender_cpu_percent"
for rate in $RATES; do
  hosts_up $TAG 2 10.234.0 "$rate"
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
  hosts_down $TAG 2
done
rm -f /tmp/$TAG.json
