#!/bin/bash
# Device run: BERT-base's layers at AVX-512, unblocked and with weights blocked by 32 and 64
# output features, two tuning runs each, three processes on disjoint CPU sets.
R=$PWD; D=$R/.devcarry
export PYTHONPATH=$D/python:$R/client/python PYTHONUNBUFFERED=1
printf '#!/bin/bash\nexport LD_LIBRARY_PATH=%s/lib\nexec %s/looptool "$@"\n' $D $D > $D/lt; chmod +x $D/lt
t0=$(date +%s)
LB="python3 bench/model/layer_bench.py --cli=$D/lt --time-limit=10 --isa=avx512 --dataset=bert_base-v0 --runs=2"
taskset -c 0-4 timeout 230 $LB --out=$OUT/bert_plain.md > $OUT/bert_plain.log 2>&1 &
taskset -c 5-9 timeout 230 $LB --linear-block=32 --out=$OUT/bert_lb32.md > $OUT/bert_lb32.log 2>&1 &
taskset -c 10-15 timeout 230 $LB --linear-block=64 --out=$OUT/bert_lb64.md > $OUT/bert_lb64.log 2>&1 &
(while sleep 30; do echo "$(( $(date +%s) - t0 )) s: $(cut -d' ' -f1-3 /proc/loadavg)"; done) &
wait %1 %2 %3
echo "done $(( $(date +%s) - t0 )) s"; for f in $OUT/*.log; do tail -n 2 $f; done
