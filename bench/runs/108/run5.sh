# Run 108, fifth call: unr8's seven tiles forced at the step's shapes (run 4 gave
# --sizes, which leaves out the named cases).
source .gpu/setup.sh
gunzip -c .prev/unr8.gz > /tmp/unr8 && chmod +x /tmp/unr8
for t in def 0 1 2 3 4 5 6; do
  if [ $t = def ]; then unset WMX_MATMUL_TILE; else export WMX_MATMUL_TILE=$t; fi
  echo "### tile$t run 1"; /tmp/unr8 --linalg --dtypes f32 --ops bmm,gpt_nt,gpt_nn,gpt_tn 2>&1 | grep -E "^wmx|rror"
done > $OUT/tiles.txt
