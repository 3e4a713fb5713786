#!/usr/bin/env bash
# The LoopTune paper's evaluation regenerated on this machine: every search, the built-in policy
# and policy_guided (tune_bench), Halide's autoschedulers (halide_bench), numpy, OpenBLAS and
# oneDNN on the test-split matmuls and shapes off the grid, and on ResNet-18's 3x3 convolution
# layers (every search 10 s on each: their first kernel alone takes seconds), then figures and tables
# (bench/paper/report.py) under bench/results/paper/ (or --out=DIR).
#
#   tools/reproduce.sh            # 25 + 12 matmuls, 10 s per search; 4 convolutions (53 min here)
#   tools/reproduce.sh --quick    # 8 + 4 matmuls, 1 s per search; 1 convolution (4 min 15 s here)
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results/paper
count=25 offgrid=12 limit=10 convs=4
for arg in "$@"; do
  case "$arg" in
    --quick) count=8 offgrid=4 limit=1 convs=1 ;;
    --out=*) out=${arg#*=} ;;
    *) echo "reproduce.sh: unknown argument '$arg' (--quick, --out=DIR)" >&2; exit 2 ;;
  esac
done
searches=greedy1,greedy2,beam2dfs,beam4dfs,beam2bfs,beam4bfs,random,evolution,policy,policy_guided
start=$(date +%s)
tools/setup.sh
bazel build //bench:tune_bench //bench:halide_bench //service:looptool-server //client/python:looptool >&2
mkdir -p "$out"
echo "reproduce: $count test + $offgrid off-grid matmuls ($limit s per search), $convs" \
  "convolutions (10 s per search), into $out" >&2
bazel-bin/bench/tune_bench --searches=$searches --time_limit=$limit --count=$count \
  --offgrid=$offgrid --convs=$convs --conv_time_limit=10 --out="$out"
bazel-bin/bench/halide_bench --count=$count --offgrid=$offgrid --convs=$convs --out="$out"
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 bench/paper/numpy_bench.py --dir "$out"
seconds=$(( $(date +%s) - start ))
PYTHONPATH=bazel-bin/client/python:client/python /usr/bin/python3 bench/paper/report.py --dir "$out" --seconds=$seconds
echo "reproduce: done in $((seconds / 60)) min $((seconds % 60)) s: $out/summary.md" >&2
