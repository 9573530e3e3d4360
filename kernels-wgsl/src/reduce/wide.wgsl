// ---- reductions: one workgroup per output, grid-stride over outputs.
// Parameters [n_out, n_red, rank_out, rank_red, offset, shape_out, strides_out,
// shape_red, strides_red, parts, chunk]: `reduce` writes `parts` partial results
// per output (output r * parts + p reduces elements p * chunk .. of the reduced
// ones), so no invocation loops long (lavapipe stops a shader's loops after 65 535
// iterations) and a long reduction has more than one workgroup.

var<workgroup> SI: array<u32, WG>;

fn red_base(r: u32) -> u32 { let k = P[2]; return loc(r, k, 5u, 5u + k, P[4]); }
fn red_at(j: u32, base: u32) -> u32 {
    let k = P[2];
    let q = P[3];
    return loc(j, q, 5u + 2u * k, 5u + 2u * k + q, base);
}

@compute @workgroup_size(WG)
fn reduce(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = lid.x;
    let tail = 5u + 2u * P[2] + 2u * P[3];
    let parts = P[tail];
    let chunk = P[tail + 1u];
    for (var r = wid.x + wid.y * nwg.x; r < P[0] * parts; r += nwg.x * nwg.y) {
        let base = red_base(r / parts);
        let j0 = (r % parts) * chunk;
        let j1 = min(j0 + chunk, P[1]);
        var acc = ident();
        for (var j = j0 + t; j < j1; j += WG) { acc = combine(acc, A[red_at(j, base)]); }
        SH[t] = acc;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (t < s) { SH[t] = combine(SH[t], SH[t + s]); }
            workgroupBarrier();
        }
        if (t == 0u) { O[r] = SH[0]; }
        workgroupBarrier();
    }
}

// Arg reductions: the first NaN wins, else the extreme value, ties to the lower
// index.
fn arg_take(av: E, ai: u32, bv: E, bi: u32) -> bool {
    let na = isnan_e(av);
    let nb = isnan_e(bv);
    if (na || nb) { return nb && (!na || bi < ai); }
    if (better(av, bv)) { return true; }
    if (better(bv, av)) { return false; }
    return bi < ai;
}

@compute @workgroup_size(WG)
fn argreduce(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = lid.x;
    for (var r = wid.x + wid.y * nwg.x; r < P[0]; r += nwg.x * nwg.y) {
        let base = red_base(r);
        var v: E;
        var i = 0xffffffffu;
        for (var j = t; j < P[1]; j += WG) {
            let x = A[red_at(j, base)];
            if (i == 0xffffffffu || arg_take(v, i, x, j)) { v = x; i = j; }
        }
        SH[t] = v;
        SI[t] = i;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (t < s && SI[t + s] != 0xffffffffu
                && (SI[t] == 0xffffffffu || arg_take(SH[t], SI[t], SH[t + s], SI[t + s]))) {
                SH[t] = SH[t + s];
                SI[t] = SI[t + s];
            }
            workgroupBarrier();
        }
        if (t == 0u) { O[r] = select(SI[0], 0u, SI[0] == 0xffffffffu); }
        workgroupBarrier();
    }
}

// ---- scans along an axis of a row-major input: [lines, len, inner, offset,
// flags (1 reverse, 2 exclusive)]; one workgroup per line, WG elements at a time.

@compute @workgroup_size(WG)
fn scan(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let t = lid.x;
    let len = P[1];
    let inner = P[2];
    let rev = (P[4] & 1u) != 0u;
    let excl = (P[4] & 2u) != 0u;
    for (var l = wid.x + wid.y * nwg.x; l < P[0]; l += nwg.x * nwg.y) {
        let first = (l / inner) * len * inner + l % inner;
        var carry = ident();
        for (var c = 0u; c < len; c += WG) {
            let k = c + t;
            let kk = select(k, len - 1u - k, rev);
            var v = ident();
            if (k < len) { v = A[P[3] + first + kk * inner]; }
            SH[t] = v;
            workgroupBarrier();
            for (var s = 1u; s < WG; s <<= 1u) {
                var u = SH[t];
                if (t >= s) { u = combine(SH[t - s], u); }
                workgroupBarrier();
                SH[t] = u;
                workgroupBarrier();
            }
            var res = combine(carry, SH[t]);
            if (excl) { res = select(combine(carry, SH[max(t, 1u) - 1u]), carry, t == 0u); }
            if (k < len) { O[first + kk * inner] = res; }
            carry = combine(carry, SH[WG - 1u]);
            workgroupBarrier();
        }
    }
}
