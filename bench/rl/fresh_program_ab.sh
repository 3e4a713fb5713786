#!/bin/bash
# fresh_program_ab: two client binaries' first `looptool tune` of programs no server has seen:
# each binary gets its own server (started once, with SERVER_FLAGS), and tunes each program
# once, so every tuning is the program's first on that server (its reference run, buffers and
# first timings not yet paid). Prints per program each binary's GFLOPS / states timed.
# The programs are outside the policies' evaluation sets and records: power-of-two and large
# transposes, reductions, a GEMV, a CHW max pool, a large add, a depthwise convolution.
#
#   bench/rl/fresh_program_ab.sh OLD_CLI NEW_CLI ["--search=policy"] ["--isa=avx2"]
set -euo pipefail
old=$1 new=$2 search=${3:---search=policy} server_flags=${4:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
w() { printf '%s\n%s\n' "$2" "$3" > "$dir/$1.txt"; }
w t256_2048 'B[n,m] = A[m,n]' 'n=256 m=2048'
w t2048_256 'B[n,m] = A[m,n]' 'n=2048 m=256'
w t512_512 'B[n,m] = A[m,n]' 'n=512 m=512'
w t1024_1024 'B[n,m] = A[m,n]' 'n=1024 m=1024'
w t128_4096 'B[n,m] = A[m,n]' 'n=128 m=4096'
w t768_3072 'B[n,m] = A[m,n]' 'n=768 m=3072'
w hwc_chw_128_32 'B[c,h,w] = A[h,w,c]' 'c=128 h=32 w=32'
w chw_hwc_256_16 'B[h,w,c] = A[c,h,w]' 'c=256 h=16 w=16'
w rowsum_4096_256 's[m] += A[m,n]' 'm=4096 n=256'
w colsum_256_4096 's[n] += A[m,n]' 'm=256 n=4096'
w gemv_4096_1024 'y[m] += A[m,k] * x[k]' 'm=4096 k=1024'
w maxpool_128_28 'O[c,h,w] max= I[c,2*h+r,2*w+s]' 'c=128 h=28 w=28 r=3 s=3'
w add_2048_1024 'C[m,n] = A[m,n] + B[m,n]' 'm=2048 n=1024'
w dw_64_56 'O[c,h,w] += I[c,h+r,w+s] * W[c,r,s]' 'c=64 h=56 w=56 r=3 s=3'
for port in 50091 50092; do
  # shellcheck disable=SC2086
  "$root/bazel-bin/service/looptool-server" $server_flags --port=$port \
    > "$dir/server_$port.log" 2>&1 &
done
# Each server new: one that cannot listen (the port taken by another, which may have seen the
# programs) ends the run.
for port in 50091 50092; do
  for _ in $(seq 50); do grep -q listening "$dir/server_$port.log" && break; sleep 0.2; done
  grep -q listening "$dir/server_$port.log" || { cat "$dir/server_$port.log" >&2; exit 1; }
done
for f in "$dir"/*.txt; do
  line=$(basename "$f" .txt)
  for side in old:50091 new:50092; do
    cli=$old; [ "${side%%:*}" = new ] && cli=$new
    # shellcheck disable=SC2086
    r=$("$cli" tune --server=127.0.0.1:${side#*:} --benchmark="$f" $search --policy=loop_set \
          --json 2>/dev/null | /usr/bin/python3 -c "import json, sys
d = json.load(sys.stdin)
print('%.2f/%d' % (d['gflops'], d['states_evaluated']))") || r=failed
    line="$line ${side%%:*}=$r"
  done
  echo "$line"
done
