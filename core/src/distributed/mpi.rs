//! The MPI transport (feature `mpi`): Open MPI or MPICH through rsmpi. Every call
//! holds one process-wide lock (MPI is initialised `Serialized`), moves bytes, and
//! does its own element handling where MPI has no type (f16, bf16, bool).

use super::{Header, Reduce};
use crate::{DType, Error, Result, f16};
use half::bf16;
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::topology::{Color, Communicator, SimpleCommunicator};
use mpi::traits::*;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// One communicator; every use goes through [`lock`], its release too.
pub(crate) struct Comm(std::mem::ManuallyDrop<SimpleCommunicator>);

impl Drop for Comm {
    fn drop(&mut self) {
        let _g = lock();
        // SAFETY: dropped once, here; the field is not used after.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.0) };
    }
}
// SAFETY: MPI is initialised with at least `Serialized` threading and every call
// on a communicator (including its drop) happens under `LOCK`.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

static LOCK: Mutex<()> = Mutex::new(());
static WORLD: OnceLock<std::result::Result<Option<std::sync::Arc<Comm>>, String>> = OnceLock::new();

fn lock() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Elements per MPI call (counts are C ints): 2^28, or `WMX_MPI_CHUNK` (for
/// tests of the chunked paths with small arrays).
fn chunk() -> usize {
    static CHUNK: OnceLock<usize> = OnceLock::new();
    *CHUNK.get_or_init(|| {
        std::env::var("WMX_MPI_CHUNK")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .map_or(1 << 28, |c| c.clamp(1, 1 << 28))
    })
}

/// Whether a launcher (mpirun, mpiexec, srun with PMI) started this process.
fn launched() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

/// The world communicator: `None` outside a launcher (a group of one).
pub(crate) fn world() -> Result<Option<std::sync::Arc<Comm>>> {
    WORLD
        .get_or_init(|| {
            if !launched() {
                return Ok(None);
            }
            let _g = lock();
            let Some((universe, threading)) =
                mpi::initialize_with_threading(mpi::Threading::Serialized)
            else {
                return Err("MPI was initialised outside wmx".into());
            };
            if threading < mpi::Threading::Serialized {
                return Err(format!(
                    "the MPI library gives threading level {threading:?}; wmx needs Serialized"
                ));
            }
            let world = universe.world();
            // The universe finalises MPI when dropped: it never is; `at_exit` does.
            std::mem::forget(universe);
            at_exit();
            Ok(Some(std::sync::Arc::new(Comm(
                std::mem::ManuallyDrop::new(world),
            ))))
        })
        .clone()
        .map_err(|msg| Error::invalid("distributed::init", msg))
}

/// At exit, MPI is finalised when the process ends with status 0; any other status
/// (an `Err` from main, a panic) aborts the whole job with a message, so the other
/// ranks do not wait for this one forever.
fn at_exit() {
    extern "C" fn finish(status: std::ffi::c_int, _: *mut std::ffi::c_void) {
        // A lock held by a thread that did not finish is not waited for.
        let _g = LOCK.try_lock();
        unsafe {
            if status == 0 {
                mpi::ffi::MPI_Finalize();
            } else {
                let mut rank = 0;
                mpi::ffi::MPI_Comm_rank(mpi::ffi::RSMPI_COMM_WORLD, &mut rank);
                eprintln!(
                    "wmx distributed: rank {rank} is exiting with status {status}: ending the job"
                );
                mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, status);
            }
        }
    }
    #[cfg(target_env = "gnu")]
    unsafe {
        unsafe extern "C" {
            fn on_exit(
                f: extern "C" fn(std::ffi::c_int, *mut std::ffi::c_void),
                arg: *mut std::ffi::c_void,
            ) -> std::ffi::c_int;
        }
        on_exit(finish, std::ptr::null_mut());
    }
    #[cfg(not(target_env = "gnu"))]
    unsafe {
        // Without glibc's on_exit the status is unknown: finalise.
        extern "C" fn fin() {
            finish(0, std::ptr::null_mut());
        }
        unsafe extern "C" {
            fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
        }
        atexit(fin);
    }
}

impl Comm {
    pub(crate) fn rank(&self) -> usize {
        let _g = lock();
        self.0.rank() as usize
    }

    pub(crate) fn size(&self) -> usize {
        let _g = lock();
        self.0.size() as usize
    }

    /// MPI_Comm_split: ranks with the same `color` form a group, ordered by `key`.
    pub(crate) fn split(&self, color: u32, key: i32) -> Result<Comm> {
        let _g = lock();
        let c = i32::try_from(color)
            .map_err(|_| Error::invalid("Group::split", format!("color {color} is too large")))?;
        self.0
            .split_by_color_with_key(Color::with_value(c), key)
            .map(|c| Comm(std::mem::ManuallyDrop::new(c)))
            .ok_or_else(|| Error::invalid("Group::split", "MPI gave no communicator"))
    }

    pub(crate) fn barrier(&self) {
        let _g = lock();
        self.0.barrier();
    }

    /// Every rank's header, in rank order.
    pub(crate) fn headers(&self, h: &Header) -> Vec<Header> {
        let _g = lock();
        let mut all = vec![0u64; h.len() * self.0.size() as usize];
        self.0.all_gather_into(&h[..], &mut all[..]);
        all.chunks(h.len())
            .map(|c| c.try_into().expect("header length"))
            .collect()
    }

    /// Elementwise reduction of every rank's `x` into `out` (same length).
    pub(crate) fn all_reduce(&self, op: Reduce, dtype: DType, x: &[u8], out: &mut [u8]) {
        let _g = lock();
        let c = &self.0;
        match dtype {
            DType::Bool => reduce_as::<u8>(c, bool_op(op), x, out, false),
            DType::U8 => reduce_as::<u8>(c, op, x, out, false),
            DType::U32 => reduce_as::<u32>(c, op, x, out, false),
            // Sums wrap (docs/SEMANTICS.md): add the bits as unsigned.
            DType::I32 if op == Reduce::Sum => reduce_as::<u32>(c, op, x, out, false),
            DType::I32 => reduce_as::<i32>(c, op, x, out, false),
            DType::I64 if op == Reduce::Sum => reduce_as::<u64>(c, op, x, out, false),
            DType::I64 => reduce_as::<i64>(c, op, x, out, false),
            DType::U64 => reduce_as::<u64>(c, op, x, out, false),
            DType::F32 => reduce_as::<f32>(c, op, x, out, false),
            DType::F64 => reduce_as::<f64>(c, op, x, out, false),
            DType::C64 => unreachable!("collectives move complex64 as f32 pairs"),
            DType::F16 | DType::BF16 => reduce_16(c, op, dtype, x, out, false),
        }
    }

    /// Sums every rank's `x` and keeps this rank's block (`out`, `x.len() / size`).
    pub(crate) fn reduce_scatter(&self, dtype: DType, x: &[u8], out: &mut [u8]) {
        let _g = lock();
        let c = &self.0;
        let op = Reduce::Sum;
        match dtype {
            DType::Bool => reduce_as::<u8>(c, bool_op(op), x, out, true),
            DType::U8 => reduce_as::<u8>(c, op, x, out, true),
            DType::U32 | DType::I32 => reduce_as::<u32>(c, op, x, out, true),
            DType::I64 | DType::U64 => reduce_as::<u64>(c, op, x, out, true),
            DType::F32 => reduce_as::<f32>(c, op, x, out, true),
            DType::F64 => reduce_as::<f64>(c, op, x, out, true),
            DType::C64 => unreachable!("collectives move complex64 as f32 pairs"),
            DType::F16 | DType::BF16 => reduce_16(c, op, dtype, x, out, true),
        }
    }

    /// Every rank's `x` (same length), concatenated in rank order into `out`.
    pub(crate) fn all_gather(&self, x: &[u8], out: &mut [u8]) {
        let _g = lock();
        let n = self.0.size() as usize;
        if x.len() <= chunk() {
            self.0.all_gather_into(x, out);
            return;
        }
        let mut tmp = Vec::new();
        for start in (0..x.len()).step_by(chunk()) {
            let part = &x[start..(start + chunk()).min(x.len())];
            tmp.resize(part.len() * n, 0u8);
            self.0.all_gather_into(part, &mut tmp[..]);
            for (r, got) in tmp.chunks(part.len()).enumerate() {
                out[r * x.len() + start..][..part.len()].copy_from_slice(got);
            }
        }
    }

    /// `buf` from rank `root` into every rank's `buf`.
    pub(crate) fn broadcast(&self, root: usize, buf: &mut [u8]) {
        let _g = lock();
        let p = self.0.process_at_rank(root as i32);
        for part in buf.chunks_mut(chunk()) {
            p.broadcast_into(part);
        }
    }

    pub(crate) fn send(&self, dst: usize, h: &Header, x: &[u8]) {
        let _g = lock();
        let p = self.0.process_at_rank(dst as i32);
        p.send_with_tag(&h[..], TAG_HEADER);
        for part in x.chunks(chunk()) {
            p.send_with_tag(part, TAG_DATA);
        }
    }

    /// The sender's header, then its data into `out` when the header says it has
    /// `out.len()` bytes (else the data is received and dropped).
    pub(crate) fn recv(
        &self,
        src: usize,
        out: &mut [u8],
        bytes_of: impl Fn(&Header) -> usize,
    ) -> Header {
        let _g = lock();
        let p = self.0.process_at_rank(src as i32);
        let mut h: Header = [0; HEADER_WORDS];
        p.receive_into_with_tag(&mut h[..], TAG_HEADER);
        let bytes = bytes_of(&h);
        if bytes == out.len() {
            for part in out.chunks_mut(chunk()) {
                p.receive_into_with_tag(part, TAG_DATA);
            }
        } else {
            let mut scratch = vec![0u8; bytes.min(chunk())];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk());
                p.receive_into_with_tag(&mut scratch[..n], TAG_DATA);
                left -= n;
            }
        }
        h
    }
}

use super::HEADER_WORDS;
const TAG_HEADER: i32 = 0x776d;
const TAG_DATA: i32 = 0x776e;

/// Booleans as bytes: a sum saturates (logical or), max is or, min is and.
fn bool_op(op: Reduce) -> Reduce {
    match op {
        Reduce::Sum | Reduce::Max => Reduce::Max,
        Reduce::Min => Reduce::Min,
    }
}

fn system_op(op: Reduce) -> SystemOperation {
    match op {
        Reduce::Sum => SystemOperation::sum(),
        Reduce::Max => SystemOperation::max(),
        Reduce::Min => SystemOperation::min(),
    }
}

/// A reduction over elements of `T` (all-reduce, or reduce-scatter when `scatter`).
fn reduce_as<T: Equivalence + bytemuck::Pod + Default>(
    c: &SimpleCommunicator,
    op: Reduce,
    x: &[u8],
    out: &mut [u8],
    scatter: bool,
) {
    // In place where the bytes are aligned for T (CPU buffers are), else copies.
    let copied: Vec<T>;
    let xs: &[T] = match bytemuck::try_cast_slice(x) {
        Ok(xs) => xs,
        Err(_) => {
            let mut v = vec![T::default(); x.len() / std::mem::size_of::<T>()];
            bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(x);
            copied = v;
            &copied
        }
    };
    match bytemuck::try_cast_slice_mut::<u8, T>(out) {
        Ok(os) => reduce_typed(c, op, xs, os, scatter),
        Err(_) => {
            let mut os = vec![T::default(); out.len() / std::mem::size_of::<T>()];
            reduce_typed(c, op, xs, &mut os, scatter);
            out.copy_from_slice(bytemuck::cast_slice(&os));
        }
    }
}

fn reduce_typed<T: Equivalence + Copy>(
    c: &SimpleCommunicator,
    op: Reduce,
    xs: &[T],
    os: &mut [T],
    scatter: bool,
) {
    if !scatter {
        for (x, o) in xs.chunks(chunk()).zip(os.chunks_mut(chunk())) {
            c.all_reduce_into(x, o, system_op(op));
        }
        return;
    }
    // Reduce-scatter in column chunks of each rank's block.
    let n = c.size() as usize;
    let block = os.len();
    if block <= chunk() {
        c.reduce_scatter_block_into(xs, os, system_op(op));
        return;
    }
    for start in (0..block).step_by(chunk()) {
        let len = chunk().min(block - start);
        let mut part: Vec<T> = Vec::with_capacity(len * n);
        for r in 0..n {
            part.extend_from_slice(&xs[r * block + start..][..len]);
        }
        c.reduce_scatter_block_into(&part[..], &mut os[start..start + len], system_op(op));
    }
}

/// f16 and bf16 reduce in f32 and round once.
fn reduce_16(
    c: &SimpleCommunicator,
    op: Reduce,
    dtype: DType,
    x: &[u8],
    out: &mut [u8],
    scatter: bool,
) {
    let bits: Vec<u16> = x
        .chunks(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    let wide: Vec<f32> = if dtype == DType::F16 {
        bits.iter().map(|&b| f16::from_bits(b).to_f32()).collect()
    } else {
        bits.iter().map(|&b| bf16::from_bits(b).to_f32()).collect()
    };
    let mut os = vec![0f32; out.len() / 2];
    reduce_typed(c, op, &wide, &mut os, scatter);
    let back: Vec<u16> = if dtype == DType::F16 {
        os.iter().map(|&v| f16::from_f32(v).to_bits()).collect()
    } else {
        os.iter().map(|&v| bf16::from_f32(v).to_bits()).collect()
    };
    out.copy_from_slice(bytemuck::cast_slice(&back));
}
