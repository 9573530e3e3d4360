// One pass of a discrete Fourier transform: each workgroup transforms C rows of
// n points (a power of two, C n <= 2048) in workgroup memory: the rows are
// loaded in bit-reversed order, transformed in place by log2(n) radix-2 passes
// and written out, optionally times twiddles. Rows and points are addressed
// through strides, so a multi-pass (four-step) transform and transforms along
// any axis read and write in place of transposes, C neighbouring rows at once.
//
// Parameters (in f32 pairs, x0 and t0 in words): [rows, n, log2 n, inverse,
// digit, mul, lo, C, R0, R1, x0, ih0, ih1, ih2, is, oh0, oh1, oh2, os, t0].
// Row r has digits r0 = r mod R0, r1 = (r / R0) mod R1, r2 = r / (R0 R1); its
// point j is read at x0 + r0 ih0 + r1 ih1 + r2 ih2 + j is, its output k written
// at r0 oh0 + r1 oh1 + r2 oh2 + k os. With digit d < 3, output k of a row is
// multiplied by W_N^(r_d k), from the table (input b: W_4096^k for k < 4096, then
// W_N^j for j < N / 4096): W_4096^(e mul) when lo is 0 (N <= 4096), else
// W_4096^(e / lo) W_N^(e mod lo). An inverse conjugates the table.

var<workgroup> FFT_S: array<vec2<f32>, 2048>;

fn fft_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// Entry `j` of the table (conjugated for an inverse).
fn fft_table(j: u32) -> vec2<f32> {
    let e = P[19] + 2u * j;
    let w = vec2<f32>(bitcast<f32>(wb(e)), bitcast<f32>(wb(e + 1u)));
    return select(w, vec2<f32>(w.x, -w.y), P[3] != 0u);
}

// The row's three digits.
fn fft_digits(r: u32) -> vec3<u32> {
    let q = r / P[8];
    return vec3<u32>(r % P[8], q % P[9], q / P[9]);
}

@compute @workgroup_size(WG)
fn fft_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let rows = P[0];
    let n = P[1];
    let logn = P[2];
    let cc = P[7];
    let logc = firstTrailingBit(cc);
    let total = cc * n;
    let groups = nwg.x * nwg.y;
    // Row c's point p lives at FFT_S[p * C + c]: neighbouring invocations touch
    // neighbouring words whatever C is.
    for (var g = wid.x + wid.y * nwg.x; g * cc < rows; g += groups) {
        for (var i = lid.x; i < total; i += WG) {
            let c = i & (cc - 1u);
            let j = i >> logc;
            let r = g * cc + c;
            var v = vec2<f32>(0.0, 0.0);
            if (r < rows) {
                let d = fft_digits(r);
                let at = 2u * (P[10] + d.x * P[11] + d.y * P[12] + d.z * P[13] + j * P[14]);
                v = vec2<f32>(bitcast<f32>(wa(at)), bitcast<f32>(wa(at + 1u)));
            }
            FFT_S[(reverseBits(j) >> (32u - logn)) * cc + c] = v;
        }
        workgroupBarrier();
        for (var s = 1u; s <= logn; s++) {
            // Pass s joins halves of 2^(s-1): W_(2^s)^k = W_4096^(k 4096 / 2^s).
            let half = 1u << (s - 1u);
            let step = 4096u >> s;
            for (var b = lid.x; b < total / 2u; b += WG) {
                let c = b & (cc - 1u);
                let bb = b >> logc;
                let k = bb & (half - 1u);
                let p0 = ((bb >> (s - 1u)) << s) + k;
                let i0 = p0 * cc + c;
                let i1 = i0 + half * cc;
                let v = fft_mul(FFT_S[i1], fft_table(k * step));
                let u = FFT_S[i0];
                FFT_S[i0] = u + v;
                FFT_S[i1] = u - v;
            }
            workgroupBarrier();
        }
        for (var i = lid.x; i < total; i += WG) {
            let c = i & (cc - 1u);
            let k = i >> logc;
            let r = g * cc + c;
            if (r < rows) {
                let d = fft_digits(r);
                var y = FFT_S[k * cc + c];
                if (P[4] < 3u) {
                    let e = d[P[4]] * k;
                    if (P[6] == 0u) {
                        y = fft_mul(y, fft_table(e * P[5]));
                    } else {
                        y = fft_mul(y, fft_mul(fft_table(e / P[6]), fft_table(4096u + e % P[6])));
                    }
                }
                let at = 2u * (d.x * P[15] + d.y * P[16] + d.z * P[17] + k * P[18]);
                O[at] = bitcast<u32>(y.x);
                O[at + 1u] = bitcast<u32>(y.y);
            }
        }
        workgroupBarrier();
    }
}
