//! Files (`wmx_core::io`): numpy's own `.npy`/`.npz` files (made by
//! `tests/goldens/numpy/make.py`) read back to the values of its formulas, every
//! dtype round-trips bit for bit through `.npy`, `.npz` and safetensors (edge values
//! included), loads land on the scoped device, and bad files are errors naming
//! the file and what is wrong.

use wmx_core::{self as wmx, Array, DType, Device, f16, io};

fn golden(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("goldens/numpy")
        .join(name)
}

fn f(i: usize) -> f64 {
    (i as f64 - 5.5) / 4.0
}

#[test]
fn numpy_files_read_as_numpy_wrote_them() {
    // complex64 (tests/goldens/numpy_fft.py): element k is f(k) + 2 f(11 - k) i,
    // little- and big-endian.
    for (name, shape) in [
        ("complex64.npy", &[3, 4][..]),
        ("complex64_big_endian.npy", &[12]),
    ] {
        let z = io::load_npy(golden(name)).unwrap();
        assert_eq!((z.dtype(), z.shape()), (DType::C64, shape), "{name}");
        let want: Vec<wmx::Complex32> = (0..12)
            .map(|k| wmx::Complex32::new(f(k) as f32, 2.0 * f(11 - k) as f32))
            .collect();
        assert_eq!(z.to_vec::<wmx::Complex32>().unwrap(), want, "{name}");
    }
    let b = io::load_npy(golden("bool.npy")).unwrap();
    assert_eq!(b.dtype(), DType::Bool);
    assert_eq!(
        b.to_vec::<bool>().unwrap(),
        (0..12).map(|i| i % 3 == 0).collect::<Vec<_>>()
    );
    let u = io::load_npy(golden("uint8.npy")).unwrap();
    assert_eq!(
        u.to_vec::<u8>().unwrap(),
        (0..12).map(|i| (i * 23 % 256) as u8).collect::<Vec<_>>()
    );
    let i32s = io::load_npy(golden("int32.npy")).unwrap();
    assert_eq!(
        i32s.to_vec::<i32>().unwrap(),
        (0..12).map(|i| (i - 6) * 1000003).collect::<Vec<i32>>()
    );
    let u32s = io::load_npy(golden("uint32.npy")).unwrap();
    assert_eq!(
        u32s.to_vec::<u32>().unwrap(),
        (0..12u64)
            .map(|i| (i * 400000000 % (1 << 32)) as u32)
            .collect::<Vec<_>>()
    );
    let i64s = io::load_npy(golden("int64.npy")).unwrap();
    assert_eq!(
        i64s.to_vec::<i64>().unwrap(),
        (0..12i64)
            .map(|i| (i - 6) * 1_000_000_000_000_000)
            .collect::<Vec<_>>()
    );
    let h = io::load_npy(golden("float16.npy")).unwrap();
    assert_eq!(
        h.to_vec::<f16>().unwrap(),
        (0..12).map(|i| f16::from_f64(f(i))).collect::<Vec<_>>()
    );
    let s = io::load_npy(golden("float32.npy")).unwrap();
    assert_eq!(
        s.to_vec::<f32>().unwrap(),
        (0..12).map(|i| f(i) as f32).collect::<Vec<_>>()
    );
    // Fortran order: a [3, 4] array (a transposed view), row-major values f(0..12).
    let fo = io::load_npy(golden("fortran.npy")).unwrap();
    assert_eq!(fo.shape(), &[3, 4]);
    assert_eq!(
        fo.to_vec::<f32>().unwrap(),
        (0..12).map(|i| f(i) as f32).collect::<Vec<_>>()
    );
    let be = io::load_npy(golden("big_endian.npy")).unwrap();
    assert_eq!((be.shape(), be.dtype()), (&[4usize, 3][..], DType::F32));
    assert_eq!(
        be.to_vec::<f32>().unwrap(),
        (0..12).map(|i| f(i) as f32).collect::<Vec<_>>()
    );
    let many = io::load_npz(golden("several.npz")).unwrap();
    let names: Vec<&str> = many.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"x") && names.contains(&"n"), "{names:?}");
    for (name, a) in &many {
        match name.as_str() {
            "x" => {
                assert_eq!(a.shape(), &[2, 6]);
                assert_eq!(
                    a.to_vec::<f32>().unwrap(),
                    (0..12).map(|i| f(i) as f32).collect::<Vec<_>>()
                );
            }
            _ => assert_eq!(a.to_vec::<i32>().unwrap(), (0..12).collect::<Vec<i32>>()),
        }
    }
    let c = io::load_npz(golden("compressed.npz")).unwrap();
    assert_eq!(
        c[0].1.to_vec::<bool>().unwrap(),
        (0..12).map(|i| i % 2 == 1).collect::<Vec<_>>()
    );
    // float64 loads as f64, every bit kept.
    let d = io::load_npy(golden("float64.npy")).unwrap();
    assert_eq!(d.dtype(), DType::F64);
    assert_eq!(
        d.to_vec::<f64>().unwrap(),
        (0..12).map(f).collect::<Vec<f64>>()
    );
}

/// An array of `dtype` with edge values (NaN, ±inf, -0, extremes) and a 2-D shape.
fn sample(dtype: DType) -> Array {
    let v: Vec<f64> = vec![
        0.0,
        -0.0,
        1.5,
        -2.25,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        65504.0,
        1e-7,
        255.0,
        -1.0,
        3.0,
    ];
    let x = Array::from_slice(&v.iter().map(|&a| a as f32).collect::<Vec<_>>(), &[3, 4]).unwrap();
    match dtype {
        DType::I64 => Array::from_slice(&[i64::MIN, -1, 0, 1, i64::MAX, 42], &[2, 3]).unwrap(),
        DType::U64 => Array::from_slice(&[u64::MAX, 1 << 63, 0, 1, 1 << 53, 42], &[2, 3]).unwrap(),
        // Values no f32 holds: f64 must keep every bit.
        DType::F64 => {
            Array::from_slice(&[0.1, -1e300, 5e-324, f64::NAN, -0.0, 1.0 / 3.0], &[2, 3]).unwrap()
        }
        // Edge values in both parts, the imaginary part reversed.
        DType::C64 => wmx::complex(
            &x,
            &x.slice(&[wmx::Slice::ALL, wmx::Slice::reversed()]).unwrap(),
        )
        .unwrap(),
        d => x.astype(d).unwrap(),
    }
}

#[test]
fn every_dtype_round_trips() {
    let dir = std::env::temp_dir().join(format!("wmx-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let all = DType::ALL;
    for d in all {
        let a = sample(d);
        let t = a.t().unwrap(); // a transposed view saves its logical order
        let st = dir.join(format!("{d}.safetensors"));
        io::save_safetensors(&st, &[("a", &a), ("t", &t)]).unwrap();
        let back = io::load_safetensors(&st).unwrap();
        assert_eq!(back[0].0, "a");
        assert_eq!(
            back[0].1.to_bytes().unwrap(),
            a.to_bytes().unwrap(),
            "{d} safetensors"
        );
        assert_eq!(back[1].1.shape(), t.shape());
        assert_eq!(
            back[1].1.to_bytes().unwrap(),
            t.to_bytes().unwrap(),
            "{d} safetensors view"
        );
        let npy = dir.join(format!("{d}.npy"));
        if d == DType::BF16 {
            let e = io::save_npy(&npy, &a).unwrap_err().to_string();
            assert!(e.contains("bfloat16") && e.contains("safetensors"), "{e}");
            continue;
        }
        io::save_npy(&npy, &t).unwrap();
        let back = io::load_npy(&npy).unwrap();
        assert_eq!((back.shape(), back.dtype()), (t.shape(), d));
        assert_eq!(back.to_bytes().unwrap(), t.to_bytes().unwrap(), "{d} npy");
        let npz = dir.join(format!("{d}.npz"));
        io::save_npz(&npz, &[("first", &a), ("second", &t)]).unwrap();
        let back = io::load_npz(&npz).unwrap();
        assert_eq!(back.len(), 2);
        for (name, b) in back {
            let want = if name == "first" { &a } else { &t };
            assert_eq!(
                b.to_bytes().unwrap(),
                want.to_bytes().unwrap(),
                "{d} npz {name}"
            );
        }
    }
    // Loads go to the scoped device.
    let cpu = Device::cpu();
    let on = wmx::with_device(&cpu, || io::load_npy(dir.join("f32.npy"))).unwrap();
    assert_eq!(on.device(), &cpu);
    // Missing or broken files: errors naming the file.
    let missing = dir.join("nope.npy");
    let e = io::load_npy(&missing).unwrap_err().to_string();
    assert!(e.contains("nope.npy") && e.contains("load_npy"), "{e}");
    let junk = dir.join("junk.safetensors");
    std::fs::write(&junk, b"not a safetensors file").unwrap();
    let e = io::load_safetensors(&junk).unwrap_err().to_string();
    assert!(e.contains("junk.safetensors"), "{e}");
    // The memory-mapped loads: a truncated .npy (its data cut short, or cut inside the
    // header), an empty file and bool bytes other than 0/1 are errors, never a read
    // past the map or a panic.
    let whole = std::fs::read(dir.join("f32.npy")).unwrap();
    for (what, bytes) in [
        ("data cut", &whole[..whole.len() - 3]),
        ("header cut", &whole[..9]),
        ("empty", &whole[..0]),
    ] {
        let cut = dir.join("cut.npy");
        std::fs::write(&cut, bytes).unwrap();
        let e = io::load_npy(&cut).unwrap_err().to_string();
        assert!(e.contains("cut.npy"), "{what}: {e}");
    }
    let mut bools = std::fs::read(dir.join("bool.npy")).unwrap();
    *bools.last_mut().unwrap() = 7;
    std::fs::write(dir.join("bad_bool.npy"), &bools).unwrap();
    let e = io::load_npy(dir.join("bad_bool.npy"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bool"), "{e}");
    std::fs::write(dir.join("empty.safetensors"), b"").unwrap();
    assert!(io::load_safetensors(dir.join("empty.safetensors")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
