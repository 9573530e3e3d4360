//! Several processes, one program: collectives over MPI, as MLX's `mx.distributed`.
//!
//! [`init`] returns the world [`Group`]. Started by a launcher (`mpirun -n 4 prog`,
//! Open MPI or MPICH) and built with the `mpi` feature, it holds every rank; outside
//! a launcher, or without the feature, it is a group of one whose collectives are
//! identities, so a program written for several ranks runs unchanged on one.
//!
//! Collectives are lazy ops like any other: [`all_sum`], [`all_max`], [`all_min`],
//! [`all_gather`], [`reduce_scatter`], [`broadcast`], [`send`], [`recv`] /
//! [`recv_like`]; they run when their result is evaluated, in every dtype, and
//! their results stay on their inputs' device. Arrays on a GPU are staged through
//! host memory (wgpu buffers cannot be handed to MPI): the GPU's backend reads the
//! input, the message passes on the host, the result is uploaded
//! ([`crate::CustomPrimitive::eval_on_host`]), inside compiled functions too.
//!
//! **Order.** As in MPI, every rank of a group must issue the same collectives in
//! the same order (each rank runs the same program; eval walks the graph in a
//! fixed order). Each collective first exchanges a small header (op, dtype, shape,
//! root), so ranks that disagree on what they are doing get an `Err` on every rank
//! naming each rank's side, not a hang or a wrong answer. What MPI cannot detect:
//! a rank that issues *fewer* collectives than the others (the others wait), and
//! a `recv` with no matching `send`.
//!
//! **Failures.** A rank that ends with a non-zero status (an `Err` returned from
//! `main`, a panic) aborts the whole job with a message naming it; a rank that
//! ends with status 0 finalises MPI. (The status is read with glibc's `on_exit`;
//! with another C library every rank finalises at exit.)
//!
//! **Gradients.** The rules differentiate the sum of every rank's result: the
//! cotangent of [`all_sum`] is the [`all_sum`] of the cotangents, of
//! [`all_gather`] this rank's block of their sum (a [`reduce_scatter`]), of
//! [`reduce_scatter`] the [`all_gather`], of [`broadcast`] their sum on the root
//! and zero elsewhere; [`all_max`] and [`all_min`] route it to the ranks that
//! hold the extreme (split evenly on ties). For a loss that every rank computes
//! identically (tensor parallelism), `nn::AllToShardedLinear` and
//! `nn::ShardedToAllLinear` use the conventions that loss needs. Under `vmap` a
//! [`send`] sends the batched array whole; [`send`] and [`recv`] have no
//! derivative rules.
//!
//! With several GPUs on one host, each rank opens adapter `local rank % adapters`
//! (`WMX_ADAPTER=i` overrides it); the device's name says which.

#[cfg(feature = "mpi")]
mod mpi;
#[cfg(not(feature = "mpi"))]
#[path = "mpi_stub.rs"]
mod mpi;
mod prim;

use crate::{DType, Error, Result};
use std::fmt;
use std::sync::Arc;

pub use prim::{
    all_gather, all_max, all_min, all_sum, broadcast, recv, recv_like, reduce_scatter, send,
};

pub(crate) const HEADER_WORDS: usize = 16;
/// What a rank is about to do, exchanged before each collective.
pub(crate) type Header = [u64; HEADER_WORDS];

/// An elementwise reduction across ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reduce {
    Sum,
    Max,
    Min,
}

/// A set of ranks that communicate: the world from [`init`], or a part of it from
/// [`Group::split`]. Cheap to clone.
#[derive(Clone)]
pub struct Group {
    comm: Option<Arc<mpi::Comm>>,
    rank: usize,
    size: usize,
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Group(rank {} of {})", self.rank, self.size)
    }
}

/// The world group: every rank the launcher started, or a group of one outside a
/// launcher or without the `mpi` feature. Initialises MPI on the first call; later
/// calls return the same group.
pub fn init() -> Result<Group> {
    Ok(match mpi::world()? {
        Some(c) => Group::of(c),
        None => Group::single(),
    })
}

/// Whether this build can talk to other processes (the `mpi` feature).
pub fn is_available() -> bool {
    cfg!(feature = "mpi")
}

impl Group {
    fn single() -> Group {
        Group {
            comm: None,
            rank: 0,
            size: 1,
        }
    }

    fn of(c: Arc<mpi::Comm>) -> Group {
        Group {
            rank: c.rank(),
            size: c.size(),
            comm: Some(c),
        }
    }

    /// This process's rank in the group, `0..size`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the group.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Splits the group: ranks that pass the same `color` form a new group, ranked
    /// by `key` (ties by their rank here). Every rank of this group must call it.
    pub fn split(&self, color: u32, key: i32) -> Result<Group> {
        match &self.comm {
            None => Ok(Group::single()),
            Some(c) => Ok(Group::of(Arc::new(c.split(color, key)?))),
        }
    }

    /// Waits until every rank of the group has called it (eager, not lazy).
    pub fn barrier(&self) -> Result<()> {
        if let Some(c) = &self.comm {
            c.barrier();
        }
        Ok(())
    }

    pub(crate) fn comm(&self) -> Option<&mpi::Comm> {
        self.comm.as_deref()
    }
}

/// Dimensions a header holds; more are mixed into its last word.
const ROOM: usize = HEADER_WORDS - 5;

/// The header of one rank's side of a collective: op, dtype, peer (root), rank
/// count, element count, dimensions.
pub(crate) fn header(op: u64, dtype: DType, shape: &[usize], peer: usize) -> Header {
    let mut h = [0u64; HEADER_WORDS];
    h[0] = op;
    h[1] = DType::ALL.iter().position(|&d| d == dtype).unwrap_or(99) as u64;
    h[2] = peer as u64;
    h[3] = shape.len() as u64;
    h[4] = shape.iter().product::<usize>() as u64;
    for (i, &d) in shape.iter().enumerate() {
        if i < ROOM - 1 || shape.len() == ROOM {
            h[5 + i] = d as u64;
        } else {
            let w = &mut h[HEADER_WORDS - 1];
            *w = w.wrapping_mul(0x100_0000_01b3) ^ d as u64;
        }
    }
    h
}

/// Bytes of the array a header describes (0 for an unknown dtype).
pub(crate) fn header_bytes(h: &Header) -> usize {
    DType::ALL
        .get(h[1] as usize)
        .map_or(0, |d| h[4] as usize * d.size())
}

/// A header's dtype and shape as text, for errors.
pub(crate) fn describe(h: &Header) -> String {
    let dtype = DType::ALL
        .get(h[1] as usize)
        .map_or("?".to_string(), |d| d.to_string());
    let nd = h[3] as usize;
    let mut dims: Vec<String> = (0..nd.min(ROOM)).map(|i| h[5 + i].to_string()).collect();
    if nd > ROOM {
        dims[ROOM - 1] = "...".into();
    }
    format!("{dtype} [{}]", dims.join(", "))
}

pub(crate) fn error(op: &'static str, msg: impl Into<String>) -> Error {
    Error::invalid(op, msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_tell_shapes_apart_and_describe_them() {
        let h = header(1, DType::F32, &[3, 4], 0);
        assert_eq!(describe(&h), "f32 [3, 4]");
        assert_eq!(header_bytes(&h), 48);
        assert_ne!(h, header(1, DType::F32, &[4, 3], 0));
        assert_ne!(h, header(1, DType::F16, &[3, 4], 0));
        assert_ne!(h, header(2, DType::F32, &[3, 4], 0));
        assert_ne!(h, header(1, DType::F32, &[3, 4], 1));
        // Past the header's room the last dimensions are mixed into one word: still
        // told apart, shown with an ellipsis, the byte count exact.
        let long: Vec<usize> = (1..=13).map(|d| d % 3 + 1).collect();
        let mut other = long.clone();
        other.swap(11, 12);
        let (a, b) = (
            header(1, DType::U8, &long, 0),
            header(1, DType::U8, &other, 0),
        );
        assert_ne!(a, b);
        assert!(describe(&a).ends_with(", ...]"), "{}", describe(&a));
        assert_eq!(header_bytes(&a), long.iter().product::<usize>());
        assert_eq!(describe(&header(1, DType::Bool, &[], 0)), "bool []");
    }
}
