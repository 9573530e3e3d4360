// ---- matmul: out = alpha a @ b (+ beta c), 16 x 16 tiles, one output per
// invocation. Parameters [m, n, k, batches, rank_batch, off_a, off_b, off_c,
// alpha (2 words), beta (2 words), sam, sak, sbk, sbn, scm, scn, has_c,
// batch shape, batch strides of a, b, c]. A, B: the operands; C (binding 4):
// the addend (A again when there is none).

var<workgroup> TA_: array<array<f64, 16>, 16>;
var<workgroup> TB_: array<array<f64, 16>, 16>;

@compute @workgroup_size(16, 16)
fn matmul(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    let m = P[0];
    let n = P[1];
    let kk = P[2];
    let rb = P[4];
    let alpha = from_bits(P[8], P[9]);
    let beta = from_bits(P[10], P[11]);
    let tm = (m + 15u) / 16u;
    let tn = (n + 15u) / 16u;
    let tiles = tm * tn * P[3];
    for (var g = wid.x + wid.y * nwg.x; g < tiles; g += nwg.x * nwg.y) {
        let bi = g / (tm * tn);
        let ti = (g % (tm * tn)) / tn;
        let tj = g % tn;
        let oa = loc(bi, rb, 19u, 19u + rb, P[5]);
        let ob = loc(bi, rb, 19u, 19u + 2u * rb, P[6]);
        let row = ti * 16u + lid.y;
        let col = tj * 16u + lid.x;
        var acc = 0.0lf;
        for (var k0 = 0u; k0 < kk; k0 += 16u) {
            var va = 0.0lf;
            var vb = 0.0lf;
            if (row < m && k0 + lid.x < kk) { va = A[oa + row * P[12] + (k0 + lid.x) * P[13]]; }
            if (col < n && k0 + lid.y < kk) { vb = B[ob + (k0 + lid.y) * P[14] + col * P[15]]; }
            TA_[lid.y][lid.x] = va;
            TB_[lid.y][lid.x] = vb;
            workgroupBarrier();
            for (var q = 0u; q < 16u; q++) { acc = fma(TA_[lid.y][q], TB_[q][lid.x], acc); }
            workgroupBarrier();
        }
        if (row < m && col < n) {
            var r = alpha * acc;
            if (P[18] != 0u) {
                let oc = loc(bi, rb, 19u, 19u + 3u * rb, P[7]);
                r = fma(beta, C[oc + row * P[16] + col * P[17]], r);
            }
            O[bi * m * n + row * n + col] = r;
        }
    }
}
