//! The transport of a build without the `mpi` feature: no communicator exists, so
//! every group is a group of one and no method below can be reached.

use super::{Header, Reduce};
use crate::{DType, Result};

pub(crate) enum Comm {}

pub(crate) fn world() -> Result<Option<std::sync::Arc<Comm>>> {
    // Started by mpirun with several ranks but built without MPI: each rank would
    // work alone, so say so once.
    static WARNED: std::sync::Once = std::sync::Once::new();
    let ranks = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse::<usize>().ok());
    if let Some(n) = ranks.filter(|&n| n > 1) {
        WARNED.call_once(|| {
            eprintln!(
                "wmx: started as one of {n} ranks, but built without the `mpi` feature: \
                 this rank is a group of one (build wmx with --features mpi)"
            )
        });
    }
    Ok(None)
}

impl Comm {
    pub(crate) fn rank(&self) -> usize {
        match *self {}
    }
    pub(crate) fn size(&self) -> usize {
        match *self {}
    }
    pub(crate) fn split(&self, _: u32, _: i32) -> Result<Comm> {
        match *self {}
    }
    pub(crate) fn barrier(&self) {
        match *self {}
    }
    pub(crate) fn headers(&self, _: &Header) -> Vec<Header> {
        match *self {}
    }
    pub(crate) fn all_reduce(&self, _: Reduce, _: DType, _: &[u8], _: &mut [u8]) {
        match *self {}
    }
    pub(crate) fn reduce_scatter(&self, _: DType, _: &[u8], _: &mut [u8]) {
        match *self {}
    }
    pub(crate) fn all_gather(&self, _: &[u8], _: &mut [u8]) {
        match *self {}
    }
    pub(crate) fn broadcast(&self, _: usize, _: &mut [u8]) {
        match *self {}
    }
    pub(crate) fn send(&self, _: usize, _: &Header, _: &[u8]) {
        match *self {}
    }
    pub(crate) fn recv(&self, _: usize, _: &mut [u8], _: impl Fn(&Header) -> usize) -> Header {
        match *self {}
    }
}
