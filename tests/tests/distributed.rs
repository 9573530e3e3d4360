//! `wmx_core::distributed` under `mpirun`: the test runs itself with 2 and 4 ranks
//! (oversubscribed), each rank checking every collective in every dtype, the errors
//! and the transforms, on the CPU and on the GPU (lavapipe in CI). Every rank
//! builds every rank's inputs from the same seeds, so the references are host loops
//! over all of them. Without a launcher the same test checks the group of one, then
//! starts the launches (it fails when `mpirun` is missing: the README installs it).

use std::io::Read;
use wmx_core::distributed::{self as dist, Group};
use wmx_core::nn::{self, Layer, ModuleExt};
use wmx_core::{Array, DType, Device, Result};

const CHILD: &str = "WMX_DIST_CHILD";

fn gpu() -> Option<Device> {
    wmx_tests::gpu::device(wmx_webgpu::open)
}

#[test]
fn collectives() {
    if std::env::var_os(CHILD).is_some() {
        let world = dist::init().unwrap();
        assert!(
            world.size() > 1,
            "a launched rank sees a group of {}",
            world.size()
        );
        let mut devices = vec![Device::cpu()];
        devices.extend(gpu());
        for d in &devices {
            rank_checks(&world, d).unwrap_or_else(|e| panic!("rank {} on {d}: {e}", world.rank()));
        }
        // One line, one write: the ranks' outputs interleave.
        println!("rank {} passed", world.rank());
        return;
    }
    single().unwrap();
    // Three ranks with 4-element MPI calls: the chunked paths of large arrays.
    for (n, chunk) in [(2, ""), (4, ""), (3, "4")] {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("mpirun")
            .args(["-n", &n.to_string(), "--oversubscribe"])
            .arg(&exe)
            .args(["--exact", "collectives", "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .env("WMX_MPI_CHUNK", chunk)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .unwrap_or_else(|e| {
                panic!("mpirun could not start ({e}): install Open MPI (README's test command)")
            });
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "mpirun -n {n} (chunk {chunk:?}) failed:\n{text}"
        );
        for r in 0..n {
            assert!(
                text.contains(&format!("rank {r} passed")),
                "mpirun -n {n}: rank {r} did not pass:\n{text}"
            );
        }
    }
}

/// A rank that ends with a non-zero status while the other waits in a collective
/// ends the whole job (MPI_Abort from wmx's exit handler), with a message naming
/// it: no hang.
#[test]
fn a_failing_rank_ends_the_job() {
    if std::env::var_os(CHILD).is_some() {
        let world = dist::init().unwrap();
        if world.rank() == 1 {
            std::process::exit(3);
        }
        let x = Array::from_slice_on(&[1.0f32], &[1], &Device::cpu()).unwrap();
        let _ = dist::all_sum(&x, &world).unwrap().eval();
        panic!("rank 0's all_sum returned although rank 1 never joined it");
    }
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new("mpirun")
        .args(["-n", "2", "--oversubscribe"])
        .arg(&exe)
        .args([
            "--exact",
            "a_failing_rank_ends_the_job",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mpirun starts (README's test command installs Open MPI)");
    // Drained while waiting: a full pipe would stall the job.
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                r.read_to_string(&mut s).ok();
            }
            s
        })
    };
    let out_t = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let err_t = drain(child.stderr.take().map(|r| Box::new(r) as _));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            child.kill().ok();
            panic!("the job still ran 120 s after rank 1 exited: it hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let text = format!("{}{}", out_t.join().unwrap(), err_t.join().unwrap());
    assert!(!status.success(), "the job succeeded:\n{text}");
    assert!(
        text.contains("rank 1 is exiting with status 3: ending the job"),
        "{text}"
    );
}

/// Outside a launcher: a group of one, whose collectives are identities.
fn single() -> Result<()> {
    let g = dist::init()?;
    assert_eq!((g.rank(), g.size()), (0, 1));
    let x = Array::from_slice_on(&[1.0f32, -2.0, 3.5], &[3], &Device::cpu())?;
    for y in [
        dist::all_sum(&x, &g)?,
        dist::all_max(&x, &g)?,
        dist::all_min(&x, &g)?,
        dist::all_gather(&x, &g)?,
        dist::reduce_scatter(&x, &g)?,
        dist::broadcast(&x, 0, &g)?,
    ] {
        assert_eq!(y.to_vec::<f32>()?, vec![1.0, -2.0, 3.5]);
    }
    let s = Array::from_slice_on(&[4i32], &[], &Device::cpu())?;
    assert_eq!(dist::all_gather(&s, &g)?.shape(), &[1]);
    assert!(
        dist::send(&x, 0, &g)
            .unwrap_err()
            .to_string()
            .contains("itself")
    );
    assert!(
        dist::broadcast(&x, 1, &g)
            .unwrap_err()
            .to_string()
            .contains("not in a group")
    );
    assert!(dist::reduce_scatter(&s, &g).is_err());
    assert_eq!(g.split(3, 0)?.size(), 1);
    g.barrier()
}

/// A deterministic value for element `i` of `rank`'s input number `seed`: quarter
/// steps in [-8, 8) (sums of four are exact even in bf16), or small non-negative
/// integers, or 0/1 for booleans.
fn value(seed: u64, rank: usize, i: usize, dtype: DType) -> f64 {
    let mut h = seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add((rank as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9))
        .wrapping_add((i as u64).wrapping_mul(0x94d0_49bb_1331_11eb));
    h ^= h >> 31;
    h = h.wrapping_mul(0xd6e8_feb8_6659_fd93);
    h ^= h >> 29;
    match dtype {
        DType::Bool => (h % 2) as f64,
        DType::U8 | DType::U32 | DType::U64 => (h % 60) as f64,
        DType::I32 | DType::I64 => (h % 120) as f64 - 60.0,
        _ => (h % 64) as f64 / 4.0 - 8.0,
    }
}

fn input(seed: u64, rank: usize, shape: &[usize], dtype: DType, d: &Device) -> Result<Array> {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|i| value(seed, rank, i, dtype)).collect();
    Array::from_slice_on(&v, shape, &Device::cpu())?
        .astype(dtype)?
        .to_device(d)
}

fn values(seed: u64, rank: usize, n: usize, dtype: DType) -> Vec<f64> {
    (0..n).map(|i| value(seed, rank, i, dtype)).collect()
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

fn rank_checks(g: &Group, d: &Device) -> Result<()> {
    let (r, n) = (g.rank(), g.size());
    let dtypes: Vec<DType> = DType::REAL
        .into_iter()
        .filter(|&t| d.check_dtype(t).is_ok())
        .collect();
    if d.kind() == wmx_core::DeviceKind::Cpu {
        assert_eq!(dtypes.len(), DType::REAL.len());
    }
    let shape = [3usize, 5];
    let len = 15;
    for (k, &t) in dtypes.iter().enumerate() {
        let seed = k as u64;
        let x = input(seed, r, &shape, t, d)?;
        let all: Vec<Vec<f64>> = (0..n).map(|s| values(seed, s, len, t)).collect();
        let fold = |f: fn(f64, f64) -> f64| -> Vec<f64> {
            (0..len)
                .map(|i| (1..n).fold(all[0][i], |a, s| f(a, all[s][i])))
                .collect()
        };
        let what = |op: &str| format!("{op} {t} on {d}, rank {r} of {n}");
        let sum = if t == DType::Bool {
            fold(f64::max)
        } else {
            fold(|a, b| a + b)
        };
        let y = dist::all_sum(&x, g)?;
        assert_eq!((y.dtype(), y.shape(), y.device()), (t, &shape[..], d));
        close(&y.to_vec_f64()?, &sum, &what("all_sum"));
        close(
            &dist::all_max(&x, g)?.to_vec_f64()?,
            &fold(f64::max),
            &what("all_max"),
        );
        close(
            &dist::all_min(&x, g)?.to_vec_f64()?,
            &fold(f64::min),
            &what("all_min"),
        );
        let gathered = dist::all_gather(&x, g)?;
        assert_eq!(gathered.shape(), &[3 * n, 5]);
        close(&gathered.to_vec_f64()?, &all.concat(), &what("all_gather"));
        let root = n - 1;
        close(
            &dist::broadcast(&x, root, g)?.to_vec_f64()?,
            &all[root],
            &what("broadcast"),
        );
        // reduce_scatter of [2n, 3]: block r of the sum.
        let rs_all: Vec<Vec<f64>> = (0..n).map(|s| values(seed + 50, s, 6 * n, t)).collect();
        let xs = input(seed + 50, r, &[2 * n, 3], t, d)?;
        let want: Vec<f64> = (6 * r..6 * r + 6)
            .map(|i| {
                let v = (0..n).map(|s| rs_all[s][i]);
                if t == DType::Bool {
                    v.fold(0.0, f64::max)
                } else {
                    v.sum()
                }
            })
            .collect();
        let got = dist::reduce_scatter(&xs, g)?;
        assert_eq!(got.shape(), &[2, 3]);
        close(&got.to_vec_f64()?, &want, &what("reduce_scatter"));
        // A ring: even ranks send first, odd ranks receive first (a send blocks
        // until its receive starts once messages are large).
        let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
        let send = |x: &Array| -> Result<()> { dist::send(x, next, g)?.eval() };
        let recv = || -> Result<Array> {
            let y = dist::recv_like(&x, prev, g)?;
            y.eval()?;
            Ok(y)
        };
        let got = if r % 2 == 0 {
            send(&x)?;
            recv()?
        } else {
            let y = recv()?;
            send(&x)?;
            y
        };
        assert_eq!(got.device(), d);
        close(&got.to_vec_f64()?, &all[prev], &what("send/recv"));
    }
    // complex64 moves as f32 pairs: sums add both parts; max is an error.
    let parts = [70, 71].map(|s| input(s, r, &[3, 5], DType::F32, d));
    let z = wmx_core::complex(&parts[0].clone()?, &parts[1].clone()?)?;
    let pair_sum: Vec<f64> = (0..15)
        .flat_map(|i| [70, 71].map(|s| (0..n).map(|q| value(s, q, i, DType::F32)).sum::<f64>()))
        .collect();
    let y = dist::all_sum(&z, g)?;
    assert_eq!((y.dtype(), y.shape()), (DType::C64, &[3usize, 5][..]));
    close(&y.to_vec_f64()?, &pair_sum, "all_sum c64");
    let gathered = dist::all_gather(&z, g)?;
    assert_eq!(
        (gathered.dtype(), gathered.shape()),
        (DType::C64, &[3 * n, 5][..])
    );
    let mine = &gathered.to_vec_f64()?[30 * r..30 * r + 30];
    close(mine, &z.to_vec_f64()?, "all_gather c64");
    let e = dist::all_max(&z, g)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("all_max") && e.contains("c64"),
        "all_max of c64: {e:?}"
    );
    // Views and scalars go in as they are.
    let x = input(90, r, &[4, 6], DType::F32, d)?;
    let view = x.transpose(None)?.slice(&[wmx_core::Slice::range(1, 4)])?;
    let want: Vec<f64> = {
        let all: Vec<Vec<f64>> = (0..n).map(|s| values(90, s, 24, DType::F32)).collect();
        (1..4)
            .flat_map(|i| (0..4).map(move |j| (i, j)))
            .map(|(i, j)| all.iter().map(|v| v[j * 6 + i]).sum())
            .collect()
    };
    close(
        &dist::all_sum(&view, g)?.to_vec_f64()?,
        &want,
        "all_sum of a view",
    );
    let s = Array::from_slice_on(&[r as f32], &[], &Device::cpu())?.to_device(d)?;
    let gs = dist::all_gather(&s, g)?;
    assert_eq!(gs.shape(), &[n]);
    close(
        &gs.to_vec_f64()?,
        &(0..n).map(|s| s as f64).collect::<Vec<_>>(),
        "gathered scalars",
    );

    // Empty arrays: every collective, shapes kept.
    let e = Array::from_slice_on(&[0.0f32; 0], &[0, 3], d)?;
    assert_eq!(dist::all_sum(&e, g)?.shape(), &[0, 3]);
    assert_eq!(dist::all_max(&e, g)?.to_vec::<f32>()?, Vec::<f32>::new());
    assert_eq!(dist::all_gather(&e, g)?.shape(), &[0, 3]);
    assert_eq!(dist::reduce_scatter(&e, g)?.shape(), &[0, 3]);
    assert_eq!(
        dist::broadcast(&e, 0, g)?.to_vec::<f32>()?,
        Vec::<f32>::new()
    );
    let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
    let got = if r % 2 == 0 {
        dist::send(&e, next, g)?.eval()?;
        let got = dist::recv_like(&e, prev, g)?;
        got.eval()?;
        got
    } else {
        let got = dist::recv_like(&e, prev, g)?;
        got.eval()?;
        dist::send(&e, next, g)?.eval()?;
        got
    };
    assert_eq!(got.shape(), &[0, 3]);

    errors(g, d)?;
    transforms(g, d)?;
    nn_helpers(g, d)?;
    // Split by parity: sums over the ranks of the same parity.
    let sub = g.split((r % 2) as u32, -(r as i32))?;
    let mates: Vec<usize> = (0..n).filter(|s| s % 2 == r % 2).collect();
    assert_eq!(sub.size(), mates.len());
    // Keys are descending ranks: the highest rank of the parity is rank 0 there.
    assert_eq!(
        sub.rank(),
        mates.iter().rev().position(|&s| s == r).unwrap()
    );
    let v = Array::from_slice_on(&[r as f32 + 1.0], &[1], d)?;
    let want: f32 = mates.iter().map(|&s| s as f32 + 1.0).sum();
    assert_eq!(dist::all_sum(&v, &sub)?.to_vec::<f32>()?, vec![want]);
    g.barrier()
}

/// Disagreements are an `Err` on every rank, and the ranks stay in step afterwards.
fn errors(g: &Group, d: &Device) -> Result<()> {
    let (r, n) = (g.rank(), g.size());
    let len = if r == 0 { 3 } else { 4 };
    let x = Array::from_slice_on(&vec![1.0f32; len], &[len], d)?;
    let e = dist::all_sum(&x, g)?.eval().unwrap_err().to_string();
    assert!(
        e.contains("disagree") && e.contains("rank 0: f32 [3]") && e.contains("rank 1: f32 [4]"),
        "{e}"
    );
    let t = if r == n - 1 { DType::I32 } else { DType::F32 };
    let y = Array::from_slice_on(&[2.0f32, 3.0], &[2], d)?.astype(t)?;
    let e = dist::all_gather(&y, g)?.eval().unwrap_err().to_string();
    assert!(e.contains("disagree") && e.contains("i32 [2]"), "{e}");
    // Two different collectives at once.
    let e = if r == 0 {
        dist::all_max(&y.astype(DType::F32)?, g)?.eval()
    } else {
        dist::all_sum(&y.astype(DType::F32)?, g)?.eval()
    }
    .unwrap_err()
    .to_string();
    assert!(e.contains("another collective"), "{e}");
    // A receive of the wrong shape names both sides; the message is drained.
    if r == 0 {
        dist::send(&x, 1, g)?.eval()?;
    } else if r == 1 {
        let e = dist::recv(&[5], DType::F32, 0, g)?
            .eval()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected f32 [5] from rank 0, which sent f32 [3]"),
            "{e}"
        );
    }
    // 5 rows split among 2, 3 or 4 ranks: never evenly.
    assert!(
        dist::reduce_scatter(&Array::from_slice_on(&[1.0f32; 5], &[5], d)?, g)
            .unwrap_err()
            .to_string()
            .contains("equal blocks")
    );
    assert!(dist::send(&x, r, g).is_err() && dist::recv(&[1], DType::F32, n, g).is_err());
    // Still in step.
    let one = Array::from_slice_on(&[1.0f32], &[1], d)?;
    assert_eq!(dist::all_sum(&one, g)?.to_vec::<f32>()?, vec![n as f32]);
    Ok(())
}

/// Gradients of the sum over ranks of each rank's `sum(f(x) * w_rank)`.
fn transforms(g: &Group, d: &Device) -> Result<()> {
    let (r, n) = (g.rank(), g.size());
    let f32s = |seed: u64, s: usize, len: usize| values(seed, s, len, DType::F32);
    let x = input(200, r, &[2, 3], DType::F32, d)?;
    let w = |len: usize, shape: &[usize]| input(300, r, shape, DType::F32, d).map(|a| (a, len));
    let ws = |len: usize| -> Vec<Vec<f64>> { (0..n).map(|s| f32s(300, s, len)).collect() };
    let grad_of = |f: &dyn Fn(&Array) -> Result<Array>, w: &Array| -> Result<Vec<f64>> {
        let w = w.clone();
        let gr = wmx_core::grad(
            move |a: &[Array]| Ok(vec![f(&a[0])?.multiply(&w)?.sum(None, false)?]),
            &[0],
        )(std::slice::from_ref(&x))?;
        gr[0].to_vec_f64()
    };
    // all_sum: the sum of every rank's w.
    let (w6, _) = w(6, &[2, 3])?;
    let sum_w: Vec<f64> = (0..6).map(|i| ws(6).iter().map(|v| v[i]).sum()).collect();
    close(
        &grad_of(&|a| dist::all_sum(a, g), &w6)?,
        &sum_w,
        "vjp all_sum",
    );
    // all_gather: this rank's block of the summed w.
    let (wg, _) = w(6 * n, &[2 * n, 3])?;
    let want: Vec<f64> = (6 * r..6 * r + 6)
        .map(|i| ws(6 * n).iter().map(|v| v[i]).sum())
        .collect();
    close(
        &grad_of(&|a| dist::all_gather(a, g), &wg)?,
        &want,
        "vjp all_gather",
    );
    // broadcast from rank 0: the root gets the sum, the others zero.
    let want = if r == 0 { sum_w.clone() } else { vec![0.0; 6] };
    close(
        &grad_of(&|a| dist::broadcast(a, 0, g), &w6)?,
        &want,
        "vjp broadcast",
    );
    // all_max: where x holds the maximum (the inputs have ties: split evenly).
    let xs: Vec<Vec<f64>> = (0..n).map(|s| f32s(200, s, 6)).collect();
    let want: Vec<f64> = (0..6)
        .map(|i| {
            let m = xs.iter().map(|v| v[i]).fold(f64::MIN, f64::max);
            let ties = xs.iter().filter(|v| v[i] == m).count() as f64;
            if xs[r][i] == m { sum_w[i] / ties } else { 0.0 }
        })
        .collect();
    close(
        &grad_of(&|a| dist::all_max(a, g), &w6)?,
        &want,
        "vjp all_max",
    );
    // reduce_scatter of [2n, 3]: every rank's w, gathered.
    let xr = input(210, r, &[2 * n, 3], DType::F32, d)?;
    let (wr, _) = w(6, &[2, 3])?;
    let gr = wmx_core::grad(
        move |a: &[Array]| {
            Ok(vec![
                dist::reduce_scatter(&a[0], g)?
                    .multiply(&wr)?
                    .sum(None, false)?,
            ])
        },
        &[0],
    )(&[xr])?;
    close(&gr[0].to_vec_f64()?, &ws(6).concat(), "vjp reduce_scatter");
    // jvp of all_sum: the sum of the tangents.
    let t = input(400, r, &[2, 3], DType::F32, d)?;
    let (_, tan) = wmx_core::jvp(
        |a: &[Array]| Ok(vec![dist::all_sum(&a[0], g)?]),
        std::slice::from_ref(&x),
        &[t],
    )?;
    let want: Vec<f64> = (0..6)
        .map(|i| (0..n).map(|s| f32s(400, s, 6)[i]).sum())
        .collect();
    close(&tan[0].to_vec_f64()?, &want, "jvp all_sum");
    // vmap of all_gather over a leading batch axis: per example, rank blocks.
    let xb = input(500, r, &[2, 3], DType::F32, d)?;
    let yb = wmx_core::vmap(
        |a: &[Array]| Ok(vec![dist::all_gather(&a[0], g)?]),
        &[Some(0)],
        &[0],
    )(&[xb])?;
    assert_eq!(yb[0].shape(), &[2, 3 * n]);
    let all: Vec<Vec<f64>> = (0..n).map(|s| f32s(500, s, 6)).collect();
    let want: Vec<f64> = (0..2)
        .flat_map(|b| (0..n).flat_map(move |s| (0..3).map(move |j| (b, s, j))))
        .map(|(b, s, j)| all[s][b * 3 + j])
        .collect();
    close(&yb[0].to_vec_f64()?, &want, "vmap all_gather");
    // Compiled: the same as eager.
    let gc = g.clone();
    let step =
        wmx_core::compile(move |a: &[Array]| Ok(vec![dist::all_sum(&a[0].multiply(&a[0])?, &gc)?]));
    let want: Vec<f64> = (0..6)
        .map(|i| xs.iter().map(|v| v[i] * v[i]).sum())
        .collect();
    close(&step.call1(&x)?.to_vec_f64()?, &want, "compiled all_sum");
    Ok(())
}

/// Gradient averaging (several buckets, two dtypes) and the tensor-parallel pair,
/// against the same model unsharded on one process.
fn nn_helpers(g: &Group, d: &Device) -> Result<()> {
    let (r, n) = (g.rank(), g.size());
    let mut grads = nn::Params::new();
    let specs = [
        ("a", vec![3usize, 4], DType::F32),
        ("b", vec![5], DType::F16),
        ("c", vec![2, 2], DType::F32),
        ("d", vec![7], DType::F32),
    ];
    for (k, (name, shape, t)) in specs.iter().enumerate() {
        grads.insert(name.to_string(), input(600 + k as u64, r, shape, *t, d)?);
    }
    // 64-byte buckets: "a" alone (48 bytes), "c" + ..., several collectives.
    let avg = nn::average_gradients(&grads, g, Some(64))?;
    for (k, (name, shape, t)) in specs.iter().enumerate() {
        let len: usize = shape.iter().product();
        let want: Vec<f64> = (0..len)
            .map(|i| (0..n).map(|s| value(600 + k as u64, s, i, *t)).sum::<f64>() / n as f64)
            .collect();
        let got = &avg[*name];
        assert_eq!((got.shape(), got.dtype()), (&shape[..], *t));
        let tol = if *t == DType::F16 { 1e-3 } else { 1e-6 };
        for (i, (a, b)) in got.to_vec_f64()?.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= tol * b.abs().max(1.0),
                "average_gradients {name}[{i}]: {a} vs {b}"
            );
        }
    }
    let bad: nn::Params = [("i".to_string(), Array::from_slice_on(&[1i32], &[1], d)?)].into();
    assert!(nn::average_gradients(&bad, g, None).is_err());

    // Megatron's block, x -> relu(x W1^T + b1) W2^T + b2, its hidden layer split
    // over the ranks, against the whole block; the loss is the same on every rank.
    let key = wmx_core::random::key(7)?;
    let keys = wmx_core::random::split(&key, 4)?;
    let k = |i: isize| {
        keys.slice(&[wmx_core::Slice::range(i, i + 1)])?
            .reshape(&[2])
    };
    let hidden = 4 * n;
    let on = |a: Array| a.to_device(d);
    let l1 = nn::Linear::new(&k(0)?, 6, hidden, true)?;
    let l2 = nn::Linear::new(&k(1)?, hidden, 3, true)?;
    let (l1, l2) = (
        nn::Linear::from_arrays(
            on(l1.weight.value())?,
            l1.bias.as_ref().map(|b| on(b.value())).transpose()?,
        )?,
        nn::Linear::from_arrays(
            on(l2.weight.value())?,
            l2.bias.as_ref().map(|b| on(b.value())).transpose()?,
        )?,
    );
    let x = on(wmx_core::random::normal(
        &k(2)?,
        &[5, 6],
        0.0,
        1.0,
        DType::F32,
    )?)?;
    let w = on(wmx_core::random::normal(
        &k(3)?,
        &[5, 3],
        0.0,
        1.0,
        DType::F32,
    )?)?;
    let whole = |x: &Array| l2.forward(&nn::relu(&l1.forward(x)?)?);
    let a = nn::AllToShardedLinear::from_linear(&l1, g)?;
    let b = nn::ShardedToAllLinear::from_linear(&l2, g)?;
    let split = |x: &Array| b.forward(&nn::relu(&a.forward(x)?)?);
    close(
        &split(&x)?.to_vec_f64()?,
        &whole(&x)?.to_vec_f64()?,
        "tensor-parallel forward",
    );
    let loss =
        |f: &dyn Fn(&Array) -> Result<Array>, x: &Array| f(x)?.multiply(&w)?.sum(None, false);
    let gx_whole = wmx_core::grad(|v: &[Array]| Ok(vec![loss(&whole, &v[0])?]), &[0])(
        std::slice::from_ref(&x),
    )?;
    let gx_split = wmx_core::grad(|v: &[Array]| Ok(vec![loss(&split, &v[0])?]), &[0])(
        std::slice::from_ref(&x),
    )?;
    close(
        &gx_split[0].to_vec_f64()?,
        &gx_whole[0].to_vec_f64()?,
        "tensor-parallel input gradient",
    );
    // The shards' weight gradients are the rows / columns of the whole block's.
    let (_, gw_whole) =
        nn::value_and_grad(&l1, |v: &[Array]| loss(&whole, &v[0]))(std::slice::from_ref(&x))?;
    let (_, gw_split) =
        nn::value_and_grad(&a, |v: &[Array]| loss(&split, &v[0]))(std::slice::from_ref(&x))?;
    let rows =
        gw_whole["weight"].slice(&[wmx_core::Slice::range(4 * r as isize, 4 * r as isize + 4)])?;
    close(
        &gw_split["weight"].to_vec_f64()?,
        &rows.to_vec_f64()?,
        "tensor-parallel weight gradient",
    );
    assert_eq!(a.parameters()["weight"].shape(), &[4, 6]);

    // A compiled data-parallel step (gradients averaged inside it) equals the eager
    // one: value_and_grad, average_gradients, update.
    let make = || -> Result<nn::Linear> {
        let l = nn::Linear::new(&k(0)?, 6, 2, true)?;
        nn::Linear::from_arrays(
            on(l.weight.value())?,
            l.bias.as_ref().map(|b| on(b.value())).transpose()?,
        )
    };
    let xb = input(700, r, &[4, 6], DType::F32, d)?;
    let yb = input(701, r, &[4, 2], DType::F32, d)?;
    let mse = |m: &nn::Linear, a: &[Array]| {
        nn::losses::mse(&m.forward(&a[0])?, &a[1], nn::losses::Reduction::Mean)
    };
    let eager = make()?;
    let mut opt = wmx_core::optim::Adam::adamw(1e-2, 0.1);
    for _ in 0..2 {
        let (_, grads) =
            nn::value_and_grad(&eager, |a: &[Array]| mse(&eager, a))(&[xb.clone(), yb.clone()])?;
        wmx_core::optim::Optimizer::update(
            &mut opt,
            &eager,
            &nn::average_gradients(&grads, g, None)?,
        )?;
    }
    let compiled = std::sync::Arc::new(make()?);
    let gc = g.clone();
    let mut step = wmx_core::optim::compile_step_with(
        compiled.clone(),
        wmx_core::optim::Adam::adamw(1e-2, 0.1),
        move |m: &nn::Linear, a: &[Array]| mse(m, a),
        move |grads| nn::average_gradients(&grads, &gc, None),
    )?;
    for _ in 0..2 {
        step.call(&[xb.clone(), yb.clone()])?.eval()?;
    }
    assert_eq!(step.traces(), 1);
    for (name, w) in eager.parameters() {
        close(
            &compiled.parameters()[&name].to_vec_f64()?,
            &w.to_vec_f64()?,
            "compiled data-parallel step",
        );
    }
    assert!(nn::AllToShardedLinear::new(&key, 6, 4 * n + 1, true, g).is_err() || n == 1);
    Ok(())
}
