#!/usr/bin/env bash
# The ibverbs checks, on a machine with an RDMA device (docs/transports.md, "ibverbs"): the one
# command that proves the backend works there. From the repository root, after a build on that
# machine (the build needs libibverbs-dev; ibv_devices comes with ibverbs-utils):
#   bash tests/rdma/device_check.sh            (log and results go to $OUT or ./rdma-out)
# It runs every test of tests/rdma (rdma_tests): the channel checks every backend passes, a
# closed peer, the ring allreduce on 2 and 3 ranks, an abort, a deadline, a point-to-point
# stream, and whole jobs whose results match TCP's bit for bit, all over queue pairs through the
# adapter's loopback. A test that skips fails the check: with a device listed, a skip means
# discovery refused its port, and that is what needs looking at.
# Where ibv_devices lists no device it runs nothing, says so and exits 77 (skipped).
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
out=${OUT:-rdma-out}
mkdir -p "$out"
command -v ibv_devices >/dev/null ||
  { echo "device_check: no ibv_devices (install ibverbs-utils)"; exit 2; }
# ibv_devices prints two header lines, then one device per line; without a kernel module it
# fails with "Failed to get IB devices list: Function not implemented".
listing=$(ibv_devices 2>&1)
devices=$(awk 'NR > 2 && NF { print $1 }' <<< "$listing")
if [[ -z $devices ]]; then
  echo "device_check: no RDMA device (ibv_devices: $(tr '\n' ' ' <<< "$listing")): nothing run" |
    tee "$out/device_check.log"
  exit 77
fi
[[ -x $build/tests/rdma_tests ]] ||
  { echo "device_check: no $build/tests/rdma_tests (cmake --build $build first)"; exit 2; }
statuses=$(mktemp -d)
trap 'rm -rf "$statuses"' EXIT
{
  echo "== $(date -u) on $(hostname)"
  ibv_devices
  # Port states and GIDs: what discovery looks at.
  command -v ibv_devinfo >/dev/null && ibv_devinfo -v 2>&1 | grep -E "hca_id|port:|state|link_layer|GID\[" | head -n 40
  echo "== tests/rdma"
  timeout 540 "$build/tests/rdma_tests" --gtest_color=no --gtest_output=xml:"$out/rdma_tests.xml"
  tests=$?
  echo "== exit $tests"
  echo $tests > "$statuses/tests"
} 2>&1 | tee "$out/device_check.log"
tests=$(cat "$statuses/tests" 2>/dev/null || echo missing)
if [[ $tests != 0 ]]; then
  echo "device_check: FAILED (rdma_tests exit $tests)" | tee -a "$out/device_check.log"
  exit 1
fi
if grep -q '^\[  SKIPPED \]' "$out/device_check.log"; then
  echo "device_check: FAILED: tests skipped although ibv_devices lists $devices (reason above)" |
    tee -a "$out/device_check.log"
  exit 1
fi
echo "device_check: passed on $(echo $devices)" | tee -a "$out/device_check.log"
