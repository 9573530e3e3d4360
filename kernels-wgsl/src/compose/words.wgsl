// Packed output words, shared by every kernel that writes elements of the output
// dtype into u32 words (the prelude's LO: log2 of elements per word).

const EPO: u32 = 1u << LO;          // output elements per u32 word
const BITS_O: u32 = 32u >> LO;      // bits per output element
const MASK_O: u32 = 0xffffffffu >> (32u - BITS_O);
const BLK: u32 = 4u << LO;          // output elements per vec4<u32>

// `word` with element j replaced by the low bits of `bits`.
fn put(word: u32, j: u32, bits: u32) -> u32 {
    let sh = j * BITS_O;
    return (word & ~(MASK_O << sh)) | ((bits & MASK_O) << sh);
}

// The strided kernels' one loop (elementwise ops and casts of any-rank views, slice
// updates): each invocation writes whole output words, each element of a word from
// its own position (`general_elem`, the family's), so packed outputs never race.
// P[0] is the element count; a partial last word keeps the bits past n.
@compute @workgroup_size(WG)
fn general(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
           @builtin(num_workgroups) nwg: vec3<u32>) {
    let n = P[0];
    let nw = (n + EPO - 1u) / EPO;
    for (var w = thread_index(lid, wid, nwg); w < nw; w += thread_count(nwg)) {
        let i0 = w * EPO;
        var word = 0u;
        if (i0 + EPO > n) { word = O[w]; }
        for (var j = 0u; j < EPO; j++) {
            let i = i0 + j;
            if (i < n) { word = put(word, j, general_elem(i)); }
        }
        O[w] = word;
    }
}
