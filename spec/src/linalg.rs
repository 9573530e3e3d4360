//! The blocks of the batched linear algebra kernels.

/// A factorisation of a small square matrix (n ≤ [`LinalgBlock::MAX`]) that the
/// kernel library runs one workgroup per matrix; core builds the larger blocked
/// algorithms from these and matrix products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinalgBlock {
    /// The lower Cholesky factor, from the lower triangle.
    Cholesky,
    /// The inverse of a lower-triangular matrix, from its lower triangle.
    TriInv,
    /// LU with partial pivoting: each output row is that row of the packed L
    /// (strictly lower, unit diagonal implied) and U, then `r_i` as a float,
    /// where `A[r] = L U` (`[..., n, n + 1]`).
    Lu,
}

impl LinalgBlock {
    /// The largest matrix side a block kernel takes.
    pub const MAX: usize = 64;

    /// The kernel's name (its WGSL entry point).
    pub fn name(self) -> &'static str {
        match self {
            LinalgBlock::Cholesky => "chol_small",
            LinalgBlock::TriInv => "tri_inv_small",
            LinalgBlock::Lu => "lu_small",
        }
    }

    /// Every block.
    pub const ALL: [LinalgBlock; 3] = [LinalgBlock::Cholesky, LinalgBlock::TriInv, LinalgBlock::Lu];

    /// Output columns per matrix of side `n`.
    pub fn out_cols(self, n: usize) -> usize {
        match self {
            LinalgBlock::Lu => n + 1,
            _ => n,
        }
    }
}
