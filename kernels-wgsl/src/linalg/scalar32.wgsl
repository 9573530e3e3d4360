// The f32 kernels' scalar: the output buffer is words (read and written in place
// by the global-memory kernels), blocks up to LinalgBlock::side(f32).
alias R = f32;
const BS: u32 = 64u;

fn og(i: u32) -> f32 { return bitcast<f32>(O[i]); }
fn os(i: u32, v: f32) { O[i] = bitcast<u32>(v); }
fn nan_r() -> f32 { return nan_f(); }
