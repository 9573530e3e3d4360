// The real transform's step (FftReal), shared by its own pass (real.wgsl) and
// the rows kernel's folded form (fft.wgsl). w is W_2m^k of the forward
// transform (w.y = -sin), for rows of m complex points.

fn real_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// rfft: X_k = ((a + b) - i w (a - b)) / 2 from a = Z_(k mod m) and
// b = conj Z_((m-k) mod m) (zb unconjugated).
fn real_forward(a: vec2<f32>, zb: vec2<f32>, w: vec2<f32>) -> vec2<f32> {
    let b = vec2<f32>(zb.x, -zb.y);
    return 0.5 * ((a + b) - real_mul(vec2<f32>(-w.y, w.x), a - b));
}

// irfft: Z_k = (a + b) + i conj(w) (a - b) from a = X_k and b = conj X_(m-k)
// (xb unconjugated), the imaginary parts of X_0 and X_m dropped (k = 0: first).
fn real_inverse(xa: vec2<f32>, xb: vec2<f32>, first: bool, w: vec2<f32>) -> vec2<f32> {
    var a = xa;
    var b = vec2<f32>(xb.x, -xb.y);
    if (first) {
        a.y = 0.0;
        b.y = 0.0;
    }
    return (a + b) + real_mul(vec2<f32>(w.y, w.x), a - b);
}
