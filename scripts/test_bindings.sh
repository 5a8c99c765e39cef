#!/usr/bin/env bash
# Builds and tests the Rust and Go bindings against BUILD_DIR's libtutti.so, tuttid and tuttirun
# and the header of the checkout BUILD_DIR was configured from, offline (docs/bindings.md):
#   1. Rust: tutti-sys (bindgen at build time) and tutti; `cargo test`: bindgen's layout tests,
#      unit tests, integration tests against a real tuttid, doc tests (one compile_fail);
#   2. Go: gofmt, `go vet`, `go test` (ranks as goroutines against a real tuttid);
#   3. both examples under `tuttirun -np 4`, each checking its own results;
#   4. the mixed-language job: Python, C, Rust and Go ranks in one job and one process set.
# Exits non-zero on any failure. With Debian's toolchains only (rustc 1.63, cargo, bindgen 0.60,
# Go 1.19): /usr/bin comes first, so that a rustup toolchain in ~/.cargo/bin is not used.
# A missing toolchain skips its part here, but fails under CI=true. TUTTI_CARGO and TUTTI_GO
# name other binaries (default /usr/bin/cargo and /usr/bin/go).
# Everything it writes goes to BUILD_DIR/bindings/ (targets, caches, programs).
#
# Usage: bash scripts/test_bindings.sh BUILD_DIR
set -euo pipefail

if [ $# -ne 1 ] || [ ! -f "$1/libtutti.so" ]; then
  echo "usage: $0 BUILD_DIR   (a configured and built tutti build directory)" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "$1" && pwd)
SOURCE=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")
SOURCE=${SOURCE:-$ROOT}
INCLUDE="$SOURCE/capi/include"
OUT="$BUILD/bindings"
mkdir -p "$OUT"
for f in tuttid tuttirun libtutti.so; do
  [ -e "$BUILD/$f" ] || { echo "test_bindings: $BUILD/$f is missing: build tutti first" >&2; exit 2; }
done

export PATH="/usr/bin:/bin:$PATH"
START=$(date +%s)
step() { echo; echo "== test_bindings [$(( $(date +%s) - START )) s]: $*"; }
skipped=()
missing() {  # missing WHAT PACKAGES: fails under CI, else records a skip
  if [ "${CI:-}" = "true" ]; then
    echo "test_bindings: FAIL: $1 not found (CI=true): apt-get install $2" >&2
    exit 1
  fi
  echo "test_bindings: SKIP: $1 not found (apt-get install $2)"
  skipped+=("$1")
}

CARGO_BIN=${TUTTI_CARGO:-/usr/bin/cargo}
GO_BIN=${TUTTI_GO:-/usr/bin/go}
have_rust=1 have_go=1
for tool in "$CARGO_BIN" /usr/bin/rustc bindgen; do
  command -v "$tool" >/dev/null || { missing "$tool" "rustc cargo bindgen libclang-dev"; have_rust=0; }
done
command -v "$GO_BIN" >/dev/null || { missing "$GO_BIN" golang-go; have_go=0; }
/usr/bin/python3 -c "import numpy" 2>/dev/null || missing "python3 with numpy" python3-numpy
command -v cc >/dev/null || missing cc build-essential

# Rust: offline, Debian's compiler, targets inside the build directory.
export CARGO="$CARGO_BIN" RUSTC=/usr/bin/rustc CARGO_NET_OFFLINE=true
export CARGO_HOME="$OUT/cargo-home" CARGO_TARGET_DIR="$OUT/rust-target"
export TUTTI_INCLUDE_DIR="$INCLUDE" TUTTI_LIB_DIR="$BUILD"
# Go: nothing fetched (the modules require nothing; the example replaces the binding with this
# checkout's), caches inside the build directory, cgo pointed at this build.
export GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GO111MODULE=on
export GOCACHE="$OUT/go-cache" GOPATH="$OUT/go-path"
export CGO_CFLAGS="-I$INCLUDE -O2 -g" CGO_LDFLAGS="-L$BUILD -Wl,-rpath,$BUILD"
export TUTTI_BUILD_DIR="$BUILD"
CARGO_FLAGS=(--offline --locked -j"${TUTTI_BINDINGS_JOBS:-1}")

if ((have_rust)); then
  step "rust: $(/usr/bin/rustc --version), $("$CARGO_BIN" --version), $(bindgen --version 2>&1 | head -1)"
  (cd "$ROOT/bindings/rust" && timeout 1200 nice "$CARGO_BIN" build "${CARGO_FLAGS[@]}" --all-targets)
  step "rust: cargo test (bindgen layout tests, unit, integration against tuttid, doc tests)"
  (cd "$ROOT/bindings/rust" && timeout 600 "$CARGO_BIN" test "${CARGO_FLAGS[@]}")
  step "rust: build the example (release) and the mixed job's rank"
  (cd "$ROOT/examples/rust" && timeout 1200 nice "$CARGO_BIN" build "${CARGO_FLAGS[@]}" --release)
  (cd "$ROOT/bindings/rust" && timeout 600 nice "$CARGO_BIN" build "${CARGO_FLAGS[@]}" --example mixed_rank)
fi

if ((have_go)); then
  step "go: $("$GO_BIN" version)"
  unformatted=$(cd "$ROOT" && "$(dirname "$GO_BIN")/gofmt" -l bindings/go examples/go)
  [ -z "$unformatted" ] || { echo "test_bindings: gofmt would change: $unformatted" >&2; exit 1; }
  (cd "$ROOT/bindings/go" && "$GO_BIN" vet ./...)
  (cd "$ROOT/examples/go" && "$GO_BIN" vet ./...)
  step "go: go test (ranks as goroutines against tuttid)"
  (cd "$ROOT/bindings/go" && timeout 600 "$GO_BIN" test -count=1 -timeout 300s -v ./... 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go' ; exit "${PIPESTATUS[0]}")
  (cd "$ROOT/examples/go" && "$GO_BIN" build -o "$OUT/go_process_sets" .)
  (cd "$ROOT/bindings/go" && "$GO_BIN" build -o "$OUT/go_mixed_rank" ./mixedrank)
fi

if ((have_rust)); then
  step "example: tuttirun -np 4 examples/rust (process_sets)"
  timeout 300 "$BUILD/tuttirun" -np 4 "$CARGO_TARGET_DIR/release/process_sets"
fi
if ((have_go)); then
  step "example: tuttirun -np 4 examples/go (process_sets)"
  timeout 300 "$BUILD/tuttirun" -np 4 "$OUT/go_process_sets"
fi

if ((have_rust && have_go)) && [ ${#skipped[@]} -eq 0 ]; then
  step "mixed job: Python, C, Rust and Go ranks in one process set"
  cc -std=c99 -Wall -Wextra -Wpedantic -Werror -O2 -I"$INCLUDE" "$ROOT/tests/bindings/mixed_rank.c" \
    -L"$BUILD" -Wl,-rpath,"$BUILD" -ltutti -o "$OUT/c_mixed_rank"
  timeout 300 /usr/bin/python3 "$ROOT/tests/bindings/mixed_job.py" --build "$BUILD" \
    --c-rank "$OUT/c_mixed_rank" --rust-rank "$CARGO_TARGET_DIR/debug/examples/mixed_rank" \
    --go-rank "$OUT/go_mixed_rank" --python /usr/bin/python3
fi

echo
if [ ${#skipped[@]} -gt 0 ]; then
  echo "test_bindings: passed what ran in $(( $(date +%s) - START )) s; SKIPPED (missing): ${skipped[*]}"
else
  echo "test_bindings: all passed in $(( $(date +%s) - START )) s"
fi
