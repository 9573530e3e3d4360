// Tile t of a matrix product's grid (parameters as matmul.wgsl's): the first row and
// column of its bm x bn tile, and its batch element's offsets into O (row-major) and
// into A, B and C (through the collapsed batch dims' strides).
struct MmTile { m0: u32, n0: u32, po: u32, pa: u32, pb: u32, pc: u32 }
fn mm_tile(t: u32, bm: u32, bn: u32) -> MmTile {
    let rank = P[4];
    let tiles_n = P[5];
    let per_batch = tiles_n * P[6];
    var bi = t / per_batch;
    let tt = t - bi * per_batch;
    var r = MmTile((tt / tiles_n) * bm, (tt % tiles_n) * bn, bi * P[0] * P[1], P[7], P[10], P[13]);
    for (var d = rank; d > 0u; d--) {
        let s = P[18u + d];
        let q = bi / s;
        let c = bi - q * s;
        bi = q;
        r.pa += c * P[18u + rank + d];
        r.pb += c * P[18u + 2u * rank + d];
        r.pc += c * P[18u + 3u * rank + d];
    }
    return r;
}
