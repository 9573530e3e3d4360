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
}

impl LinalgBlock {
    /// The largest matrix side a block kernel takes.
    pub const MAX: usize = 64;

    /// The kernel's name (its WGSL entry point).
    pub fn name(self) -> &'static str {
        match self {
            LinalgBlock::Cholesky => "chol_small",
            LinalgBlock::TriInv => "tri_inv_small",
        }
    }
}
