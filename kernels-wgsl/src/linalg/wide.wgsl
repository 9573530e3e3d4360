// The f64 kernels' scalar (crate::wide's prelude binds O and A as f64), blocks up
// to LinalgBlock::side(f64).
alias R = f64;
const BS: u32 = 32u;

fn ld_a(i: u32) -> f64 { return A[i]; }
fn st_o(v: f64) -> f64 { return v; }
fn og(i: u32) -> f64 { return O[i]; }
fn os(i: u32, v: f64) { O[i] = v; }
fn nan_r() -> f64 { return nan_d(); }
