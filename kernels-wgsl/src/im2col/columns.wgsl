// The index arithmetic of convolution columns, shared by the im2col family's
// kernels. Geometry parameters: [n, x0, C, T, per axis a < 3 at 4 + 7a: in, out,
// k, stride, kdil, idil, lo (i32 bits)]; fewer spatial axes have length-1 ones.
// Tap k of output position o reads the input dilated by idil at
// q = o * stride + k * kdil - lo on each axis.

const NONE: u32 = 0xffffffffu;

fn ax(a: u32, f: u32) -> u32 { return P[4u + 7u * a + f]; }

// The input index on axis a that position o and tap k read, or NONE.
fn im2col_src(a: u32, o: u32, k: u32) -> u32 {
    let q = i32(o * ax(a, 3u) + k * ax(a, 4u)) - bitcast<i32>(ax(a, 6u));
    if (q < 0i) { return NONE; }
    var s = u32(q);
    let idil = ax(a, 5u);
    if (idil != 1u) {
        if (s % idil != 0u) { return NONE; }
        s = s / idil;
    }
    return select(NONE, s, s < ax(a, 0u));
}

// The input row (image and position, without the channel) that column row `row`
// (image, position, tap) reads, or NONE.
fn im2col_row(row: u32) -> u32 {
    var r = row / P[3];
    var tap = row - r * P[3];
    let o2 = r % ax(2u, 1u);
    r = r / ax(2u, 1u);
    let o1 = r % ax(1u, 1u);
    r = r / ax(1u, 1u);
    let o0 = r % ax(0u, 1u);
    r = r / ax(0u, 1u);
    let k2 = tap % ax(2u, 2u);
    tap = tap / ax(2u, 2u);
    let k1 = tap % ax(1u, 2u);
    let k0 = tap / ax(1u, 2u);
    let s0 = im2col_src(0u, o0, k0);
    let s1 = im2col_src(1u, o1, k1);
    let s2 = im2col_src(2u, o2, k2);
    if (s0 == NONE || s1 == NONE || s2 == NONE) { return NONE; }
    return ((r * ax(0u, 0u) + s0) * ax(1u, 0u) + s1) * ax(2u, 0u) + s2;
}

// The output position on axis a whose tap k reads input index s, or NONE.
fn col2im_pos(a: u32, s: u32, k: u32) -> u32 {
    let num = i32(s * ax(a, 5u)) + bitcast<i32>(ax(a, 6u)) - i32(k * ax(a, 4u));
    if (num < 0i) { return NONE; }
    var o = u32(num);
    let st = ax(a, 3u);
    if (st != 1u) {
        if (o % st != 0u) { return NONE; }
        o = o / st;
    }
    return select(NONE, o, o < ax(a, 1u));
}

