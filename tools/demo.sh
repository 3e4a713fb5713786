#!/usr/bin/env bash
# The README's main command: installs missing Debian packages, builds, and runs the engine on
# the embedded default benchmark (mm112_208_256), applying LoopTune's published action sequence.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
bazel build //... 
bazel-bin/tools/engine_demo \
  --benchmark=mm112_208_256 \
  --actions=split_4,down,swap_down,down,split_16,swap_up,swap_up,swap_up,split_8 "$@"
