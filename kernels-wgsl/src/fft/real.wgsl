// The pass that makes a real transform of n points (a power of two, m = n / 2)
// from a complex one of m: rows of f32 pairs, one output pair an invocation.
//
// Forward (rfft): from Z, the transform of z[j] = x[2j] + i x[2j+1] ([rows, m]
// pairs), X[k] = (a + b) / 2 - i W^k (a - b) / 2 for k <= m ([rows, m + 1]), with
// a = Z[k mod m], b = conj Z[(m - k) mod m], W = exp(-2 pi i / n).
// Inverse (irfft): from X ([rows, m + 1]), Z[k] = (a + b) + i conj(W^k) (a - b) for
// k < m ([rows, m]), with a = X[k], b = conj X[m - k] and the imaginary parts of
// X[0] and X[m] dropped; the inverse transform of Z holds the even and odd points.
// Both times a scale (the step itself in real_step.wgsl).
//
// Parameters: [rows, m, inverse, mul, lo, scale (f32 bits), x0, t0 (pairs)].
// W_n^k from the FFT's table (input b): W_4096^(k mul) when lo is 0 (n <= 4096),
// else W_4096^(k >> lo) W_n^(k mod 2^lo).

fn real_table(j: u32) -> vec2<f32> {
    return bitcast<vec2<f32>>(pb(P[7] + j));
}

fn real_pair(i: u32) -> vec2<f32> {
    return bitcast<vec2<f32>>(pa(P[6] + i));
}

@compute @workgroup_size(WG)
fn fft_real(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let rows = P[0];
    let m = P[1];
    let inverse = P[2] != 0u;
    let lo = P[4];
    let scale = bitcast<f32>(P[5]);
    // Outputs a row: m + 1 forward, m inverse; inputs a row: the other one.
    let width = select(m + 1u, m, inverse);
    let in_width = select(m, m + 1u, inverse);
    let total = rows * width;
    let stride = nwg.x * nwg.y * WG;
    for (var e = (wid.x + wid.y * nwg.x) * WG + lid.x; e < total; e += stride) {
        let r = e / width;
        let k = e - r * width;
        var w: vec2<f32>;
        if (lo == 0u) {
            w = real_table(k * P[3]);
        } else {
            w = real_mul(real_table(k >> lo), real_table(4096u + (k & ((1u << lo) - 1u))));
        }
        var y: vec2<f32>;
        if (inverse) {
            y = real_inverse(real_pair(r * in_width + k), real_pair(r * in_width + m - k), k == 0u, w);
        } else {
            let a = real_pair(r * in_width + select(k, 0u, k == m));
            let b = real_pair(r * in_width + select(m - k, 0u, k == 0u));
            y = real_forward(a, b, w);
        }
        O[e] = bitcast<vec2<u32>>(y * scale);
    }
}
