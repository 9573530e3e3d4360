// Matrix-vector products (bandwidth-bound): y[b, i] = alpha * sum_k A[b, i, k] v[b, k]
// + beta * C[b, i], accumulated in f32. A matrix times a vector and a vector times a
// matrix are both this form (the host swaps B's axes for the second).
//
// - gemv_rows / gemv_rows_v: one workgroup per output row, its invocations striding
//   along k (contiguous in A): element loads, or vec4-of-words loads when A's rows
//   and v are contiguous and aligned. With `raw` (flag bit 3) the plain sums go to
//   an f32 buffer for gemv_fin (16-bit outputs: two rows share a word).
// - gemv_cols: for A contiguous along i: each invocation owns one row i and a chunk
//   of k (coalesced across invocations); partial sums go to an f32 buffer
//   [chunk][row], which gemv_fin adds up.
// - gemv_fin: one invocation per output word: sums the chunks, applies alpha, beta
//   and C, and packs the word.
//
// Parameters (u32 words; strides and offsets in elements, i32 bits, wrapping):
//  0 I, 1 K, 2 rows (batch * I), 3 batch rank R, 4 a_off, 5 a_si, 6 a_sk, 7 v_off,
//  8 v_sk, 9 c_off, 10 c_si, 11 alpha (f32 bits), 12 beta (f32 bits), 13 flags
//  (bit 2: C is read, bit 3: raw sums), 14 chunks, 15 k per chunk,
//  16.. batch shape[R], A batch strides[R], v batch strides[R], C batch strides[R].

var<workgroup> gv_red: array<f32, 256>;

// Offsets of row `row`'s matrix row, vector and C element.
fn gv_offsets(row: u32) -> vec3<u32> {
    let i_dim = P[0];
    let rank = P[3];
    var bi = row / i_dim;
    let i = row - bi * i_dim;
    var pa = P[4] + i * P[5];
    var pv = P[7];
    var pc = P[9] + i * P[10];
    for (var d = rank; d > 0u; d--) {
        let s = P[15u + d];
        let q = bi / s;
        let c = bi - q * s;
        bi = q;
        pa += c * P[15u + rank + d];
        pv += c * P[15u + 2u * rank + d];
        pc += c * P[15u + 3u * rank + d];
    }
    return vec3<u32>(pa, pv, pc);
}

fn gv_epilogue(s: f32, pc: u32) -> f32 {
    var r = bitcast<f32>(P[11]) * s;
    if ((P[13] & 4u) != 0u) { r += bitcast<f32>(P[12]) * ld_c(pc); }
    return r;
}

// Workgroup sum of one value per invocation (WG a power of two, at most 256).
fn gv_sum(v: f32, lid: u32) -> f32 {
    gv_red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { gv_red[lid] += gv_red[lid + s]; }
        workgroupBarrier();
    }
    return gv_red[0];
}

fn gv_finish_row(row: u32, s: f32, pc: u32) {
    if ((P[13] & 8u) != 0u) {
        O[row] = bitcast<u32>(s);
    } else {
        O[row] = st_o(gv_epilogue(s, pc));
    }
}

@compute @workgroup_size(WG)
fn gemv_rows(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.x + wid.y * nwg.x;
    if (row >= P[2]) { return; }
    let p = gv_offsets(row);
    let k_dim = P[1];
    let a_sk = P[6];
    let v_sk = P[8];
    var acc = 0.0;
    for (var k = lid; k < k_dim; k += WG) {
        acc = fma(ld_a(p.x + k * a_sk), ld_b(p.y + k * v_sk), acc);
    }
    let s = gv_sum(acc, lid);
    if (lid == 0u) { gv_finish_row(row, s, p.z); }
}

// The elements of a vec4 of the vector's words (as gv_unpack for A).
fn gv_unpack_b(q: vec4<u32>) -> array<vec4<f32>, 2> {
    if (LB == 1u) {
        return array<vec4<f32>, 2>(vec4<f32>(x2b(q.x), x2b(q.y)), vec4<f32>(x2b(q.z), x2b(q.w)));
    }
    return array<vec4<f32>, 2>(
        vec4<f32>(xb(q.x, 0u), xb(q.y, 0u), xb(q.z, 0u), xb(q.w, 0u)), vec4<f32>(0.0));
}

// Dot product of a vec4 of A's words with the matching unpacked vector elements.
fn gv_dot_u(a: vec4<u32>, v: array<vec4<f32>, 2>) -> f32 {
    let x = gv_unpack(a);
    if (LA == 1u) {
        return dot(x[0], v[0]) + dot(x[1], v[1]);
    }
    return dot(x[0], v[0]);
}

var<workgroup> gv_red4: array<vec4<f32>, 256>;

fn gv_sum4(v: vec4<f32>, lid: u32) -> vec4<f32> {
    gv_red4[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { gv_red4[lid] += gv_red4[lid + s]; }
        workgroupBarrier();
    }
    return gv_red4[0];
}

// Rows with vec4-of-words loads (offsets, K and the row stride multiples of a vec4 of
// words; the host checks). With flag bit 4, GV_ROWS neighbouring rows of one batch
// per workgroup (I a multiple of GV_ROWS): each vector load serves all of them, one
// reduction sums them, and 16-bit outputs are whole words, stored directly.
const GV_ROWS: u32 = 4u;

@compute @workgroup_size(WG)
fn gemv_rows_v(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let multi = (P[13] & 16u) != 0u;
    let nr = select(1u, GV_ROWS, multi);
    let row0 = (wid.x + wid.y * nwg.x) * nr;
    if (row0 >= P[2]) { return; }
    let p = gv_offsets(row0);
    let sh = LA + 2u;
    let qa = p.x >> sh;
    let qv = p.y >> sh;
    let sa = bitcast<u32>(bitcast<i32>(P[5]) >> sh);
    let nq = P[1] >> sh;
    var acc = vec4<f32>(0.0);
    for (var q = lid; q < nq; q += WG) {
        let v = gv_unpack_b(vb(qv + q));
        for (var r = 0u; r < GV_ROWS; r++) {
            if (r < nr) { acc[r] += gv_dot_u(va(qa + r * sa + q), v); }
        }
    }
    if (!multi) {
        let s = gv_sum(acc.x, lid);
        if (lid == 0u) { gv_finish_row(row0, s, p.z); }
        return;
    }
    let s = gv_sum4(acc, lid);
    if (lid == 0u) {
        var y = vec4<f32>(0.0);
        for (var r = 0u; r < GV_ROWS; r++) { y[r] = gv_epilogue(s[r], p.z + r * P[10]); }
        if (LO == 1u) {
            O[row0 >> 1u] = st2_o(y.xy);
            O[(row0 >> 1u) + 1u] = st2_o(y.zw);
        } else {
            for (var r = 0u; r < GV_ROWS; r++) { O[row0 + r] = st_o(y[r]); }
        }
    }
}

@compute @workgroup_size(WG)
fn gemv_cols(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    // Workgroups: (row block, chunk), row blocks fastest.
    let rows = P[2];
    let blocks = (rows + WG - 1u) / WG;
    let g = wid.x + wid.y * nwg.x;
    let chunk = g / blocks;
    if (chunk >= P[14]) { return; }
    let row = (g - chunk * blocks) * WG + lid;
    if (row >= rows) { return; }
    let p = gv_offsets(row);
    let kc = P[15];
    let k0 = chunk * kc;
    let k1 = min(k0 + kc, P[1]);
    let a_sk = P[6];
    let v_sk = P[8];
    var acc = 0.0;
    for (var k = k0; k < k1; k++) {
        acc = fma(ld_a(p.x + k * a_sk), ld_b(p.y + k * v_sk), acc);
    }
    O[chunk * rows + row] = bitcast<u32>(acc);
}

@compute @workgroup_size(WG)
fn gemv_fin(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let rows = P[2];
    let chunks = P[14];
    let epw = 1u << LO;
    let words = (rows + epw - 1u) / epw;
    for (var w = thread_index(vec3<u32>(lid, 0u, 0u), wid, nwg); w < words; w += thread_count(nwg)) {
        var r = vec2<f32>(0.0);
        for (var j = 0u; j < epw; j++) {
            let row = w * epw + j;
            if (row < rows) {
                var s = 0.0;
                for (var c = 0u; c < chunks; c++) {
                    s += bitcast<f32>(wa(c * rows + row));
                }
                r[j] = gv_epilogue(s, gv_offsets(row).z);
            }
        }
        if (LO == 1u) {
            O[w] = st2_o(r);
        } else {
            O[w] = st_o(r.x);
        }
    }
}

// The elements of a vec4 of A's words: 4 f32, or 8 16-bit values (first four in [0]).
fn gv_unpack(q: vec4<u32>) -> array<vec4<f32>, 2> {
    if (LA == 1u) {
        return array<vec4<f32>, 2>(vec4<f32>(x2a(q.x), x2a(q.y)), vec4<f32>(x2a(q.z), x2a(q.w)));
    }
    return array<vec4<f32>, 2>(
        vec4<f32>(xa(q.x, 0u), xa(q.y, 0u), xa(q.z, 0u), xa(q.w, 0u)), vec4<f32>(0.0));
}

// gemv_cols with one vec4 of A's words per k: each invocation owns 4 (f32) or 8
// (16-bit) neighbouring rows i, whose elements are contiguous and aligned (the host
// checks: offsets, the k stride and I multiples of a vec4 of words).
@compute @workgroup_size(WG)
fn gemv_cols_v(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let rows = P[2];
    let sh = LA + 2u;
    let per = 1u << sh;
    let groups = rows / per;
    let blocks = (groups + WG - 1u) / WG;
    let g = wid.x + wid.y * nwg.x;
    let chunk = g / blocks;
    if (chunk >= P[14]) { return; }
    let grp = (g - chunk * blocks) * WG + lid;
    if (grp >= groups) { return; }
    let row0 = grp * per;
    let p = gv_offsets(row0);
    let kc = P[15];
    let k0 = chunk * kc;
    let k1 = min(k0 + kc, P[1]);
    let a_sk = P[6];
    let v_sk = P[8];
    var lo = vec4<f32>(0.0);
    var hi = vec4<f32>(0.0);
    for (var k = k0; k < k1; k++) {
        let q = gv_unpack(va((p.x + k * a_sk) >> sh));
        let s = vec4<f32>(ld_b(p.y + k * v_sk));
        lo = fma(q[0], s, lo);
        hi = fma(q[1], s, hi);
    }
    let base = chunk * rows + row0;
    for (var j = 0u; j < 4u; j++) { O[base + j] = bitcast<u32>(lo[j]); }
    if (LA == 1u) {
        for (var j = 0u; j < 4u; j++) { O[base + 4u + j] = bitcast<u32>(hi[j]); }
    }
}
