// Stable argsort along rows by bitonic sorting (key, index) pairs: ties in the key
// are broken by the index, so equal keys keep their order. Rows of n elements are
// padded to P (a power of two) with sentinels above every key; pairs are two u32
// words (key, index) of a scratch buffer holding rows * P pairs, and every compare
// pairs positions of one row (the direction comes from the position in the row).
//
// Parameters: [N = rows * P, P, n, k, j, x_off, kmax, 0].
// The prelude gives sort_key (order-preserving u32 key of an element: NaN last,
// -0 equal to +0).

const SORT_BLOCK: u32 = 1024u;       // pairs per workgroup in sort_local
var<workgroup> SK: array<u32, 1024>;
var<workgroup> SI: array<u32, 1024>;

// (key, index) of a > of b.
fn pair_gt(ka: u32, ia: u32, kb: u32, ib: u32) -> bool {
    return ka > kb || (ka == kb && ia > ib);
}

@compute @workgroup_size(WG)
fn sort_init(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let p2 = P[1];
    let n = P[2];
    for (var g = thread_index(lid, wid, nwg); g < P[0]; g += thread_count(nwg)) {
        let r = g / p2;
        let p = g - r * p2;
        var key = 0xffffffffu;
        var idx = 0xffffffffu;
        if (p < n) {
            key = sort_key(ld_a(P[5] + r * n + p));
            idx = p;
        }
        O[2u * g] = key;
        O[2u * g + 1u] = idx;
    }
}

// One compare-exchange step (k, j) over every row, j >= SORT_BLOCK / 2.
@compute @workgroup_size(WG)
fn sort_global(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let p2 = P[1];
    let k = P[3];
    let j = P[4];
    for (var t = thread_index(lid, wid, nwg); t < P[0] / 2u; t += thread_count(nwg)) {
        let g = 2u * t - (t & (j - 1u));
        let l = g + j;
        let asc = ((g % p2) & k) == 0u;
        let ka = O[2u * g];
        let ia = O[2u * g + 1u];
        let kb = O[2u * l];
        let ib = O[2u * l + 1u];
        if (pair_gt(ka, ia, kb, ib) == asc) {
            O[2u * g] = kb;
            O[2u * g + 1u] = ib;
            O[2u * l] = ka;
            O[2u * l + 1u] = ia;
        }
    }
}

// Orders the pairs (ka, ia) and (kb, ib): ascending when `asc`.
fn exchange(ka: ptr<function, u32>, ia: ptr<function, u32>, kb: ptr<function, u32>,
            ib: ptr<function, u32>, asc: bool) {
    if (pair_gt(*ka, *ia, *kb, *ib) == asc) {
        let tk = *ka;
        let ti = *ia;
        *ka = *kb;
        *ia = *ib;
        *kb = tk;
        *ib = ti;
    }
}

// Two steps at once, (k, j) then (k, j / 2), both j / 2 >= SORT_BLOCK / 2: each
// invocation owns the four pairs g, g + j/2, g + j, g + 3j/2 (g with both bits
// clear), so the pass reads and writes the pairs once instead of twice.
@compute @workgroup_size(WG)
fn sort_global2(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                @builtin(num_workgroups) nwg: vec3<u32>) {
    let p2 = P[1];
    let k = P[3];
    let j = P[4];
    let h = j / 2u;
    let lh = countTrailingZeros(h);
    for (var t = thread_index(lid, wid, nwg); t < P[0] / 4u; t += thread_count(nwg)) {
        let g = ((t >> lh) << (lh + 2u)) | (t & (h - 1u));
        let asc = ((g % p2) & k) == 0u;
        var k0 = O[2u * g];
        var i0 = O[2u * g + 1u];
        var k1 = O[2u * (g + h)];
        var i1 = O[2u * (g + h) + 1u];
        var k2 = O[2u * (g + j)];
        var i2 = O[2u * (g + j) + 1u];
        var k3 = O[2u * (g + j + h)];
        var i3 = O[2u * (g + j + h) + 1u];
        // Step j pairs g with g+j and g+h with g+j+h; step h then g with g+h and
        // g+j with g+j+h.
        exchange(&k0, &i0, &k2, &i2, asc);
        exchange(&k1, &i1, &k3, &i3, asc);
        exchange(&k0, &i0, &k1, &i1, asc);
        exchange(&k2, &i2, &k3, &i3, asc);
        O[2u * g] = k0;
        O[2u * g + 1u] = i0;
        O[2u * (g + h)] = k1;
        O[2u * (g + h) + 1u] = i1;
        O[2u * (g + j)] = k2;
        O[2u * (g + j) + 1u] = i2;
        O[2u * (g + j + h)] = k3;
        O[2u * (g + j + h) + 1u] = i3;
    }
}

// Every step (k, j) with k in [P[3], P[6]] and j < SORT_BLOCK, j <= k / 2, on
// blocks of SORT_BLOCK pairs in workgroup memory. The bounds go through
// workgroupUniformLoad so the loops (and their barriers) are uniform.
var<workgroup> KMIN: u32;
var<workgroup> KMAX: u32;

@compute @workgroup_size(WG)
fn sort_local(@builtin(local_invocation_id) lid3: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
              @builtin(num_workgroups) nwg: vec3<u32>) {
    let lid = lid3.x;
    let total = P[0];
    let p2 = P[1];
    let base = (wid.x + wid.y * nwg.x) * SORT_BLOCK;
    if (lid == 0u) {
        KMIN = P[3];
        KMAX = P[6];
    }
    for (var e = lid; e < SORT_BLOCK; e += WG) {
        let g = base + e;
        if (g < total) {
            SK[e] = O[2u * g];
            SI[e] = O[2u * g + 1u];
        }
    }
    let kmin = workgroupUniformLoad(&KMIN);
    let kmax = workgroupUniformLoad(&KMAX);
    for (var k = kmin; k <= kmax && k != 0u; k <<= 1u) {
        for (var j = min(k / 2u, SORT_BLOCK / 2u); j > 0u; j >>= 1u) {
            workgroupBarrier();
            for (var t = lid; t < SORT_BLOCK / 2u; t += WG) {
                let i = 2u * t - (t & (j - 1u));
                let l = i + j;
                let g = base + i;
                if (g + j < total) {
                    let asc = ((g % p2) & k) == 0u;
                    let ka = SK[i];
                    let ia = SI[i];
                    let kb = SK[l];
                    let ib = SI[l];
                    if (pair_gt(ka, ia, kb, ib) == asc) {
                        SK[i] = kb;
                        SI[i] = ib;
                        SK[l] = ka;
                        SI[l] = ia;
                    }
                }
            }
        }
    }
    workgroupBarrier();
    for (var e = lid; e < SORT_BLOCK; e += WG) {
        let g = base + e;
        if (g < total) {
            O[2u * g] = SK[e];
            O[2u * g + 1u] = SI[e];
        }
    }
}

// out[r * n + p] = the index of the pair at row position p (p < n).
@compute @workgroup_size(WG)
fn sort_finish(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let p2 = P[1];
    let n = P[2];
    let rows = P[0] / p2;
    for (var o = thread_index(lid, wid, nwg); o < rows * n; o += thread_count(nwg)) {
        let r = o / n;
        O[o] = wa(2u * (r * p2 + (o - r * n)) + 1u);
    }
}
