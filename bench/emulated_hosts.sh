# Sourced by the benchmarks that need several "hosts" on one machine (bench/tcp_streams.sh,
# bench/compression.sh): network namespaces joined by veth pairs through one bridge, each host's
# egress shaped, so that a packet between two hosts passes one shaper (the sender's).
#
#   hosts_up TAG COUNT SUBNET RATE [DELAY]   namespaces TAG-0 .. TAG-(COUNT-1), host i at
#                                            SUBNET.(i+1) on interface TAGn<i>; sets HOSTS_LINK
#                                            to a label of the shaping applied
#   hosts_down TAG COUNT                     removes them (safe to call twice, or after a failure)
# Shaping: netem with RATE (and DELAY) where the kernel has it; otherwise tbf with RATE only,
# and HOSTS_LINK says "no delay". Needs root.

hosts_down() {
  local tag=$1 count=$2 i
  ip link del ${tag}b 2>/dev/null || true
  for ((i = 0; i < count; i++)); do ip netns del $tag-$i 2>/dev/null || true; done
}

hosts_up() {
  local tag=$1 count=$2 subnet=$3 rate=$4 delay=${5:-0us} i shaping
  shaping="tbf rate $rate burst 2mb latency 50ms"
  HOSTS_LINK="$rate (tbf; no delay)"
  if ip link add ${tag}t0 type veth peer name ${tag}t1 2>/dev/null &&
     tc qdisc add dev ${tag}t0 root netem delay 1us 2>/dev/null; then
    shaping="netem rate $rate limit 100000"
    HOSTS_LINK="$rate (netem)"
    if [ "$delay" != 0us ]; then
      shaping="netem delay $delay rate $rate limit 100000"
      HOSTS_LINK="$rate, $delay (netem)"
    fi
  fi
  ip link del ${tag}t0 2>/dev/null || true
  ip link add ${tag}b type bridge
  ip link set ${tag}b up
  for ((i = 0; i < count; i++)); do
    ip netns add $tag-$i
    ip link add ${tag}r$i type veth peer name ${tag}n$i
    ip link set ${tag}n$i netns $tag-$i
    ip link set ${tag}r$i master ${tag}b
    ip link set ${tag}r$i up
    ip -n $tag-$i addr add $subnet.$((i + 1))/24 dev ${tag}n$i
    ip -n $tag-$i link set ${tag}n$i up
    ip -n $tag-$i link set lo up
    tc -n $tag-$i qdisc add dev ${tag}n$i root $shaping
  done
}
