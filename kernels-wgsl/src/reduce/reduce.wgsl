// Reductions. The prelude supplies ACC (the 32-bit accumulator type), acc_init,
// acc_load, combine, st_acc and wg_reduce (subgroup or workgroup-memory tree); for
// arg reductions AP's init, arg_better, acc_isnan and wg_arg.
//
// Outputs are 32-bit words, one per output element, so invocations never share a
// word; with NARROW (f16/bf16 results of the column kernels) one invocation stores
// each pair of results as one word. Other packed outputs take a copy pass after.
//
// Parameters: [K, R, S, chunk, x_off, rank_k, rank_r, out_off,
//              shape_k[rank_k], stride_k[rank_k], shape_r[rank_r], stride_r[rank_r]]
// K outputs, each reducing R elements; `reduce_rows` splits each output's R elements
// into S chunks of `chunk` (S > 1 writes K*S partial results for a second pass).

const TX: u32 = 32u;                // outputs per workgroup in the column kernels

var<workgroup> SH: array<ACC, 256>;
var<workgroup> SHI: array<u32, 256>;
// Which slots of SH hold a subgroup's partial (bit t: slot t), for WG <= 256.
var<workgroup> SGMASK: array<atomic<u32>, 8>;

struct AP { v: ACC, i: u32 }

// Element offset of the first input element of output k.
fn kept_base(k: u32) -> u32 {
    let rk = P[5];
    var rem = k;
    var off = P[4];
    for (var d = rk; d > 0u; d--) {
        let s = P[7u + d];
        let q = rem / s;
        off += (rem - q * s) * P[7u + rk + d];
        rem = q;
    }
    return off;
}

// Element offset of reduced element r relative to its output's base.
fn red_off(r: u32) -> u32 {
    let rk = P[5];
    let rr = P[6];
    let b = 8u + 2u * rk;
    if (rr == 1u) { return r * P[b + 1u]; }
    var rem = r;
    var off = 0u;
    for (var d = rr; d > 0u; d--) {
        let s = P[b + d - 1u];
        let q = rem / s;
        off += (rem - q * s) * P[b + rr + d - 1u];
        rem = q;
    }
    return off;
}

fn rsum_f32(a: f32, b: f32) -> f32 { return a + b; }
fn rsum_i32(a: i32, b: i32) -> i32 { return a + b; }
fn rsum_u32(a: u32, b: u32) -> u32 { return a + b; }
fn rprod_f32(a: f32, b: f32) -> f32 { return a * b; }
fn rprod_i32(a: i32, b: i32) -> i32 { return a * b; }
fn rprod_u32(a: u32, b: u32) -> u32 { return a * b; }
// max/min propagate NaN.
fn rmax_f32(a: f32, b: f32) -> f32 {
    if (isnan_f(a)) { return a; }
    if (isnan_f(b)) { return b; }
    return max(a, b);
}
fn rmax_i32(a: i32, b: i32) -> i32 { return max(a, b); }
fn rmax_u32(a: u32, b: u32) -> u32 { return max(a, b); }
fn rmin_f32(a: f32, b: f32) -> f32 {
    if (isnan_f(a)) { return a; }
    if (isnan_f(b)) { return b; }
    return min(a, b);
}
fn rmin_i32(a: i32, b: i32) -> i32 { return min(a, b); }
fn rmin_u32(a: u32, b: u32) -> u32 { return min(a, b); }
fn rall_u32(a: u32, b: u32) -> u32 { return a & b; }
fn rany_u32(a: u32, b: u32) -> u32 { return a | b; }

// Workgroup reduction through workgroup memory (no subgroups: the browser).
// Every invocation gets the result.
fn wg_reduce_tree(v: ACC, lid: u32) -> ACC {
    SH[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { SH[lid] = combine(SH[lid], SH[lid + s]); }
        workgroupBarrier();
    }
    return SH[0];
}

// Subgroup butterfly (size read at run time), then one partial per subgroup combined
// from workgroup memory; the result is invocation 0's (as wg_arg_sg's). Nothing is assumed about how invocations map to
// subgroups: each partial goes to the slot of its subgroup's lowest invocation
// index, and the partials are combined in slot order, so the result does not
// depend on which subgroup finishes first (slots taken in order of arrival made
// fused sums differ by an ulp between runs on NVIDIA). Slot 0 is always taken.
fn sg_slots_clear(lid: u32) {
    if (lid < 8u) { atomicStore(&SGMASK[lid], 0u); }
    workgroupBarrier();
}
// The next taken slot after `t` (256 when none).
fn sg_slot_next(t: u32) -> u32 {
    let u = t + 1u;
    var w = u >> 5u;
    if (w >= 8u) { return 256u; }
    var bits = atomicLoad(&SGMASK[w]) & (0xffffffffu << (u & 31u));
    while (bits == 0u && w < 7u) {
        w++;
        bits = atomicLoad(&SGMASK[w]);
    }
    return select(256u, w * 32u + countTrailingZeros(bits), bits != 0u);
}
fn wg_reduce_sg(v0: ACC, lid: u32) -> ACC {
    sg_slots_clear(lid);
    var v = v0;
    let n = subgroupAdd(1u);
    let first = subgroupMin(lid);
    for (var m = 1u; m < n; m <<= 1u) { v = combine(v, subgroupShuffleXor(v, m)); }
    if (lid == first) {
        SH[first] = v;
        atomicOr(&SGMASK[first >> 5u], 1u << (first & 31u));
    }
    workgroupBarrier();
    // Only invocation 0's result is used (every caller stores it): it alone walks
    // the slots (all 256 walking them cost 20 % on rows of 4096 on the H200).
    var r = v;
    if (lid == 0u) {
        r = SH[0];
        for (var t = sg_slot_next(0u); t < 256u; t = sg_slot_next(t)) { r = combine(r, SH[t]); }
    }
    return r;
}

// Arg reductions: the first NaN wins, else the extreme value, ties to the lower
// index. Commutative and associative, so any combination order gives the same index.
fn arg_combine(a: AP, b: AP) -> AP {
    let na = acc_isnan(a.v);
    let nb = acc_isnan(b.v);
    if (na || nb) {
        if (na && nb) {
            if (a.i < b.i) { return a; }
            return b;
        }
        if (na) { return a; }
        return b;
    }
    if (arg_better(a.v, b.v)) { return b; }
    if (arg_better(b.v, a.v)) { return a; }
    if (a.i < b.i) { return a; }
    return b;
}

fn wg_arg_tree(p: AP, lid: u32) -> AP {
    SH[lid] = p.v;
    SHI[lid] = p.i;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let r = arg_combine(AP(SH[lid], SHI[lid]), AP(SH[lid + s], SHI[lid + s]));
            SH[lid] = r.v;
            SHI[lid] = r.i;
        }
        workgroupBarrier();
    }
    return AP(SH[0], SHI[0]);
}

// Arg reductions combine in any order to the same result; slots as wg_reduce_sg's.
fn wg_arg_sg(p0: AP, lid: u32) -> AP {
    sg_slots_clear(lid);
    var p = p0;
    let n = subgroupAdd(1u);
    let first = subgroupMin(lid);
    for (var m = 1u; m < n; m <<= 1u) {
        p = arg_combine(p, AP(subgroupShuffleXor(p.v, m), subgroupShuffleXor(p.i, m)));
    }
    if (lid == first) {
        SH[first] = p.v;
        SHI[first] = p.i;
        atomicOr(&SGMASK[first >> 5u], 1u << (first & 31u));
    }
    workgroupBarrier();
    var r = p;
    if (lid == 0u) {
        r = AP(SH[0], SHI[0]);
        for (var t = sg_slot_next(0u); t < 256u; t = sg_slot_next(t)) {
            r = arg_combine(r, AP(SH[t], SHI[t]));
        }
    }
    return r;
}

// One workgroup per (output, chunk); grid-linear workgroup index g = k * S + s.
@compute @workgroup_size(WG)
fn reduce_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let K = P[0];
    let R = P[1];
    let S = P[2];
    let chunk = P[3];
    let g = wid.x + wid.y * nwg.x;
    let k = g / S;
    let s = g - k * S;
    let valid = k < K;
    var acc = acc_init();
    if (valid) {
        let base = kept_base(k);
        let r1 = min(R, (s + 1u) * chunk);
        // Four elements per iteration into four accumulators: four loads (or fused
        // values, see fused.rs) in flight per invocation, not one.
        var a1 = acc_init();
        var a2 = acc_init();
        var a3 = acc_init();
        var r = s * chunk + lid.x;
        for (; r + 3u * WG < r1; r += 4u * WG) {
            let x0 = ld_a(base + red_off(r));
            let x1 = ld_a(base + red_off(r + WG));
            let x2 = ld_a(base + red_off(r + 2u * WG));
            let x3 = ld_a(base + red_off(r + 3u * WG));
            acc = combine(acc, acc_load(x0));
            a1 = combine(a1, acc_load(x1));
            a2 = combine(a2, acc_load(x2));
            a3 = combine(a3, acc_load(x3));
        }
        for (; r < r1; r += WG) {
            acc = combine(acc, acc_load(ld_a(base + red_off(r))));
        }
        acc = combine(combine(acc, a1), combine(a2, a3));
    }
    let res = wg_reduce(acc, lid.x);
    if (valid && lid.x == 0u) { O[P[7] + g] = st_acc(res); }
}

// TX outputs per workgroup, WG / TX invocations per output striding over R: adjacent
// invocations read adjacent outputs' elements (coalesced when outputs are contiguous).
@compute @workgroup_size(WG)
fn reduce_cols(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let K = P[0];
    let S = P[2];
    let ny = WG / TX;
    let tx = lid.x % TX;
    let ty = lid.x / TX;
    // With S > 1 chunks of P[3] rows each (few columns, many rows), workgroup g
    // takes chunk g % S and writes partials [K, S], as reduce_cols_v.
    let g = wid.x + wid.y * nwg.x;
    let sc = g % S;
    let R = min(P[1], (sc + 1u) * P[3]);
    let k = (g / S) * TX + tx;
    let valid = k < K;
    var acc = acc_init();
    if (valid) {
        let base = kept_base(k);
        for (var r = sc * P[3] + ty; r < R; r += ny) {
            acc = combine(acc, acc_load(ld_a(base + red_off(r))));
        }
    }
    SH[lid.x] = acc;
    workgroupBarrier();
    var a = acc_init();
    if (ty == 0u) {
        a = SH[tx];
        for (var t = 1u; t < ny; t++) { a = combine(a, SH[t * TX + tx]); }
    }
    if (NARROW) {
        // Results to SH[tx] (only invocation tx reads it above), then pairs (S == 1,
        // P[7] and TX even: an even tx starts a word).
        if (ty == 0u) { SH[tx] = a; }
        workgroupBarrier();
        if (valid && ty == 0u && tx % 2u == 0u) {
            let hi = select(0u, st_acc(SH[tx + 1u]) << 16u, k + 1u < K);
            O[(P[7] + k) / 2u] = st_acc(a) | hi;
        }
        return;
    }
    if (valid && ty == 0u) {
        if (S == 1u) {
            O[P[7] + k] = st_acc(a);
        } else {
            O[k * S + sc] = st_acc(a);
        }
    }
}

@compute @workgroup_size(WG)
fn arg_rows(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let K = P[0];
    let R = P[1];
    let k = wid.x + wid.y * nwg.x;
    let valid = k < K;
    var best = arg_init();
    if (valid) {
        let base = kept_base(k);
        for (var r = lid.x; r < R; r += WG) {
            best = arg_combine(best, AP(ld_a(base + red_off(r)), r));
        }
    }
    let res = wg_arg(best, lid.x);
    if (valid && lid.x == 0u) { O[P[7] + k] = res.i; }
}

@compute @workgroup_size(WG)
fn arg_cols(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
            @builtin(num_workgroups) nwg: vec3<u32>) {
    let K = P[0];
    let R = P[1];
    let ny = WG / TX;
    let tx = lid.x % TX;
    let ty = lid.x / TX;
    let k = (wid.x + wid.y * nwg.x) * TX + tx;
    let valid = k < K;
    var best = arg_init();
    if (valid) {
        let base = kept_base(k);
        for (var r = ty; r < R; r += ny) {
            best = arg_combine(best, AP(ld_a(base + red_off(r)), r));
        }
    }
    SH[lid.x] = best.v;
    SHI[lid.x] = best.i;
    workgroupBarrier();
    if (valid && ty == 0u) {
        var a = AP(SH[tx], SHI[tx]);
        for (var t = 1u; t < ny; t++) { a = arg_combine(a, AP(SH[t * TX + tx], SHI[t * TX + tx])); }
        O[P[7] + k] = a.i;
    }
}

fn pair(h: vec2<CA>) -> ACC { return combine(acc_load(h.x), acc_load(h.y)); }

// Rows whose reduced elements are contiguous (rank_r 1, stride 1) and a vec4-padded
// input: vec4<u32> loads, two in flight per iteration, one accumulator per lane;
// the unaligned head and tail of each chunk are read element by element.
@compute @workgroup_size(WG)
fn reduce_rows_v(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let K = P[0];
    let R = P[1];
    let S = P[2];
    let chunk = P[3];
    let g = wid.x + wid.y * nwg.x;
    let k = g / S;
    let s = g - k * S;
    let valid = k < K;
    var a0 = acc_init();
    var a1 = acc_init();
    var a2 = acc_init();
    var a3 = acc_init();
    if (valid) {
        let base = kept_base(k);
        let e0 = base + s * chunk;
        let e1 = base + min(R, (s + 1u) * chunk);
        let epw = 1u << LA;
        let blk = 4u << LA;
        let v0 = (e0 + blk - 1u) / blk;
        let v1 = e1 / blk;
        var h1 = e1;
        if (v0 < v1) { h1 = v0 * blk; }
        for (var e = e0 + lid.x; e < h1; e += WG) { a0 = combine(a0, acc_load(ld_a(e))); }
        if (v0 < v1) {
            var v = v0 + lid.x;
            if (LA == 1u) {
                // 16-bit elements: twice the ALU work per load, so four loads in flight.
                for (; v + 3u * WG < v1; v += 4u * WG) {
                    let p = va(v);
                    let q = va(v + WG);
                    let r = va(v + 2u * WG);
                    let t = va(v + 3u * WG);
                    a0 = combine(a0, combine(pair(x2a(p.x)), pair(x2a(r.x))));
                    a1 = combine(a1, combine(pair(x2a(p.y)), pair(x2a(r.y))));
                    a2 = combine(a2, combine(pair(x2a(p.z)), pair(x2a(r.z))));
                    a3 = combine(a3, combine(pair(x2a(p.w)), pair(x2a(r.w))));
                    a0 = combine(a0, combine(pair(x2a(q.x)), pair(x2a(t.x))));
                    a1 = combine(a1, combine(pair(x2a(q.y)), pair(x2a(t.y))));
                    a2 = combine(a2, combine(pair(x2a(q.z)), pair(x2a(t.z))));
                    a3 = combine(a3, combine(pair(x2a(q.w)), pair(x2a(t.w))));
                }
            }
            for (; v + WG < v1; v += 2u * WG) {
                let p = va(v);
                let q = va(v + WG);
                if (LA == 1u) {
                    // 16-bit elements: both halves of a word at once (one unpack for
                    // f16), combined with each other first: shorter dependency chains.
                    a0 = combine(a0, pair(x2a(p.x)));
                    a1 = combine(a1, pair(x2a(p.y)));
                    a2 = combine(a2, pair(x2a(p.z)));
                    a3 = combine(a3, pair(x2a(p.w)));
                    a0 = combine(a0, pair(x2a(q.x)));
                    a1 = combine(a1, pair(x2a(q.y)));
                    a2 = combine(a2, pair(x2a(q.z)));
                    a3 = combine(a3, pair(x2a(q.w)));
                    continue;
                }
                for (var j = 0u; j < epw; j++) {
                    a0 = combine(a0, acc_load(xa(p.x, j)));
                    a1 = combine(a1, acc_load(xa(p.y, j)));
                    a2 = combine(a2, acc_load(xa(p.z, j)));
                    a3 = combine(a3, acc_load(xa(p.w, j)));
                    a0 = combine(a0, acc_load(xa(q.x, j)));
                    a1 = combine(a1, acc_load(xa(q.y, j)));
                    a2 = combine(a2, acc_load(xa(q.z, j)));
                    a3 = combine(a3, acc_load(xa(q.w, j)));
                }
            }
            if (v < v1) {
                let p = va(v);
                for (var j = 0u; j < epw; j++) {
                    a0 = combine(a0, acc_load(xa(p.x, j)));
                    a1 = combine(a1, acc_load(xa(p.y, j)));
                    a2 = combine(a2, acc_load(xa(p.z, j)));
                    a3 = combine(a3, acc_load(xa(p.w, j)));
                }
            }
            for (var e = v1 * blk + lid.x; e < e1; e += WG) { a1 = combine(a1, acc_load(ld_a(e))); }
        }
    }
    let res = wg_reduce(combine(combine(a0, a1), combine(a2, a3)), lid.x);
    if (valid && lid.x == 0u) { O[P[7] + g] = st_acc(res); }
}

// Arg reduction over contiguous rows with vec4 loads (see reduce_rows_v); indices
// count from the row's first element.
@compute @workgroup_size(WG)
fn arg_rows_v(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let K = P[0];
    let R = P[1];
    let k = wid.x + wid.y * nwg.x;
    let valid = k < K;
    var b0 = arg_init();
    var b1 = arg_init();
    var b2 = arg_init();
    var b3 = arg_init();
    if (valid) {
        let base = kept_base(k);
        let e1 = base + R;
        let epw = 1u << LA;
        let blk = 4u << LA;
        let v0 = (base + blk - 1u) / blk;
        let v1 = e1 / blk;
        var h1 = e1;
        if (v0 < v1) { h1 = v0 * blk; }
        for (var e = base + lid.x; e < h1; e += WG) { b0 = arg_combine(b0, AP(ld_a(e), e - base)); }
        if (v0 < v1) {
            for (var v = v0 + lid.x; v < v1; v += WG) {
                let p = va(v);
                let r = v * blk - base;
                for (var j = 0u; j < epw; j++) {
                    b0 = arg_combine(b0, AP(xa(p.x, j), r + j));
                    b1 = arg_combine(b1, AP(xa(p.y, j), r + epw + j));
                    b2 = arg_combine(b2, AP(xa(p.z, j), r + 2u * epw + j));
                    b3 = arg_combine(b3, AP(xa(p.w, j), r + 3u * epw + j));
                }
            }
            for (var e = v1 * blk + lid.x; e < e1; e += WG) { b1 = arg_combine(b1, AP(ld_a(e), e - base)); }
        }
    }
    let res = wg_arg(arg_combine(arg_combine(b0, b1), arg_combine(b2, b3)), lid.x);
    if (valid && lid.x == 0u) { O[P[7] + k] = res.i; }
}

// Column reduction with vec4 loads: outputs contiguous (stride 1), one reduced dim
// whose stride and the base offset are multiples of a vec4. TXV vec4 columns per
// workgroup (4 << LA outputs each), WG / TXV invocations per column striding over R.
const TXV: u32 = 16u;

@compute @workgroup_size(WG)
fn reduce_cols_v(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let K = P[0];
    let S = P[2];
    let epw = 1u << LA;
    let blk = 4u << LA;
    let ny = WG / TXV;
    let tx = lid.x % TXV;
    let ty = lid.x / TXV;
    // With S > 1 chunks of P[3] rows each (a tall matrix: more workgroups than
    // column groups), workgroup g takes chunk g % S and writes partials [K, S].
    let g = wid.x + wid.y * nwg.x;
    let sc = g % S;
    let R = min(P[1], (sc + 1u) * P[3]);
    let c = (g / S) * TXV + tx;
    let k0 = c * blk;
    let valid = k0 < K;
    var acc: array<ACC, 16>;
    for (var q = 0u; q < 16u; q++) { acc[q] = acc_init(); }
    if (valid) {
        // kept_base(k0) = x_off + k0; the reduced stride is a multiple of blk.
        let v0 = (P[4] + k0) / blk;
        let pitch = P[8u + 2u * P[5] + 1u] / blk;
        var r = sc * P[3] + ty;
        for (; r + ny < R; r += 2u * ny) {
            let p = va(v0 + r * pitch);
            let q = va(v0 + (r + ny) * pitch);
            for (var j = 0u; j < epw; j++) {
                acc[j] = combine(acc[j], acc_load(xa(p.x, j)));
                acc[epw + j] = combine(acc[epw + j], acc_load(xa(p.y, j)));
                acc[2u * epw + j] = combine(acc[2u * epw + j], acc_load(xa(p.z, j)));
                acc[3u * epw + j] = combine(acc[3u * epw + j], acc_load(xa(p.w, j)));
                acc[j] = combine(acc[j], acc_load(xa(q.x, j)));
                acc[epw + j] = combine(acc[epw + j], acc_load(xa(q.y, j)));
                acc[2u * epw + j] = combine(acc[2u * epw + j], acc_load(xa(q.z, j)));
                acc[3u * epw + j] = combine(acc[3u * epw + j], acc_load(xa(q.w, j)));
            }
        }
        if (r < R) {
            let p = va(v0 + r * pitch);
            for (var j = 0u; j < epw; j++) {
                acc[j] = combine(acc[j], acc_load(xa(p.x, j)));
                acc[epw + j] = combine(acc[epw + j], acc_load(xa(p.y, j)));
                acc[2u * epw + j] = combine(acc[2u * epw + j], acc_load(xa(p.z, j)));
                acc[3u * epw + j] = combine(acc[3u * epw + j], acc_load(xa(p.w, j)));
            }
        }
    }
    // One output lane at a time through workgroup memory; NARROW (S == 1, P[7]
    // even): each pair of lanes stored as one word.
    var lo = 0u;
    for (var q = 0u; q < blk; q++) {
        SH[lid.x] = acc[q];
        workgroupBarrier();
        if (ty == 0u && valid && k0 + q < K) {
            var a = SH[tx];
            for (var t = 1u; t < ny; t++) { a = combine(a, SH[t * TXV + tx]); }
            if (NARROW) {
                let w = (P[7] + k0 + q) / 2u;
                if (q % 2u == 0u) {
                    lo = st_acc(a);
                    if (k0 + q + 1u == K) { O[w] = lo; }
                } else {
                    O[w] = lo | (st_acc(a) << 16u);
                }
            } else if (S == 1u) {
                O[P[7] + k0 + q] = st_acc(a);
            } else {
                O[(k0 + q) * S + sc] = st_acc(a);
            }
        }
        workgroupBarrier();
    }
}
