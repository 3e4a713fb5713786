#!/bin/bash
# Device run: layer_bench of resnet18-v0, bert_base-v0 (3 runs), mobilenet_v2-v0 at AVX-512,
# three processes on disjoint CPU sets (kernel worker = the highest CPU of each set).
R=$PWD; D=$R/.devcarry
export PYTHONPATH=$D/python:$R/client/python PYTHONUNBUFFERED=1
printf '#!/bin/bash\nexport LD_LIBRARY_PATH=%s/lib\nexec %s/looptool "$@"\n' $D $D > $D/lt; chmod +x $D/lt
lscpu | grep -E 'Model name|^CPU\(s\)|Thread|L1d|L2|L3|MHz'; grep -o -m1 -w 'avx512f' /proc/cpuinfo; gcc --version | head -1
python3 -c "import torch, torchvision, numpy, grpc, google.protobuf as p; print(torch.__version__, torchvision.__version__, numpy.__version__, grpc.__version__, p.__version__)"
ldd $D/looptool | grep 'not found'
S=/tmp/s; mkdir -p $S && printf 'C[m,n] += A[m,k] * B[k,n]\nm=64 n=64 k=64\n' > $S/mm.lt
t0=$(date +%s)
$D/lt tune --benchmark=$S/mm.lt --time_limit=1 --isa=avx512 --store=$S/st.db --json --eval_cores=15 > $S/t.json || exit 1; tail -c 300 $S/t.json
$D/lt export --store=$S/st.db --output=$S/lib --library=s --benchmark=$S/mm.lt --isa=avx512 --eval_cores=15 || exit 1
python3 - <<'EOF' || exit 1
import sys; sys.path.insert(0, "bench/model")
import looptool.kernels, torch, torchvision
from looptool.model.commands import kernel_call
lib = looptool.kernels.load("/tmp/s/lib"); k = next(iter(lib.values())); kernel_call(k)(); print("kernel ok")
import layer_bench
for ref in ["conv2d input=1x16x10x10 weight=32x16x3x3 stride=2 dilation=1 groups=1", "linear input=4x8 weight=16x8"]:
    a, b = layer_bench.reference_ops(ref); a(); b(); print("ref ok", ref.split()[0])
print(len(layer_bench.channels_last_programs("resnet18-v0")), "nhwc programs")
EOF
echo "sanity $(( $(date +%s) - t0 )) s"
LB="python3 bench/model/layer_bench.py --cli=$D/lt --time-limit=10 --isa=avx512"
taskset -c 0-4 timeout 560 $LB --dataset=resnet18-v0 --layout=nhwc --out=$OUT/resnet18.md > $OUT/resnet18.log 2>&1 &
taskset -c 5-9 timeout 560 $LB --dataset=bert_base-v0 --runs=3 --out=$OUT/bert.md > $OUT/bert.log 2>&1 &
taskset -c 10-15 timeout 560 $LB --dataset=mobilenet_v2-v0 --layout=nhwc --ref-seconds=0.5 --out=$OUT/mobilenet.md > $OUT/mobilenet.log 2>&1 &
(while sleep 30; do echo "$(( $(date +%s) - t0 )) s: $(cut -d' ' -f1-3 /proc/loadavg)"; done) &
wait %1 %2 %3
echo "done $(( $(date +%s) - t0 )) s"; tail -2 $OUT/*.log
