# Run 108, second call: the landing candidate (vec: vec4 loads along any contiguous
# axis, one workgroup buffer) against the old binary, and two inner-loop variants
# (pre: the next k's fragments read before this k's FMAs; unr: the k loop unrolled
# by four through a function on an accumulator array). Each binary twice.
source .gpu/setup.sh
for b in old vec pre unr; do gunzip -c .prev/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
OPS=matmul,matmul_at,gpt_nt,gpt_nn,gpt_tn
for r in 1 2; do for b in old vec pre unr; do
  echo "### $b run $r"; /tmp/$b --linalg --dtypes f32,bf16 --ops $OPS 2>&1 | grep -E "^wmx|rror"
done; done > $OUT/wmx.txt
(cd bench && python3 torch_linalg.py --ops $OPS) > $OUT/torch.txt 2>&1
