#!/usr/bin/env bash
# Builds tutti with ThreadSanitizer (build-tsan) and runs the tests whose processes are
# multi-threaded: the runtime's I/O thread and lanes (client/), the data plane's transports and its
# acceptor thread, and tuttirun with its embedded coordinator thread
# (docs/fuzzing-and-sanitizers.md says which tests and why).
#
#   bash scripts/tsan.sh [extra ctest arguments]
#
# Every process of a test (the test program, tuttid, each rank, tuttirun) is built with TSan and
# inherits TSAN_OPTIONS. A report makes that process exit at once with status 66
# (halt_on_error=1), which fails a rank and hence its test. A report in a process whose exit status
# no test looks at (tuttid, say) must not go unnoticed either: every report is also written to a
# file under $build/tsan-reports, and any such file fails this script.
#
# Environment: TUTTI_TSAN_BUILD_DIR (default build-tsan), JOBS (build parallelism, default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${TUTTI_TSAN_BUILD_DIR:-build-tsan}
jobs=${JOBS:-$(nproc)}

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTUTTI_TSAN=ON -DTUTTI_GPU=OFF
fi

# The test programs whose tests start threads (with what they run: tuttid, the workers, tuttirun),
# those of them this tree has; not the pure unit tests nor the benchmarks.
programs=()
targets=$(cmake --build "$build" --target help)
for program in multiproc_tests client_tests tuttirun_test device_tests gpu_sim_tests tutti_gpu_sim \
               gpu_conformance_tests; do
  if grep -q "^$program: " <<<"$targets"; then programs+=("$program"); fi
done
cmake --build "$build" -j "$jobs" --target "${programs[@]}"

# The multi-threaded tests that matter, about 3 minutes under TSan on 2 cores:
#  - CApi, Allreduce, Collectives, Grouped, PointToPoint, Join, Priorities: the runtime's I/O
#    thread, lanes and request completion, over every collective and the C ABI;
#  - ProcessSets, Fusion: lanes opened and closed while others run, fused buffers;
#  - Failures, Failures/CoordinatorLoss, ShmCleanup, StallInspector: lanes aborted from the I/O
#    thread on a fault, a lost coordinator;
#  - Transport, Transports/PointToPointOver, TwoHosts, Handshake: both data-plane backends, chosen
#    per pair, and the device's acceptor thread;
#  - Curve: tuttid and the ranks with CURVE authentication;
#  - Elastic: a re-formation applied on the I/O thread while lanes and submissions run;
#  - SteadyState: the members' fast path, where lanes read and take from the link's book while
#    application threads submit into it and the I/O thread applies grants;
#  - Tuttirun: tuttirun's coordinator thread next to its rank-supervising main thread;
#  - GpuSim, StagedResults, StagedScaling: device lanes (staging, the NCCL id mailbox fed by the
#    I/O thread, stream waits, results read by the application as the lane publishes them)
#    through the simulated GPU module, whose streams run on an executor thread of their own;
#  - NcclPointToPoint: device send and recv on the simulated NCCL path, the channel threads'
#    offers and answers, a pair's communicator, and a recv's wait ended by a lost peer;
#  - Conformance, CopyTransforms: the simulator's executor against the threads that queue,
#    record and wait;
#  - RequestWait (client_tests): a waiter polling a request (TUTTI_WAIT_SPIN_US) while another
#    thread completes it;
#  - CoordinatorLink, RingAllreduce, DirectAllreduce, TcpChannel, ShmChannel (client_tests): the
#    link's I/O thread against an in-process coordinator thread, ring and relay over real contexts
#    on one thread per rank, both channels on their own.
# Left out: large payloads (Ranks/Transports, Collectives.Large64MiBOnTheWorld: a minute each
# under TSan, moving more bytes through the same interleavings), and what exercises a
# single-threaded tuttid alone (Jobs, BadFrames, Floods, Tuttid).
tests='^(CApi|Elastic|Allreduce|Collectives|Grouped|PointToPoint|Join|Priorities|ProcessSets|Fusion|SteadyState|Failures|Failures/CoordinatorLoss|ShmCleanup|StallInspector|Transport|Transports/PointToPointOver|TwoHosts|Handshake|Curve|Tuttirun|GpuSim|NcclPointToPoint|EveryDType/StagedResults|StagedScaling|Conformance|EveryDType/CopyTransforms|RequestWait|CoordinatorLink|RingAllreduce|DirectAllreduce|TcpChannel|ShmChannel|ModesAndCiphers/SealedChannelTest|SealedStream|ManInTheMiddle|DataSecurity)\.'
large='^Collectives\.Large'

# Only tests of those programs: unit_tests has suites of the same names (Fusion, Priorities) whose
# pure units TSan has nothing to say about. ctest -I takes the chosen tests by number.
numbers=$(ctest --test-dir "$build" --show-only=json-v1 | /usr/bin/python3 -c '
import json, os, re, sys
pattern, large, programs = re.compile(sys.argv[1]), re.compile(sys.argv[2]), sys.argv[3:]
tests = json.load(sys.stdin)["tests"]
print(",".join(str(i + 1) for i, t in enumerate(tests)
               if pattern.search(t["name"]) and not large.search(t["name"]) and t.get("command")
               and os.path.basename(t["command"][0]) in programs))
' "$tests" "$large" "${programs[@]}")
if [ -z "$numbers" ]; then
  echo "tsan.sh: no test matches $tests" >&2
  exit 1
fi

reports="$(cd "$build" && pwd)/tsan-reports"
rm -rf "$reports"
mkdir -p "$reports"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp:log_path=$reports/report"

status=0
ctest --test-dir "$build" -I "0,0,0,$numbers" --output-on-failure --timeout 300 "$@" || status=$?

shopt -s nullglob
found=("$reports"/report.*)
if [ ${#found[@]} -gt 0 ]; then
  echo "=== ThreadSanitizer reported in ${#found[@]} processes:"
  for report in "${found[@]}"; do
    echo "--- $report"
    cat "$report"
  done
  exit 1
fi
exit "$status"
