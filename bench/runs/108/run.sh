# Run 108: the tiled f32 kernel with two workgroup buffers and vec4 loads along
# any contiguous axis (old and new binaries, a tile sweep, cuBLAS, the GPT step).
set -x
source .gpu/setup.sh
for b in old new; do gunzip -c .prev/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
OPS=matmul,matmul_at,bmm,gpt_nt,gpt_nn,gpt_tn
/tmp/old --linalg --dtypes f32 --ops $OPS > $OUT/old.txt 2>&1
/tmp/new --linalg --dtypes f32 --ops $OPS > $OUT/new.txt 2>&1
(cd bench && python3 torch_linalg.py --ops $OPS) > $OUT/torch.txt 2>&1
for t in 0 1 4 5 6; do WMX_MATMUL_TILE=$t /tmp/new --linalg --dtypes f32 --ops gpt_nt,gpt_nn,gpt_tn > $OUT/tile$t.txt 2>&1; done
/tmp/old --linalg --dtypes f32 --ops $OPS > $OUT/old2.txt 2>&1
/tmp/new --linalg --dtypes f32 --ops $OPS > $OUT/new2.txt 2>&1
