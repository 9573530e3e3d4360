// Indexing kernels: place (one input of a concatenation written into its box of
// the output; place4 and place_flat4 up to four at once), gather (take_along_axis) and scatter (put/add along an axis).
//
// Packed outputs (bool, u8, f16, bf16) hold several elements per u32 word. place
// and gather compute whole output words (no two invocations share one); scatter
// lands anywhere, so it merges its element into the word with a compare-exchange
// loop. Strides are i32 bits and offsets wrap in u32, as in the elementwise kernels.
//
// The prelude gives `index_a`/`index_b(p, n)`: the index at element p of that
// input, made to count from the end when negative, or NO_INDEX when outside 0..n.

const NO_INDEX: u32 = 0xffffffffu;

// Output word w: the elements of `word` flagged in `inside`, the others kept (a
// word shared with other inputs' boxes).
fn store_inside(w: u32, word: u32, inside: u32) {
    if (inside == 0u) { return; }
    var v = word;
    if (inside != (1u << EPO) - 1u) {
        let keep = O[w];
        for (var j = 0u; j < EPO; j++) {
            if ((inside & (1u << j)) == 0u) {
                v = put(v, j, (keep >> (j * BITS_O)) & MASK_O);
            }
        }
    }
    O[w] = v;
}

// place: [w0, w1, rank, axis, off_in, lo, cnt, n_out, shape_out[rank], strides_in[rank]]
// Output words w0..w1 hold the box of elements whose position on `axis` is in
// lo..lo+cnt; those are read from input a at that position minus lo.
@compute @workgroup_size(WG)
fn place(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
         @builtin(num_workgroups) nwg: vec3<u32>) {
    let rank = P[2];
    let axis = P[3];
    let lo = P[5];
    let cnt = P[6];
    let n = P[7];
    for (var w = P[0] + thread_index(lid, wid, nwg); w < P[1]; w += thread_count(nwg)) {
        var word = 0u;
        var inside = 0u;
        for (var j = 0u; j < EPO; j++) {
            let i = w * EPO + j;
            if (i >= n) { break; }
            var rem = i;
            var p = P[4];
            var ok = true;
            for (var d = rank; d > 0u; d--) {
                let s = P[7u + d];
                let q = rem / s;
                var c = rem - q * s;
                rem = q;
                if (d - 1u == axis) {
                    ok = c >= lo && c - lo < cnt;
                    c = c - lo;
                }
                p += c * P[7u + rank + d];
            }
            if (ok) {
                word = put(word, j, st_o(ld_a(p)));
                inside |= 1u << j;
            }
        }
        store_inside(w, word, inside);
    }
}

// place_box: [n_box, rank, axis, off_in, lo, cnt, shape_out[rank], strides_in[rank]]
// One invocation per element of the input (outputs of one element per word): an
// input that is a thin slab of the output (a column block of a concatenation along
// a late axis) is not walked over the whole output range as `place` walks it.
@compute @workgroup_size(WG)
fn place_box(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
             @builtin(num_workgroups) nwg: vec3<u32>) {
    let rank = P[1];
    let axis = P[2];
    let lo = P[4];
    let cnt = P[5];
    for (var i = thread_index(lid, wid, nwg); i < P[0]; i += thread_count(nwg)) {
        var rem = i;
        var p = P[3];
        var o = 0u;
        var so = 1u;
        for (var d = rank; d > 0u; d--) {
            let ext = P[5u + d];
            var s = ext;
            var shift = 0u;
            if (d - 1u == axis) {
                s = cnt;
                shift = lo;
            }
            let q = rem / s;
            let c = rem - q * s;
            rem = q;
            p += c * P[5u + rank + d];
            o += (c + shift) * so;
            so *= ext;
        }
        O[o] = st_o(ld_a(p));
    }
}

// Several inputs of one concatenation in one dispatch (up to four; the `*4` kernels
// bind inputs a..d, unused ones a placeholder never read).
fn w_of(s: u32, w: u32) -> u32 {
    switch s {
        case 0u: { return wa(w); }
        case 1u: { return wb(w); }
        case 2u: { return wc(w); }
        default: { return wd(w); }
    }
}

fn ld_of(s: u32, p: u32) -> u32 {
    switch s {
        case 0u: { return st_o(ld_a(p)); }
        case 1u: { return st_o(ld_b(p)); }
        case 2u: { return st_o(ld_c(p)); }
        default: { return st_o(ld_d(p)); }
    }
}

// place_flat4: [w0, w1, row, end, start[4], in_off[4], in_row[4]]: row-major inputs
// whose boxes are whole words, copied word by word (four independent, coalesced
// copies per invocation and iteration). Output word j is word c = j % row of row
// r = j / row (`row`: the words of one position of the axes before the
// concatenation's); input s holds c in start[s]..start[s + 1] (the last up to `end`,
// an absent input's start is `end`), at its word in_off[s] + r * in_row[s] + c -
// start[s]. Words outside these inputs' boxes are left alone.
@compute @workgroup_size(WG)
fn place_flat4(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let w1 = P[1];
    let row = P[2];
    let end = P[3];
    let step = thread_count(nwg);
    for (var i = P[0] + thread_index(lid, wid, nwg); i < w1; i += 4u * step) {
        var v: array<u32, 4>;
        var mine = 0u;
        for (var k = 0u; k < 4u; k++) {
            let j = i + k * step;
            let r = j / row;
            let c = j - r * row;
            if (j < w1 && c >= P[4] && c < end) {
                let s = u32(c >= P[5]) + u32(c >= P[6]) + u32(c >= P[7]);
                v[k] = w_of(s, P[8u + s] + r * P[12u + s] + c - P[4u + s]);
                mine |= 1u << k;
            }
        }
        for (var k = 0u; k < 4u; k++) {
            if ((mine & (1u << k)) != 0u) { O[i + k * step] = v[k]; }
        }
    }
}

// place4: [w0, w1, rank, axis, n_out, lo[4], cnt[4], off_in[4], shape_out[rank],
// strides_in[4][rank]]: output words w0..w1, each element read from the input
// whose box (positions lo..lo+cnt on `axis`) holds it; elements of no input here
// (words shared with another dispatch's inputs) are kept.
@compute @workgroup_size(WG)
fn place4(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    let rank = P[2];
    let axis = P[3];
    let n = P[4];
    let sh = 17u;
    let st = 17u + rank;
    for (var w = P[0] + thread_index(lid, wid, nwg); w < P[1]; w += thread_count(nwg)) {
        var word = 0u;
        var inside = 0u;
        for (var j = 0u; j < EPO; j++) {
            let i = w * EPO + j;
            if (i >= n) { break; }
            var rem = i;
            var ps = vec4<u32>(P[13], P[14], P[15], P[16]);
            var c_axis = 0u;
            for (var d = rank; d > 0u; d--) {
                let e = P[sh + d - 1u];
                let q = rem / e;
                let c = rem - q * e;
                rem = q;
                if (d - 1u == axis) {
                    c_axis = c;
                } else {
                    ps += c * vec4<u32>(P[st + d - 1u], P[st + rank + d - 1u],
                                        P[st + 2u * rank + d - 1u], P[st + 3u * rank + d - 1u]);
                }
            }
            var s = 4u;
            for (var k = 0u; k < 4u; k++) {
                if (c_axis >= P[5u + k] && c_axis - P[5u + k] < P[9u + k]) { s = k; }
            }
            if (s < 4u) {
                let p = ps[s] + (c_axis - P[5u + s]) * P[st + s * rank + axis];
                word = put(word, j, ld_of(s, p));
                inside |= 1u << j;
            }
        }
        store_inside(w, word, inside);
    }
}

// gather: [n, rank, axis, N, off_x, off_idx, fill, lo, rows, shape[rank],
// strides_x[rank], strides_idx[rank], fill_odd]: out[p] = x[p with p[axis] =
// idx[p]], `fill` (bits; `fill_odd` at odd p, the high words of 64-bit elements
// gathered as pairs) where the index is outside 0..N. x holds rows lo .. lo + rows of the axis;
// with fewer than N, elements whose index lies in another part of 0..N keep their
// value (the host gathers a large x part by part). The output has the indices'
// shape, row-major.
@compute @workgroup_size(WG)
fn gather(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let rank = P[1];
    let axis = P[2];
    let nw = (n + EPO - 1u) / EPO;
    for (var w = thread_index(lid, wid, nwg); w < nw; w += thread_count(nwg)) {
        let i0 = w * EPO;
        var word = 0u;
        let lo = P[7];
        let rows = P[8];
        if (i0 + EPO > n || rows < P[3]) { word = O[w]; }
        for (var j = 0u; j < EPO; j++) {
            let i = i0 + j;
            if (i >= n) { break; }
            var rem = i;
            var px = P[4];
            var pi = P[5];
            var step = 0u;
            for (var d = rank; d > 0u; d--) {
                let s = P[8u + d];
                let q = rem / s;
                let c = rem - q * s;
                rem = q;
                pi += c * P[8u + 2u * rank + d];
                if (d - 1u == axis) {
                    step = P[8u + rank + d];
                } else {
                    px += c * P[8u + rank + d];
                }
            }
            let k = index_b(pi, P[3]);
            var bits = select(P[6], P[9u + 3u * rank], (i & 1u) == 1u);
            if (k != NO_INDEX) {
                // Unsigned: k below lo wraps past rows.
                if (k - lo >= rows) { continue; }
                bits = st_o(ld_a(px + (k - lo) * step));
            }
            word = put(word, j, bits);
        }
        O[w] = word;
    }
}
