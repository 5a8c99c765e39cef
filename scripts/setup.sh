#!/usr/bin/env bash
# Installs what building and testing tutti needs on a Debian 12 machine. Idempotent: only missing
# packages are installed, and apt's lists are refreshed only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libzmq3-dev cppzmq-dev            # control plane transport
  libsodium-dev                     # data-plane handshake (HMAC-SHA256, nonces, session keys)
  libssl-dev                        # data-plane record ciphers (OpenSSL's AES-256-GCM, ChaCha20-Poly1305)
  libtomlplusplus-dev               # tuttid's CURVE key files
  libprotobuf-dev protobuf-compiler # control plane schema
  libgtest-dev                      # tests
  libcli11-dev                      # command-line flags
  libspdlog-dev libfmt-dev          # logging
  nlohmann-json3-dev                # timeline files
  abigail-tools                     # the ABI check against abi/libtutti.abi
  clang libclang-rt-14-dev          # libFuzzer targets (scripts/fuzz.sh)
  libsystemd-dev systemd            # sd_notify for tuttid; systemd-analyze checks its unit
  libcpp-httplib-dev prometheus-cpp-dev   # tuttid's status page and Prometheus endpoint
  chromium                          # the status page, tested in a headless browser
  python3                           # timeline merge tool and its tests
  python3-numpy python3-torch python3-pytest   # the Python package and its tests
  python3-venv python3-setuptools python3-wheel python3-pip  # its pip-install test
  openmpi-bin libopenmpi-dev python3-mpi4py   # MPI mode (libtutti_mpi.so) and its mpirun tests
  slurmd slurmctld slurm-client munge         # a real single-host Slurm in tests/python/test_slurm.py
  libpmix-dev libpmi2-0-dev                   # zero-setup under mpirun and srun (PMIx, PMI2 headers)
  openjdk-17-jre-headless                     # Spark's executors (tests/engines/test_spark.py)
  openssh-server openssh-client iproute2     # tuttirun across hosts: sshds in network namespaces (test_ssh_hosts.py)
  etcd-server                                # the HA group's store; tests/ha starts real etcds
  libibverbs-dev ibverbs-utils               # the ibverbs backend; ibv_devices for tests/rdma/device_check.sh
  rustc cargo bindgen libclang-dev golang-go # the Rust and Go bindings, offline (scripts/test_bindings.sh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all packages present"
fi
