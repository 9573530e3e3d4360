//! The linear algebra kernels' factorisations.

use crate::DType;

/// A factorisation the kernel library runs one workgroup per matrix; core builds
/// the larger blocked algorithms from these and matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinalgBlock {
    /// The lower Cholesky factor, from the lower triangle (n ≤ [`LinalgBlock::side`]).
    Cholesky,
    /// The inverse of a lower-triangular matrix, from its lower triangle
    /// (n ≤ [`LinalgBlock::side`]).
    TriInv,
    /// LU with partial pivoting (n ≤ [`LinalgBlock::side`]): each output row is that
    /// row of the packed L (strictly lower, unit diagonal implied) and U, then `r_i`
    /// as a float, where `A[r] = L U` (`[..., n, n + 1]`).
    Lu,
    /// LU with partial pivoting of a tall panel `[..., m, n]` (m ≥ n, n ≤
    /// [`LinalgBlock::side`]), LAPACK's `getf2`, in global memory: output rows
    /// `0..m` are the packed L and U rows then `r_i` (`A[r] = L U`), and row `m`
    /// holds the number of row swaps, then zeros (`[..., m + 1, n + 1]`).
    LuPanel,
    /// Householder QR of `[..., m, n]` (m, n ≤ [`LinalgBlock::QR_MAX`]), LAPACK's
    /// `geqr2` and `org2r` (R's diagonal has the sign of `-a_jj` after the
    /// previous reflections): Q (`m × k`) then R (`k × n`), `k = min(m, n)`, flat
    /// (`[..., m k + k n]`).
    Qr,
}

impl LinalgBlock {
    /// The largest matrix side of the block kernels (and of an LU panel's columns)
    /// in `dtype` (f32 or f64): a 64×64 f32 block fills 16 KiB of workgroup memory,
    /// WebGPU's default limit, so f64 blocks are 32×32.
    pub fn side(dtype: DType) -> usize {
        if dtype == DType::F64 { 32 } else { 64 }
    }

    /// The largest side of a matrix the QR kernel takes.
    pub const QR_MAX: usize = 512;

    /// The kernel's name (its WGSL entry point).
    pub fn name(self) -> &'static str {
        match self {
            LinalgBlock::Cholesky => "chol_small",
            LinalgBlock::TriInv => "tri_inv_small",
            LinalgBlock::Lu => "lu_small",
            LinalgBlock::LuPanel => "lu_panel",
            LinalgBlock::Qr => "qr_house",
        }
    }

    /// Every block.
    pub const ALL: [LinalgBlock; 5] = [
        LinalgBlock::Cholesky,
        LinalgBlock::TriInv,
        LinalgBlock::Lu,
        LinalgBlock::LuPanel,
        LinalgBlock::Qr,
    ];

    /// Whether it takes `dtype` matrices of `m` rows and `n` columns.
    pub fn takes(self, dtype: DType, m: usize, n: usize) -> bool {
        let side = Self::side(dtype);
        match self {
            LinalgBlock::Cholesky | LinalgBlock::TriInv | LinalgBlock::Lu => m == n && n <= side,
            LinalgBlock::LuPanel => m >= n && n <= side,
            LinalgBlock::Qr => m <= Self::QR_MAX && n <= Self::QR_MAX,
        }
    }

    /// The output's trailing dimensions for one `m × n` matrix.
    pub fn out_shape(self, m: usize, n: usize) -> Vec<usize> {
        match self {
            LinalgBlock::Lu => vec![n, n + 1],
            LinalgBlock::LuPanel => vec![m + 1, n + 1],
            LinalgBlock::Qr => vec![m * m.min(n) + m.min(n) * n],
            _ => vec![m, n],
        }
    }
}
