# Run 108, last call: the landed form (vec4 loads along any contiguous axis, the
# vec4 variant's k loop unrolled by eight, tile 2 for f32 where its tiles fill a
# large GPU's waves) against the old binary, cuBLAS, the GPT step and PyTorch's.
source .gpu/setup.sh
for b in old new; do gunzip -c .prev/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
OPS=matmul,matmul_at,bmm,gpt_nt,gpt_nn,gpt_tn
for r in 1 2; do for b in old new; do
  echo "### $b run $r"; /tmp/$b --linalg --dtypes f32,bf16 --ops $OPS 2>&1 | grep -E "^wmx|rror"
done; done > $OUT/wmx.txt
(cd bench && python3 torch_linalg.py --ops $OPS) > $OUT/torch.txt 2>&1
for b in old new old new; do echo "### $b"; timeout 100 /tmp/$b --train 2>&1 | grep -E "gpt|rror"; done > $OUT/train.txt
(cd bench && timeout 200 python3 torch_train.py 2>&1 | grep -E "gpt|rror") >> $OUT/train.txt
