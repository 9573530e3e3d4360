// Affine quantization in MLX's format. A row is cut into groups of GROUP values;
// a group has a scale s and a bias b (value ~ s q + b, q in 0..2^BITS - 1), and its
// q's are a little-endian bit stream of GW = GROUP * BITS / 32 words (value i at
// bits i * BITS of the stream: 3-, 5- and 6-bit values straddle words).
//
// The prelude gives BITS and GROUP. Parameters:
// - quantize_params / quantize_words: [groups, w0]: one invocation per group
//   of the row-major input (from element w0); params writes (s, b) as two f32 per
//   group, words the group's GW words.
// - dequantize: [n, q0, s0, b0, zero]: one invocation per output word.
// - qmv: [m, n, k, x0, q0, s0, b0]: y[m, n] = sum_k x[m, k] (s q + b)[n, k] for
//   the quantized matrix [n, k] (groups along k) and row-major x [m, k] (m at most
//   QMV_M); a team of TEAM invocations per output row n, each taking every
//   TEAM-th group. 16-bit outputs need n even (a word holds two columns). With
//   one row and 2, 4 or 8 bits, qmv1 (below) takes the words in turn instead.
//   Both: [8] qmv1's team size, [9] the offset of an addend [m, n] (a fifth input,
//   added before the output is rounded: `qmv_add` of the prelude).
// dequantize's `zero` is 0: s * q goes through it so the driver cannot drop its
// rounding to the output dtype (or contract s * q + b into an fma).

const GW: u32 = GROUP * BITS / 32u;
const QMASK: u32 = (1u << BITS) - 1u;

// a / b rounded to nearest even, by long division of the significands: WGSL's
// division may be 2.5 ulp off, and Vulkan's fma need not be fused (llvmpipe's is
// not), so a remainder through fma does not correct it. For finite a and b != 0
// with a normal quotient; other cases take the hardware's division.
fn q_div(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let sign = (ua ^ ub) & 0x80000000u;
    var ea = i32((ua >> 23u) & 0xffu);
    var eb = i32((ub >> 23u) & 0xffu);
    var ma = ua & 0x7fffffu;
    var mb = ub & 0x7fffffu;
    if (ea == 255 || eb == 255 || (ub & 0x7fffffffu) == 0u) { return a / b; }
    if ((ua & 0x7fffffffu) == 0u) { return bitcast<f32>(sign); }
    // Significands with their leading one at bit 23 (subnormals normalised).
    if (ea == 0) { let s = countLeadingZeros(ma) - 8u; ma <<= s; ea = 1 - i32(s); } else { ma |= 0x800000u; }
    if (eb == 0) { let s = countLeadingZeros(mb) - 8u; mb <<= s; eb = 1 - i32(s); } else { mb |= 0x800000u; }
    var e = ea - eb + 127;
    if (ma < mb) { ma <<= 1u; e -= 1; }
    // 25 quotient bits (the last one a guard bit); a remainder left is sticky.
    var q = 0u;
    var r = ma;
    for (var i = 0u; i < 25u; i++) {
        q <<= 1u;
        if (r >= mb) { r -= mb; q |= 1u; }
        r <<= 1u;
    }
    let guard = q & 1u;
    q >>= 1u;
    if (guard == 1u && (r != 0u || (q & 1u) == 1u)) { q += 1u; }
    if (q == 0x1000000u) { q >>= 1u; e += 1; }
    if (e <= 0 || e >= 255) { return a / b; }
    return bitcast<f32>(sign | (u32(e) << 23u) | (q & 0x7fffffu));
}

// round(a / s): the hardware's quotient (within a few ulp) unless it is near a
// tie, where the exact one decides.
fn q_level(a: f32, s: f32) -> f32 {
    let t = a / s;
    if (abs(abs(t - floor(t)) - 0.5) < 1e-3) { return round(q_div(a, s)); }
    return round(t);
}

fn q_finite(v: f32) -> bool { return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u; }

// A group's scale and bias, MLX's rule in f32: the scale spans the group's range
// in 2^BITS - 1 steps, signed so that the edge of larger magnitude is an exact
// multiple of it (then that edge is the bias); NaN for a group with NaN or inf.
fn q_params(base: u32) -> vec2<f32> {
    var lo = ld_a(base);
    var hi = lo;
    var ok = q_finite(lo);
    for (var i = 1u; i < GROUP; i++) {
        let v = ld_a(base + i);
        lo = min(lo, v);
        hi = max(hi, v);
        ok = ok && q_finite(v);
    }
    if (!ok) { return vec2<f32>(nan_f(), nan_f()); }
    let n_bins = f32(QMASK);
    let mask = abs(lo) > abs(hi);
    var scale = max(q_div(hi - lo, n_bins), 1e-7);
    if (!mask) { scale = -scale; }
    let edge = select(hi, lo, mask);
    let q0 = round(q_div(edge, scale));
    var bias = 0.0;
    if (q0 != 0.0) {
        scale = q_div(edge, q0);
        bias = edge;
    }
    return vec2<f32>(scale, bias);
}

@compute @workgroup_size(WG)
fn quantize_params(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                   @builtin(num_workgroups) nwg: vec3<u32>) {
    for (var g = thread_index(lid, wid, nwg); g < P[0]; g += thread_count(nwg)) {
        let sb = q_params(P[1] + g * GROUP);
        O[2u * g] = bitcast<u32>(sb.x);
        O[2u * g + 1u] = bitcast<u32>(sb.y);
    }
}

@compute @workgroup_size(WG)
fn quantize_words(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(num_workgroups) nwg: vec3<u32>) {
    let n_bins = f32(QMASK);
    for (var g = thread_index(lid, wid, nwg); g < P[0]; g += thread_count(nwg)) {
        let base = P[1] + g * GROUP;
        let sb = q_params(base);
        let ok = !isnan_f(sb.x);
        // The stream: `acc` holds the bits of the word being filled from bit 0.
        var acc = 0u;
        var at = 0u;
        var word = g * GW;
        for (var i = 0u; i < GROUP; i++) {
            var q = 0u;
            if (ok) { q = u32(clamp(q_level(ld_a(base + i) - sb.y, sb.x), 0.0, n_bins)); }
            acc |= q << at;
            at += BITS;
            if (at >= 32u) {
                O[word] = acc;
                word += 1u;
                at -= 32u;
                // The bits of q that did not fit (none when at is 0).
                acc = q >> (BITS - at);
            }
        }
    }
}

// Value j (0 <= j < GROUP) of the group whose stream starts at word `w`.
fn q_value(w: u32, j: u32) -> u32 {
    let bit = j * BITS;
    let i = w + (bit >> 5u);
    let sh = bit & 31u;
    var v = wa(i) >> sh;
    if (sh + BITS > 32u) { v |= wa(i + 1u) << (32u - sh); }
    return v & QMASK;
}

// x rounded to the output dtype, through `zero` (see above).
fn q_round(x: f32) -> f32 { return xb(st_o(x) ^ P[4], 0u); }

@compute @workgroup_size(WG)
fn dequantize(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let nw = (n + EPO - 1u) / EPO;
    for (var w = thread_index(lid, wid, nwg); w < nw; w += thread_count(nwg)) {
        var word = 0u;
        if ((w + 1u) * EPO > n) { word = O[w]; }
        for (var j = 0u; j < EPO; j++) {
            let e = w * EPO + j;
            if (e >= n) { break; }
            let g = e / GROUP;
            let q = q_value(P[1] + g * GW, e - g * GROUP);
            // MLX's order: s * q rounded to the dtype, then + b rounded.
            let sq = q_round(ld_b(P[2] + g) * f32(q));
            word = put(word, j, st_o(sq + ld_c(P[3] + g)));
        }
        O[w] = word;
    }
}

// Invocations per output row of qmv (the prelude's QMV_M is its most rows of x:
// 1 or 8).
const TEAM: u32 = 32u;
var<workgroup> qmv_red: array<f32, 2048>;

@compute @workgroup_size(WG)
fn qmv(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
       @builtin(num_workgroups) nwg: vec3<u32>) {
    let m_rows = P[0];
    let n_rows = P[1];
    let k = P[2];
    let groups = k / GROUP;
    let team = lid / TEAM;
    let lane = lid % TEAM;
    let row = (wid.x + wid.y * nwg.x) * (WG / TEAM) + team;
    var acc: array<f32, QMV_M>;
    if (row < n_rows) {
        for (var g = lane; g < groups; g += TEAM) {
            let s = ld_c(P[5] + row * groups + g);
            let b = ld_d(P[6] + row * groups + g);
            let w0 = P[4] + (row * groups + g) * GW;
            let xg = P[3] + g * GROUP;
            // The stream read word by word: `buf` holds `have` unread bits.
            var buf = wb(w0);
            var have = 32u;
            var next = w0 + 1u;
            var xq: array<f32, QMV_M>;
            var xs: array<f32, QMV_M>;
            for (var i = 0u; i < GROUP; i++) {
                var q = 0u;
                if (have >= BITS) {
                    q = buf & QMASK;
                    buf >>= BITS;
                    have -= BITS;
                } else {
                    let nw = wb(next);
                    next += 1u;
                    q = (buf | (nw << have)) & QMASK;
                    buf = nw >> (BITS - have);
                    have = 32u - (BITS - have);
                }
                let qf = f32(q);
                for (var m = 0u; m < QMV_M; m++) {
                    if (m >= m_rows) { break; }
                    let xv = ld_a(xg + m * k + i);
                    xq[m] = fma(xv, qf, xq[m]);
                    xs[m] += xv;
                }
            }
            for (var m = 0u; m < QMV_M; m++) {
                if (m >= m_rows) { break; }
                acc[m] += s * xq[m] + b * xs[m];
            }
        }
    }
    // The team's partial sums, added in a tree (every invocation reaches the
    // barriers).
    for (var m = 0u; m < QMV_M; m++) { qmv_red[m * WG + lid] = acc[m]; }
    workgroupBarrier();
    for (var st = TEAM / 2u; st > 0u; st >>= 1u) {
        if (lane < st) {
            for (var m = 0u; m < QMV_M; m++) {
                qmv_red[m * WG + lid] += qmv_red[m * WG + lid + st];
            }
        }
        workgroupBarrier();
    }
    // Lane j of the team writes output row j's element (16-bit outputs: two
    // columns share a word, so the team's first lane writes even-odd pairs).
    if (row < n_rows && lane < m_rows && (row % EPO) == 0u) {
        var word = 0u;
        for (var j = 0u; j < EPO; j++) {
            if (row + j < n_rows) {
                let at = lane * n_rows + row + j;
                word = put(word, j, st_o(qmv_red[lane * WG + (team + j) * TEAM] + qmv_add(at)));
            }
        }
        O[(lane * n_rows + row) / EPO] = word;
    }
}

// qmv1: one row of x and whole values per word (2, 4 or 8 bits), the same
// parameters plus [7] = 1 where x's offset is even and [8] = log2 of the team
// size (32 to WG invocations: about one per four words of a matrix row). A team
// takes two matrix rows; each lane loads four words of both rows at once (eight
// loads in flight, each load of the team on consecutive words), each x pair once
// for both rows, and folds each word's sums with its group's scale and bias:
// sum_k x (s q + b) = s sum x q + b sum x. The team's sums meet in workgroup
// memory.

// x[k], x[k + 1] for even k: one word of a 16-bit x at an even offset.
fn qx2(k: u32) -> vec2<f32> {
    let i = P[3] + k;
    if (LA == 1u && P[7] == 1u) { return vec2<f32>(x2a(wa(i >> 1u))); }
    return vec2<f32>(f32(ld_a(i)), f32(ld_a(i + 1u)));
}

// Two rows' words at word position w (the first value at k0 = w * 32 / BITS):
// s0 sum x q0 + b0 sum x and the same for row 1, with each row's group scale and
// bias (rows' group offsets gr0, gr1).
fn qmv_word2(a: u32, b: u32, w: u32, gr0: u32, gr1: u32) -> vec2<f32> {
    let k0 = w * (32u / BITS);
    var xq = vec2<f32>(0.0, 0.0);
    var xs = 0.0;
    for (var j = 0u; j < 32u / BITS; j += 2u) {
        let x = qx2(k0 + j);
        let sh0 = j * BITS;
        let sh1 = sh0 + BITS;
        xq.x = fma(x.x, f32((a >> sh0) & QMASK), fma(x.y, f32((a >> sh1) & QMASK), xq.x));
        xq.y = fma(x.x, f32((b >> sh0) & QMASK), fma(x.y, f32((b >> sh1) & QMASK), xq.y));
        xs += x.x + x.y;
    }
    let g = k0 / GROUP;
    return vec2<f32>(ld_c(P[5] + gr0 + g) * xq.x + ld_d(P[6] + gr0 + g) * xs,
                     ld_c(P[5] + gr1 + g) * xq.y + ld_d(P[6] + gr1 + g) * xs);
}

@compute @workgroup_size(WG)
fn qmv1(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let n_rows = P[1];
    let k = P[2];
    let team_size = 1u << P[8];
    let team = lid >> P[8];
    let lane = lid & (team_size - 1u);
    // Two matrix rows per team (the second may be past the end: it reads the first).
    let row = ((wid.x + wid.y * nwg.x) * (WG >> P[8]) + team) * 2u;
    let row1 = min(row + 1u, n_rows - 1u);
    let rw = k / (32u / BITS);
    let gpr = k / GROUP;
    var acc = vec2<f32>(0.0, 0.0);
    if (row < n_rows) {
        let w0 = P[4] + row * rw;
        let w1 = P[4] + row1 * rw;
        let gr0 = row * gpr;
        let gr1 = row1 * gpr;
        // Lane l takes words l, l + T, l + 2T, l + 3T of a block of 4T (each load
        // of the team reads consecutive words), then the next block.
        let t = team_size;
        var w = lane;
        for (; w + 3u * t < rw; w += 4u * t) {
            let a = vec4<u32>(wb(w0 + w), wb(w0 + w + t), wb(w0 + w + 2u * t), wb(w0 + w + 3u * t));
            let b = vec4<u32>(wb(w1 + w), wb(w1 + w + t), wb(w1 + w + 2u * t), wb(w1 + w + 3u * t));
            acc += qmv_word2(a.x, b.x, w, gr0, gr1);
            acc += qmv_word2(a.y, b.y, w + t, gr0, gr1);
            acc += qmv_word2(a.z, b.z, w + 2u * t, gr0, gr1);
            acc += qmv_word2(a.w, b.w, w + 3u * t, gr0, gr1);
        }
        // The last block, short of four words a lane.
        for (; w < rw; w += t) { acc += qmv_word2(wb(w0 + w), wb(w1 + w), w, gr0, gr1); }
    }
    qmv_red[lid] = acc.x;
    qmv_red[WG + lid] = acc.y;
    workgroupBarrier();
    for (var st = team_size / 2u; st > 0u; st >>= 1u) {
        if (lane < st) {
            qmv_red[lid] += qmv_red[lid + st];
            qmv_red[WG + lid] += qmv_red[WG + lid + st];
        }
        workgroupBarrier();
    }
    // The team's first lane writes its two rows (a 16-bit word holds both).
    if (row < n_rows && lane == 0u) {
        let y0 = qmv_red[lid] + qmv_add(row);
        let y1 = qmv_red[WG + lid] + qmv_add(row1);
        if (EPO == 2u) {
            O[row / 2u] = put(put(0u, 0u, st_o(y0)), 1u, st_o(y1));
        } else {
            O[row] = st_o(y0);
            if (row + 1u < n_rows) { O[row + 1u] = st_o(y1); }
        }
    }
}
