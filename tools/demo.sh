#!/usr/bin/env bash
# The README's main command: installs missing Debian packages, builds the server and the CLI, and
# tunes the embedded default benchmark (LoopTune's mm112_208_256) end to end: `looptool tune`
# starts a LoopTool server on 127.0.0.1, searches (evolution, the default, 10 s) through it over
# gRPC and prints the best schedule, its GFLOPS, % of peak and speed-up over the start state.
# Extra arguments go to `looptool tune` (e.g. --search=random --time-limit=5 --json).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bazel build //service:looptool-server //client/cpp:looptool
bazel-bin/client/cpp/looptool tune \
  --benchmark=benchmark://mm64_256_16_range-v0/mm112_208_256 \
  --search=evolution --time-limit=10 "$@"
