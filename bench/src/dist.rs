//! `--dist` (issue 39), under `mpirun -n 2` with a GPU per rank: `all_sum` of f32
//! arrays from 1 MiB to 1 GiB through `wmx::distributed`, beside what its host
//! staging costs measured piece by piece (the GPU's download, MPI's own
//! all-reduce on host memory, the upload): their sum is the staging limit, and
//! `wmx / limit` how close the collective comes to it. `bench/torch_allreduce.py`
//! times NCCL's all-reduce on the same sizes. With `--train`, the GPT step of
//! `--train` data-parallel: each rank a batch of its own, gradients averaged in
//! the compiled step.

use super::{Res, Row, err};
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use wmx::distributed::{self, Group};
use wmx::{Array, DType, Device};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Milliseconds of `f` on every rank (the slowest rank's), median of `reps`, with
/// the ranks lined up before each.
fn timed(g: &Group, dev: &Device, reps: usize, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
    f()?;
    dev.synchronize().map_err(err)?;
    let mut t = Vec::new();
    for _ in 0..reps {
        g.barrier().map_err(err)?;
        let s = std::time::Instant::now();
        f()?;
        dev.synchronize().map_err(err)?;
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    let mine = Array::from_slice_on(&[median(t)], &[1], &Device::cpu()).map_err(err)?;
    distributed::all_max(&mine, g)
        .map_err(err)?
        .item::<f64>()
        .map_err(err)
}

pub(crate) fn bench_dist(dev: &Device, smoke: bool, rows: &mut Vec<Row>) -> Res<()> {
    let g = distributed::init().map_err(err)?;
    let (r, n) = (g.rank(), g.size());
    println!("rank {r} of {n} on {dev}");
    let world = mpi::topology::SimpleCommunicator::world();
    let sizes: Vec<usize> = if smoke {
        vec![1 << 10, 1 << 16]
    } else {
        (0..6).map(|i| 1usize << (20 + 2 * i)).collect()
    };
    if r == 0 {
        println!(
            "all_sum f32 over {n} ranks: ms (GB/s of the array)\n{:>10} {:>16} {:>16} {:>12} {:>12} {:>12} {:>8}",
            "bytes", "wmx all_sum", "staging limit", "download", "MPI host", "upload", "wmx/lim"
        );
    }
    for bytes in sizes {
        let len = bytes / 4;
        let reps = if bytes >= 1 << 28 { 3 } else { 7 };
        let x =
            wmx::with_device(dev, || wmx::full(&[len], (r + 1) as f64, DType::F32)).map_err(err)?;
        x.eval().map_err(err)?;
        let one = wmx::scalar(1.0, DType::F32).map_err(err)?;
        // A fresh array each time: a GPU array read once keeps its host copy.
        let fresh = || wmx::multiply(&x, &one);
        let y = distributed::all_sum(&fresh().map_err(err)?, &g).map_err(err)?;
        let head = y
            .slice(&[wmx::Slice::range(0, 4)])
            .map_err(err)?
            .to_vec::<f32>()
            .map_err(err)?;
        let want = (n * (n + 1) / 2) as f32;
        if head.iter().any(|&v| v != want) {
            return Err(format!("all_sum gave {head:?}, expected {want}"));
        }
        let t_scale = timed(&g, dev, reps, || {
            fresh().and_then(|a| a.eval()).map_err(err)
        })?;
        let t_all = timed(&g, dev, reps, || {
            distributed::all_sum(&fresh().map_err(err)?, &g)
                .and_then(|a| a.eval())
                .map_err(err)
        })?;
        let t_down = timed(&g, dev, reps, || {
            fresh()
                .and_then(|a| a.to_vec::<f32>())
                .map(drop)
                .map_err(err)
        })?;
        let host = vec![0u8; bytes];
        let mut copies: Vec<Vec<u8>> = (0..reps + 1).map(|_| host.clone()).collect();
        let t_up = timed(&g, dev, reps, || {
            let b = copies.pop().ok_or("out of copies")?;
            Array::from_bytes_on(b, &[len], DType::F32, dev)
                .and_then(|a| a.eval())
                .map_err(err)
        })?;
        drop(copies);
        let send = vec![1.0f32; len];
        let mut recv = vec![0.0f32; len];
        let t_mpi = timed(&g, &Device::cpu(), reps, || {
            world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
            Ok(())
        })?;
        let wmx_ms = t_all - t_scale;
        let limit = t_down + t_mpi + t_up;
        let gb = |ms: f64| bytes as f64 / ms / 1e6;
        if r == 0 {
            println!(
                "{bytes:>10} {wmx_ms:>8.3} ({:>5.1}) {limit:>8.3} ({:>5.1}) {t_down:>12.3} {t_mpi:>12.3} {t_up:>12.3} {:>8.2}",
                gb(wmx_ms),
                gb(limit),
                limit / wmx_ms
            );
        }
        rows.push(Row {
            path: "wmx",
            op: "all_sum".into(),
            dtype: DType::F32,
            n: len,
            ms: wmx_ms,
            gbps: gb(wmx_ms),
            extra: vec![
                ("limit_ms", limit),
                ("download_ms", t_down),
                ("mpi_ms", t_mpi),
                ("upload_ms", t_up),
                ("scale_ms", t_scale),
            ],
        });
    }
    Ok(())
}
