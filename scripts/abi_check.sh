#!/usr/bin/env bash
# Compares the ABI of a built libtutti.so with the committed baseline abi/libtutti.abi, using
# libabigail over the exported tutti_* interfaces and the types of tutti.h (docs/abi-policy.md).
# Any difference fails, additions included: a deliberate change is reviewed by a person, who
# bumps TUTTI_VERSION_MINOR (or MAJOR) and regenerates the baseline with --update. CI never does.
#   bash scripts/abi_check.sh [build/libtutti.so | build/libtutti_mpi.so]
#   bash scripts/abi_check.sh --update [build/libtutti.so]
set -euo pipefail
cd "$(dirname "$0")/.."
update=0
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
library=${1:-build/libtutti.so}
# abi/libtutti.abi for libtutti.so, abi/libtutti_mpi.abi for libtutti_mpi.so.
baseline=abi/$(basename "$library" .so).abi
dump() {
  abidw --headers-dir capi/include/tutti --drop-private-types --exported-interfaces-only \
    --no-show-locs --no-corpus-path "$library"
}
if ((update)); then
  dump > "$baseline"
  echo "abi_check: wrote $baseline from $library; commit it with the version bump"
  exit 0
fi
current=$(mktemp --suffix=.abi)
trap 'rm -f "$current"' EXIT
dump > "$current"
status=0
abidiff "$baseline" "$current" || status=$?
if ((status != 0)); then
  echo "abi_check: $library differs from $baseline (abidiff status $status, above)." >&2
  echo "abi_check: if the change is deliberate and compatible, bump the version and run" >&2
  echo "abi_check:   bash scripts/abi_check.sh --update $library" >&2
  exit 1
fi
echo "abi_check: $library matches $baseline"
