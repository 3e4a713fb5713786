#!/usr/bin/env bash
# Installs the Debian 12 packages LoopTool needs that are missing, and any packages given as
# arguments (tools/fuzz.sh and tools/compilergym_compat.sh name theirs). Idempotent, and silent
# when everything is already there. Both README commands call it first.
set -euo pipefail

packages=(
  # build (gcc and binutils also wrap exported kernels: looptool export); clang-14 for the
  # thread-safety analysis (--config=tsa)
  bazel-bootstrap g++ gcc binutils pkg-config clang-14
  # C++ libraries
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev grpc-proto
  libabsl-dev libxbyak-dev libboost-graph-dev nlohmann-json3-dev libsqlite3-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # references the benchmarks compare against
  libdnnl-dev libopenblas-dev
  # the Halide autoscheduler baselines (bench/halide_bench)
  libhalide14-0-dev
  # Python client and tests (Debian's /usr/bin/python3)
  python3 python3-grpcio python3-protobuf python3-numpy python3-networkx
  # the package's type check (tools/mypy.sh) and its offline pip install (client/python)
  python3-mypy python3-pip python3-setuptools python3-wheel
  # tests/fleet/netns_test (servers on network namespaces)
  iproute2
  # learned tuning (looptool.rl): PyTorch (CPU), Dask distributed, progress bars, plots
  python3-torch python3-distributed python3-tqdm python3-matplotlib
  # the cost model's ranking trees (looptool.rl.plan_cost --trees)
  python3-xgboost
  # whole models (looptool.model): torch.fx extraction of torchvision's networks
  python3-torchvision
  # the caller's own
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [[ "$status" == ii* ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "setup: installing ${#missing[@]} missing Debian packages: ${missing[*]}" >&2
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq -o DPkg::Lock::Timeout=600 >&2
"${sudo[@]}" apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 \
  "${missing[@]}" >&2
