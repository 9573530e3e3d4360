#!/usr/bin/env bash
# One benchmark run on the lent H100 (see BENCHMARKS.md): wmx bench and the PyTorch
# reference in the same call, with an nvidia-smi clock log. Needs .gpu/ (from
# shared/gpu/prepare.sh) and target/release/bench carried; writes into $OUT.
set -u
# shellcheck source=/dev/null  # made by ../shared/gpu/prepare.sh, not in git
source .gpu/setup.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv -lms 250 > "$OUT/smi.csv" 2>/dev/null &
smi=$!
./target/release/bench --json "$OUT/wmx.json" "$@" > "$OUT/wmx.log" 2>&1
echo "bench rc=$?"
# A repeat of the large sizes, to see the spread between runs in one call.
./target/release/bench --sizes 2^24,2^26 --chain 0 --json "$OUT/wmx2.json" > "$OUT/wmx2.log" 2>&1
echo "bench repeat rc=$?"
PYTHONUNBUFFERED=1 python3 .gpu/torch_ref.py --json "$OUT/torch.json" > "$OUT/torch.log" 2>&1
echo "torch rc=$?"
kill "$smi"
head -2 "$OUT/wmx.log"
grep -E "n=  (16777216|67108864)" "$OUT/wmx.log" | grep float32 | head -40
grep -E "lazy chain|bench:" "$OUT/wmx.log"
