# Run 109: f32 products of up to one wave of tiles split along K by waves (split)
# against run 108's landed binary (base), twice each; the GPT step both; a profile
# of split's compiled f32 step.
source .gpu/setup.sh
for b in base split; do gunzip -c .prev/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
OPS=matmul,gpt_nt,gpt_nn,gpt_tn
for r in 1 2; do for b in base split; do
  echo "### $b run $r"; /tmp/$b --linalg --dtypes f32 --ops $OPS 2>&1 | grep -E "^wmx|rror"
done; done > $OUT/wmx.txt
for b in base split base split; do echo "### $b"; timeout 100 /tmp/$b --train 2>&1 | grep -E "gpt|rror"; done > $OUT/train.txt
WMX_BENCH_PROFILE=1 timeout 150 /tmp/split --train > $OUT/profile.txt 2>&1
