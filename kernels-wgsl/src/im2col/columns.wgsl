// The index arithmetic of convolution columns, shared by the im2col family's
// kernels. Geometry parameters: [n, x0, C, T, per axis a < 3 at 4 + 7a: in, out,
// k, stride, kdil, idil, lo (i32 bits)]; fewer spatial axes have length-1 ones.
// Tap k of output position o reads the input dilated by idil at
// q = o * stride + k * kdil - lo on each axis.
// Also shared: a position's coordinates, and the `_vec` kernels' word split.

const NONE: u32 = 0xffffffffu;

fn ax(a: u32, f: u32) -> u32 { return P[4u + 7u * a + f]; }

// Position r of [N, len0, len1, len2] (lengths: field f of each axis) as
// (p0, p1, p2, image).
fn ax_pos(row: u32, f: u32) -> vec4<u32> {
    var r = row;
    let p2 = r % ax(2u, f);
    r = r / ax(2u, f);
    let p1 = r % ax(1u, f);
    r = r / ax(1u, f);
    return vec4<u32>(r % ax(0u, f), p1, p2, r / ax(0u, f));
}

// Elements 0 (lo) and 1 (hi, 16-bit dtypes) of four words of input A in f32.
struct Split4 { lo: vec4<f32>, hi: vec4<f32> }
fn split4(v: vec4<u32>) -> Split4 {
    let a = x2a(v.x);
    let b = x2a(v.y);
    let c = x2a(v.z);
    let d = x2a(v.w);
    return Split4(vec4<f32>(f32(a.x), f32(b.x), f32(c.x), f32(d.x)),
                  vec4<f32>(f32(a.y), f32(b.y), f32(c.y), f32(d.y)));
}

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
    let pos = row / P[3];
    var tap = row - pos * P[3];
    let o = ax_pos(pos, 1u);
    let k2 = tap % ax(2u, 2u);
    tap = tap / ax(2u, 2u);
    let k1 = tap % ax(1u, 2u);
    let k0 = tap / ax(1u, 2u);
    let s0 = im2col_src(0u, o.x, k0);
    let s1 = im2col_src(1u, o.y, k1);
    let s2 = im2col_src(2u, o.z, k2);
    if (s0 == NONE || s1 == NONE || s2 == NONE) { return NONE; }
    return ((o.w * ax(0u, 0u) + s0) * ax(1u, 0u) + s1) * ax(2u, 0u) + s2;
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

