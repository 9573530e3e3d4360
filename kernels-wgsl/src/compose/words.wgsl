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
