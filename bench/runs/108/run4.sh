# Run 108, fourth call: the candidate (unr8: vec4 loads along any contiguous axis,
# the vec4 variant's k loop unrolled by eight, one workgroup buffer) with each of
# its seven tiles forced, at the step's shapes and square sizes; the GPT step, old
# against unr8, twice.
source .gpu/setup.sh
for b in old unr8; do gunzip -c .prev/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
OPS=matmul,bmm,gpt_nt,gpt_nn,gpt_tn
for t in def 0 1 2 3 4 5 6; do
  if [ $t = def ]; then unset WMX_MATMUL_TILE; else export WMX_MATMUL_TILE=$t; fi
  echo "### tile$t run 1"; /tmp/unr8 --linalg --dtypes f32 --sizes 1024,2048,4096 --ops $OPS 2>&1 | grep -E "^wmx|rror"
done > $OUT/tiles.txt
unset WMX_MATMUL_TILE
for b in old unr8 old unr8; do echo "### $b"; timeout 100 /tmp/$b --train 2>&1 | grep -E "gpt|rror"; done > $OUT/train.txt
