#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds tutti and runs the C example with 4 ranks on an embedded
# coordinator started by tuttirun.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target tuttirun example_process_sets
exec build/tuttirun -np 4 build/example_process_sets
