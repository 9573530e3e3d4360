// One pass of a discrete Fourier transform: each workgroup transforms C rows of
// n points (a power of two, C n <= 2048) in workgroup memory, radix-2 steps
// done four at a time (radix-16: 16 points an invocation holds in registers)
// and two at a time (radix-4) as the length asks. For an even log2 n of 4 or
// more, each invocation loads the 16 points of a first radix-16 step straight
// from memory; otherwise the rows are loaded in bit-reversed order and an odd
// log2 n's radix-2 step comes first. The outputs are written in natural order,
// optionally times twiddles. Data, table and outputs are f32 pairs read and
// written 8 bytes at a time (Io::pairs).
// Rows and points are addressed through strides, so a multi-pass (four-step)
// transform and transforms along any axis read and write in place of
// transposes, C neighbouring rows at once.
//
// Parameters (in pairs): [rows, n, log2 n, inverse, digit, mul, lo, C, R0, R1,
// x0, ih0, ih1, ih2, is, oh0, oh1, oh2, os, t0, scale (f32 bits)].
// Row r has digits r0 = r mod R0, r1 = (r / R0) mod R1, r2 = r / (R0 R1); its
// point j is read at x0 + r0 ih0 + r1 ih1 + r2 ih2 + j is, its output k written
// at r0 oh0 + r1 oh1 + r2 oh2 + k os. With digit d < 3, output k of a row is
// multiplied by W_N^(r_d k), from the table (input b: W_4096^k for k < 4096, then
// W_N^j for j < N / 4096): W_4096^(e mul) when lo is 0 (N <= 4096), else, with
// lo = log2(N / 4096), W_4096^(e >> lo) W_N^(e mod 2^lo). An inverse conjugates
// the table. With the module's FFT_REAL, a row is a real transform of 2n points
// (FftReal's step, real_step.wgsl, folded in, times scale): forward, its n + 1
// outputs X_k are made from Z_k and Z_(n-k) in workgroup memory; inverse, each
// loaded point Z_j from the inputs X_j and X_(n-j) (n + 1 a row).

// 16 KiB: WebGPU's default limit of workgroup memory.
var<workgroup> FFT_S: array<vec2<f32>, 2048>;

// Slot of index i in FFT_S: with FFT_SWIZZLE (15, set by the module where a
// workgroup holds one or two rows) its low four bits XORed with bits 4-7 and
// 8-11, so that invocations touching indices 16 or 256 apart (the first
// radix-16 step, the bit-reversed stores) meet different banks; else i.
fn fft_at(i: u32) -> u32 {
    return i ^ (((i >> 4u) ^ (i >> 8u)) & FFT_SWIZZLE);
}

fn fft_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// The table's first pair and the inverse flag, read from P once.
var<private> fft_t0: u32;
var<private> fft_inv: bool;

// Entry `j` of the table.
fn fft_entry(j: u32) -> vec2<f32> {
    return bitcast<vec2<f32>>(pb(fft_t0 + j));
}

// Entry `j` of the table, conjugated for an inverse.
fn fft_table(j: u32) -> vec2<f32> {
    let w = fft_entry(j);
    return select(w, vec2<f32>(w.x, -w.y), fft_inv);
}

// v times -i (forward) or +i (inverse): W_4 = exp(-+ 2 pi i / 4).
fn fft_quarter(v: vec2<f32>) -> vec2<f32> {
    return select(vec2<f32>(v.y, -v.x), vec2<f32>(-v.y, v.x), fft_inv);
}

// Point j of the row at `base` (point stride `is`): for a folded irfft, the
// point made from inputs j and n - j.
fn fft_load(base: u32, j: u32, is: u32, n: u32) -> vec2<f32> {
    let x = bitcast<vec2<f32>>(pa(base + j * is));
    if (FFT_REAL && fft_inv) {
        let xb = bitcast<vec2<f32>>(pa(base + (n - j) * is));
        return bitcast<f32>(P[20]) * real_inverse(x, xb, j == 0u, fft_entry(j * (2048u / n)));
    }
    return x;
}

// W_16^m for m < 8 (forward; conjugated for an inverse).
const FFT_W16 = array<vec2<f32>, 8>(
    vec2<f32>(1.0, 0.0),
    vec2<f32>(0.92387953251128674, -0.38268343236508977),
    vec2<f32>(0.70710678118654752, -0.70710678118654752),
    vec2<f32>(0.38268343236508977, -0.92387953251128674),
    vec2<f32>(0.0, -1.0),
    vec2<f32>(-0.38268343236508977, -0.92387953251128674),
    vec2<f32>(-0.70710678118654752, -0.70710678118654752),
    vec2<f32>(-0.92387953251128674, -0.38268343236508977),
);

fn fft_w16(m: u32) -> vec2<f32> {
    let w = FFT_W16[m];
    return select(w, vec2<f32>(w.x, -w.y), fft_inv);
}

// Radix-2 steps s to s + 3 of the 16 points i0 + j hc (j < 16) of one block of
// 16h, k = i0's place in its sixteenth: the step at distance d h multiplies by
// W_(2dh)^(k + (j mod d) h) = W_(2dh)^k W_2d^(j mod d), the first factors from
// the table (squaring W_(16h)^k instead doubled the RMS error), the second
// constants.
fn fft_step16(i0: u32, hc: u32, k: u32, s: u32) {
    var x: array<vec2<f32>, 16>;
    for (var j = 0u; j < 16u; j++) {
        x[j] = FFT_S[fft_at(i0 + j * hc)];
    }
    let w16 = fft_table(k * (512u >> s));
    let w8 = fft_table(k * (1024u >> s));
    let w4 = fft_table(k * (2048u >> s));
    let w2 = fft_table(k * (4096u >> s));
    fft_radix16(&x, w2, w4, w8, w16);
    for (var j = 0u; j < 16u; j++) {
        FFT_S[fft_at(i0 + j * hc)] = x[j];
    }
}

// Four radix-2 steps on 16 points in bit-reversed order, the factors of each
// step's first butterfly given (w2, w4, w8, w16), the rest times constants.
fn fft_radix16(x: ptr<function, array<vec2<f32>, 16>>, w2: vec2<f32>, w4: vec2<f32>, w8: vec2<f32>,
               w16: vec2<f32>) {
    for (var q = 0u; q < 8u; q++) {
        let j = 2u * q;
        let t = fft_mul((*x)[j + 1u], w2);
        (*x)[j + 1u] = (*x)[j] - t;
        (*x)[j] = (*x)[j] + t;
    }
    for (var q = 0u; q < 8u; q++) {
        let m = q & 1u;
        let j = (q >> 1u) * 4u + m;
        let t = fft_mul((*x)[j + 2u], fft_mul(w4, fft_w16(4u * m)));
        (*x)[j + 2u] = (*x)[j] - t;
        (*x)[j] = (*x)[j] + t;
    }
    for (var q = 0u; q < 8u; q++) {
        let m = q & 3u;
        let j = (q >> 2u) * 8u + m;
        let t = fft_mul((*x)[j + 4u], fft_mul(w8, fft_w16(2u * m)));
        (*x)[j + 4u] = (*x)[j] - t;
        (*x)[j] = (*x)[j] + t;
    }
    for (var q = 0u; q < 8u; q++) {
        let t = fft_mul((*x)[q + 8u], fft_mul(w16, fft_w16(q)));
        (*x)[q + 8u] = (*x)[q] - t;
        (*x)[q] = (*x)[q] + t;
    }
}

@compute @workgroup_size(FFT_WG)
fn fft_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    fft_t0 = P[19];
    fft_inv = P[3] != 0u;
    let rows = P[0];
    let n = P[1];
    let logn = P[2];
    let cc = P[7];
    let logc = firstTrailingBit(cc);
    let total = cc * n;
    let groups = nwg.x * nwg.y;
    // Row c's point p lives at FFT_S[fft_at(p * C + c)]: neighbouring
    // invocations touch neighbouring slots whatever C is.
    // Every invocation touches one row of the C (C divides FFT_WG): its digits, input
    // and output bases are worked out once a group of rows.
    let c = lid.x & (cc - 1u);
    for (var g = wid.x + wid.y * nwg.x; g * cc < rows; g += groups) {
        let r = g * cc + c;
        let q = r / P[8];
        let d = vec3<u32>(r % P[8], q % P[9], q / P[9]);
        let in_base = P[10] + d.x * P[11] + d.y * P[12] + d.z * P[13];
        let out_base = d.x * P[15] + d.y * P[16] + d.z * P[17];
        let tw_digit = select(0u, d[min(P[4], 2u)], P[4] < 3u);
        let live = r < rows;
        let is = P[14];
        var s = 1u;
        if (logn >= 4u && (logn & 1u) == 0u) {
            // Steps 1 to 4 straight from memory: block p (of 16 points in
            // bit-reversed order) holds points t + rev4(j) n / 16 for t = rev(p),
            // so invocation t loads neighbouring points (16 loads in flight) and
            // stores its block's results once: no bit-reversed stores, one
            // round trip through workgroup memory and one barrier fewer. (Not
            // for an odd log2 n: its radix-2 step moved last cost 10-30 %.)
            let sixteenth = n >> 4u;
            for (var b = lid.x; b < total / 16u; b += FFT_WG) {
                let t = b >> logc;
                var x: array<vec2<f32>, 16>;
                for (var j = 0u; j < 16u; j++) {
                    x[j] = vec2<f32>(0.0, 0.0);
                    if (live) {
                        x[j] = fft_load(in_base, t + (reverseBits(j) >> 28u) * sixteenth, is, n);
                    }
                }
                let one = vec2<f32>(1.0, 0.0);
                fft_radix16(&x, one, one, one, one);
                let p = select(0u, reverseBits(t) >> (36u - logn), logn > 4u);
                let i0 = (p << 4u) * cc + c;
                for (var j = 0u; j < 16u; j++) {
                    FFT_S[fft_at(i0 + j * cc)] = x[j];
                }
            }
            s = 5u;
        } else {
            // Eight loads in flight an invocation (a loop of constant length the
            // compiler unrolls), then their stores to workgroup memory: loading one
            // point at a time left the memory latency exposed (run 106: loads and
            // stores alone took 65-85% of a pass).
            for (var i0 = lid.x; i0 < total; i0 += 8u * FFT_WG) {
                var v: array<vec2<f32>, 8>;
                for (var t = 0u; t < 8u; t++) {
                    let i = i0 + t * FFT_WG;
                    v[t] = vec2<f32>(0.0, 0.0);
                    if (live && i < total) {
                        v[t] = fft_load(in_base, i >> logc, is, n);
                    }
                }
                for (var t = 0u; t < 8u; t++) {
                    let i = i0 + t * FFT_WG;
                    if (i < total) {
                        FFT_S[fft_at((reverseBits(i >> logc) >> (32u - logn)) * cc + c)] = v[t];
                    }
                }
            }
        }
        workgroupBarrier();
        if ((logn & 1u) == 1u) {
            // One radix-2 step (of pairs), so that radix-16 and radix-4 steps
            // finish the row.
            for (var b = lid.x; b < total / 2u; b += FFT_WG) {
                let i0 = ((b >> logc) << 1u) * cc + c;
                let u = FFT_S[fft_at(i0)];
                let v = FFT_S[fft_at(i0 + cc)];
                FFT_S[fft_at(i0)] = u + v;
                FFT_S[fft_at(i0 + cc)] = u - v;
            }
            workgroupBarrier();
            s = 2u;
        }
        for (; s + 3u <= logn; s += 4u) {
            // Steps s to s + 3 at once: sixteenths of h = 2^(s-1) joined into
            // blocks of 16h, the invocation's 16 points in registers.
            let h = 1u << (s - 1u);
            for (var b = lid.x; b < total / 16u; b += FFT_WG) {
                let bb = b >> logc;
                let k = bb & (h - 1u);
                let p = ((bb >> (s - 1u)) << (s + 3u)) + k;
                fft_step16(p * cc + c, h * cc, k, s);
            }
            workgroupBarrier();
        }
        for (; s < logn; s += 2u) {
            // Steps s and s + 1 at once: halves of h = 2^(s-1) joined into quarters
            // of 4h. W_(2h)^k = W_4096^(k 4096 / 2h), W_(4h)^k likewise.
            let h = 1u << (s - 1u);
            for (var b = lid.x; b < total / 4u; b += FFT_WG) {
                let bb = b >> logc;
                let k = bb & (h - 1u);
                let p = ((bb >> (s - 1u)) << (s + 1u)) + k;
                let i0 = p * cc + c;
                let hc = h * cc;
                let w2 = fft_table(k * (4096u >> s));
                let w4 = fft_table(k * (2048u >> s));
                // Step s: (p, p + h) and (p + 2h, p + 3h), both by W_(2h)^k.
                let a0 = FFT_S[fft_at(i0)];
                let a1 = fft_mul(FFT_S[fft_at(i0 + hc)], w2);
                let a2 = FFT_S[fft_at(i0 + 2u * hc)];
                let a3 = fft_mul(FFT_S[fft_at(i0 + 3u * hc)], w2);
                let b0 = a0 + a1;
                let b1 = a0 - a1;
                let b2 = fft_mul(a2 + a3, w4);
                // W_(4h)^(k + h) = W_(4h)^k W_4.
                let b3 = fft_quarter(fft_mul(a2 - a3, w4));
                // Step s + 1: (p, p + 2h) by W_(4h)^k and (p + h, p + 3h) by W_(4h)^(k+h).
                FFT_S[fft_at(i0)] = b0 + b2;
                FFT_S[fft_at(i0 + 2u * hc)] = b0 - b2;
                FFT_S[fft_at(i0 + hc)] = b1 + b3;
                FFT_S[fft_at(i0 + 3u * hc)] = b1 - b3;
            }
            workgroupBarrier();
        }
        let os = P[18];
        // n + 1 outputs a row for a folded rfft.
        let real_out = FFT_REAL && !fft_inv;
        let outs = select(total, total + cc, real_out);
        // Eight outputs an invocation at once, so their twiddles' table loads
        // overlap too.
        for (var i0 = lid.x; i0 < outs; i0 += 8u * FFT_WG) {
            for (var t = 0u; t < 8u; t++) {
                let i = i0 + t * FFT_WG;
                if (live && i < outs) {
                    let k = i >> logc;
                    var y: vec2<f32>;
                    if (real_out) {
                        let za = FFT_S[fft_at((k & (n - 1u)) * cc + c)];
                        let zb = FFT_S[fft_at(((n - k) & (n - 1u)) * cc + c)];
                        y = bitcast<f32>(P[20]) * real_forward(za, zb, fft_entry(k * (2048u / n)));
                    } else {
                        y = FFT_S[fft_at(k * cc + c)];
                    }
                    if (P[4] < 3u) {
                        let e = tw_digit * k;
                        if (P[5] != 0u) {
                            y = fft_mul(y, fft_table(e * P[5]));
                        } else {
                            // lo is a power of two: P[6] holds its log2.
                            let hi = e >> P[6];
                            let low = e & ((1u << P[6]) - 1u);
                            y = fft_mul(y, fft_mul(fft_table(hi), fft_table(4096u + low)));
                        }
                    }
                    O[out_base + k * os] = bitcast<vec2<u32>>(y);
                }
            }
        }
        workgroupBarrier();
    }
}
