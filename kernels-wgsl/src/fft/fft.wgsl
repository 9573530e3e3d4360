// Rows of a discrete Fourier transform, one workgroup a row: the row's f32 pairs
// are loaded in bit-reversed order into workgroup memory, transformed in place by
// log2(n) radix-2 passes, and written out, optionally times four-step twiddles.
//
// Parameters: [rows, n, log2 n, inverse, post, R, N / 4096, x0, t0]: n a power of
// two up to 2048; x0 and t0 the word offsets of x's first pair and of the table
// in their bindings. The table (input b) holds W_4096^k = exp(-2 pi i k / 4096)
// for k < 4096, then (post) W_N^j for j < N / 4096. An inverse conjugates them.
// With post, output k of row r is multiplied by W_N^((r mod R) k).

var<workgroup> FFT_S: array<vec2<f32>, 2048>;

fn fft_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// Entry `j` of the table (conjugated for an inverse).
fn fft_table(j: u32) -> vec2<f32> {
    let e = P[8] + 2u * j;
    let w = vec2<f32>(bitcast<f32>(wb(e)), bitcast<f32>(wb(e + 1u)));
    return select(w, vec2<f32>(w.x, -w.y), P[3] != 0u);
}

@compute @workgroup_size(WG)
fn fft_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[1];
    let logn = P[2];
    let groups = nwg.x * nwg.y;
    for (var row = wid.x + wid.y * nwg.x; row < P[0]; row += groups) {
        let src = P[7] + row * 2u * n;
        for (var i = lid.x; i < n; i += WG) {
            let j = reverseBits(i) >> (32u - logn);
            FFT_S[j] = vec2<f32>(bitcast<f32>(wa(src + 2u * i)), bitcast<f32>(wa(src + 2u * i + 1u)));
        }
        workgroupBarrier();
        for (var s = 1u; s <= logn; s++) {
            // Pass s joins halves of 2^(s-1): W_(2^s)^k = W_4096^(k 4096 / 2^s).
            let half = 1u << (s - 1u);
            let step = 4096u >> s;
            for (var b = lid.x; b < n / 2u; b += WG) {
                let k = b & (half - 1u);
                let i0 = ((b >> (s - 1u)) << s) + k;
                let i1 = i0 + half;
                let v = fft_mul(FFT_S[i1], fft_table(k * step));
                let u = FFT_S[i0];
                FFT_S[i0] = u + v;
                FFT_S[i1] = u - v;
            }
            workgroupBarrier();
        }
        let dst = row * 2u * n;
        for (var k = lid.x; k < n; k += WG) {
            var y = FFT_S[k];
            if (P[4] != 0u) {
                // W_N^t = W_4096^(t / lo) W_N^(t mod lo), lo = N / 4096 (t < N).
                let t = (row % P[5]) * k;
                let lo = P[6];
                y = fft_mul(y, fft_mul(fft_table(t / lo), fft_table(4096u + t % lo)));
            }
            O[dst + 2u * k] = bitcast<u32>(y.x);
            O[dst + 2u * k + 1u] = bitcast<u32>(y.y);
        }
        workgroupBarrier();
    }
}
