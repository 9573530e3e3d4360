# Run 108, third call: the k loop unrolled by eight in the vec4 variant (unr8), the
# same with two workgroup buffers (db), against unr (by four) and the old binary;
# a tile sweep of db at the step's shapes; the GPT step, old against db.
source .gpu/setup.sh
for b in old unr unr8 db; do gunzip -c .prev/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
OPS=matmul,matmul_at,gpt_nt,gpt_nn,gpt_tn
for b in old unr unr8 db; do
  echo "### $b run 1"; /tmp/$b --linalg --dtypes f32,bf16 --ops $OPS 2>&1 | grep -E "^wmx|rror"
done > $OUT/wmx.txt
for t in 0 1 5 6; do
  echo "### tile$t run 1"; WMX_MATMUL_TILE=$t /tmp/db --linalg --dtypes f32 --ops gpt_nt,gpt_nn,gpt_tn 2>&1 | grep -E "^wmx|rror"
done > $OUT/tiles.txt
for b in old db old db; do echo "### $b"; timeout 100 /tmp/$b --train 2>&1 | grep -E "gpt|rror"; done > $OUT/train.txt
