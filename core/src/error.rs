//! The one error type of wmx.

use crate::DType;

/// Everything that can go wrong in wmx. Messages carry the offending values.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Two shapes that had to agree (or broadcast) do not.
    #[error("shape mismatch in {op}: {lhs:?} vs {rhs:?}")]
    ShapeMismatch {
        /// The operation that failed.
        op: &'static str,
        /// First shape.
        lhs: Vec<usize>,
        /// Second shape.
        rhs: Vec<usize>,
    },
    /// An axis outside `-ndim..ndim` (a repeated one is [`Error::Invalid`], saying so).
    #[error("bad axis {axis} for an array of {ndim} dimensions in {op}")]
    BadAxis {
        /// The operation that failed.
        op: &'static str,
        /// The axis as given.
        axis: isize,
        /// Number of dimensions of the array.
        ndim: usize,
    },
    /// The operation is not defined for this dtype (e.g. bitwise on floats).
    #[error("{op} is not defined for dtype {dtype}")]
    UnsupportedDType {
        /// The operation that failed.
        op: &'static str,
        /// The dtype it was given.
        dtype: DType,
    },
    /// The device cannot hold or compute this dtype (e.g. i64 on WebGPU).
    #[error("device {device} does not support dtype {dtype}: {reason}")]
    DeviceDType {
        /// Device name.
        device: String,
        /// The dtype it lacks.
        dtype: DType,
        /// Why.
        reason: String,
    },
    /// A value or index is out of its valid range.
    #[error("out of range in {op}: {msg}")]
    OutOfRange {
        /// The operation that failed.
        op: &'static str,
        /// What was out of range, with values.
        msg: String,
    },
    /// Any other invalid argument.
    #[error("invalid argument to {op}: {msg}")]
    Invalid {
        /// The operation that failed.
        op: &'static str,
        /// What was wrong, with values.
        msg: String,
    },
    /// No device of the requested kind could be opened.
    #[error("no device available: {0}")]
    NoDevice(String),
    /// An error reported by a backend (GPU validation, out of memory, lost device, …).
    #[error("backend {backend}: {msg}")]
    Backend {
        /// Backend name.
        backend: String,
        /// The backend's message.
        msg: String,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Invalid`] for `op` with `msg` (for custom primitives' code too).
    pub fn invalid(op: &'static str, msg: impl Into<String>) -> Self {
        Error::Invalid {
            op,
            msg: msg.into(),
        }
    }
}
