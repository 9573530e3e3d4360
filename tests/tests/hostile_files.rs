//! Hostile and broken files (`wmx_core::io`): every load is an `Err` naming the file
//! or a correct array, quickly, never a hang, a stack overflow or an abort; a failed
//! save leaves the old file as it was. The allocation cases and the fuzz loop run in
//! child processes under `ulimit -v` and a timeout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wmx_core::{self as wmx, Array, DType, Device, io};
use wmx_tests::gpu::in_memory_limited_child;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wmx-hostile-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A `.npy` stream with this header text (version 1) and `data` after it.
fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend((header.len() as u16).to_le_bytes());
    v.extend(header.as_bytes());
    v.extend(data);
    v
}

fn load_err(path: &Path) -> String {
    let t = Instant::now();
    let e = wmx::with_device(&Device::cpu(), || io::load_npy(path))
        .expect_err("a hostile file")
        .to_string();
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "{e}: took {:?}",
        t.elapsed()
    );
    assert!(e.contains(&path.display().to_string()), "{e}");
    e
}

#[test]
fn hostile_npy_headers_are_errs_at_once() {
    let d = dir("headers");
    let write = |name: &str, bytes: &[u8]| {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    // A list 20 deep in an extra key (8.5 s before, doubling per level): loads.
    let header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': {}{}}}",
        "[".repeat(20),
        "]".repeat(20)
    );
    let p = write(
        "deep_list.npy",
        &npy(&header, &[0, 0, 128, 63, 0, 0, 0, 64]),
    );
    let t = Instant::now();
    let a = wmx::with_device(&Device::cpu(), || io::load_npy(&p)).unwrap();
    assert!(t.elapsed() < Duration::from_secs(1));
    assert_eq!(a.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    // Dicts 1000 deep, and a shape tuple 30 000 deep (a stack overflow before).
    let dicts = format!("{}{}", "{'a': ".repeat(1000), "}".repeat(1000));
    let e = load_err(&write("dicts.npy", &npy(&dicts, &[])));
    assert!(e.contains("nested deeper"), "{e}");
    let shape = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': {}1{}}}",
        "(".repeat(30_000),
        ",)".repeat(30_000)
    );
    let mut v = b"\x93NUMPY\x02\x00".to_vec();
    v.extend((shape.len() as u32).to_le_bytes());
    v.extend(shape.as_bytes());
    let e = load_err(&write("deep_shape.npy", &v));
    assert!(e.contains("nested deeper"), "{e}");
    // Version 2 announcing a header of 2^32 - 1 bytes in a 12-byte file (4 GiB
    // were allocated first).
    let e = load_err(&write(
        "long_header.npy",
        b"\x93NUMPY\x02\x00\xff\xff\xff\xff",
    ));
    assert!(e.contains("4294967295"), "{e}");
    // Data shorter than the shape, a shape whose size overflows, no magic.
    let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}";
    let e = load_err(&write("short.npy", &npy(header, &[0; 16])));
    assert!(e.contains("24 bytes"), "{e}");
    let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}";
    let e = load_err(&write("overflow.npy", &npy(header, &[])));
    assert!(e.contains("overflows"), "{e}");
    load_err(&write("text.npy", b"hello, world"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_failed_save_keeps_the_old_file() {
    let d = dir("saves");
    let cpu = Device::cpu();
    let old = Array::from_slice_on(&[1.0f32, 2.0], &[2], &cpu).unwrap();
    let bf = wmx::astype(&old, DType::BF16).unwrap();
    for (name, save) in [
        (
            "a.npy",
            &(|p: &Path, a: &Array| io::save_npy(p, a)) as &dyn Fn(&Path, &Array) -> _,
        ),
        ("a.npz", &|p: &Path, a: &Array| io::save_npz(p, &[("x", a)])),
    ] {
        let p = d.join(name);
        save(&p, &old).unwrap();
        let before = std::fs::read(&p).unwrap();
        // numpy has no bfloat16: a documented Err, after which the old file stands.
        let e = save(&p, &bf).unwrap_err().to_string();
        assert!(e.contains("bfloat16"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), before, "{name}");
    }
    // safetensors: an array that fails to evaluate.
    let p = d.join("a.safetensors");
    io::save_safetensors(&p, &[("x", &old)]).unwrap();
    let before = std::fs::read(&p).unwrap();
    let huge = wmx::broadcast_to(&old, &[1 << 40, 2]).unwrap();
    assert!(io::save_safetensors(&p, &[("x", &old), ("y", &huge)]).is_err());
    assert_eq!(std::fs::read(&p).unwrap(), before);
    // No temporaries left behind.
    let names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("wmx-tmp")), "{names:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn npz_members_whose_crc_does_not_match_are_errs() {
    let d = dir("crc");
    let p = d.join("a.npz");
    let a = Array::from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &Device::cpu()).unwrap();
    io::save_npz(&p, &[("x", &a)]).unwrap();
    let mut bytes = std::fs::read(&p).unwrap();
    // The last data byte of the stored member (the float 3.0's top byte).
    let at = bytes
        .windows(4)
        .position(|w| w == 3.0f32.to_le_bytes())
        .unwrap()
        + 3;
    bytes[at] ^= 0x01;
    std::fs::write(&p, &bytes).unwrap();
    let e = wmx::with_device(&Device::cpu(), || io::load_npz(&p))
        .unwrap_err()
        .to_string();
    assert!(e.to_lowercase().contains("checksum"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn loads_larger_than_memory_are_errs() {
    if std::env::var("WMX_FILES_OOM_CHILD").is_ok() {
        return loads_child();
    }
    // 1 GiB of address space: the files announce 1 to 2 GiB.
    in_memory_limited_child(
        "loads_larger_than_memory_are_errs",
        "WMX_FILES_OOM_CHILD",
        1 << 20,
        "large loads checked",
    );
}

fn loads_child() {
    let d = dir("large");
    let cpu = Device::cpu();
    // A sparse .npy of 2 GiB of f32 zeros.
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (536870912,)}";
    let p = d.join("sparse.npy");
    let f = std::fs::File::create(&p).unwrap();
    (&f).write_all(&npy(header, &[])).unwrap();
    f.set_len(npy(header, &[]).len() as u64 + (2 << 30))
        .unwrap();
    let e = wmx::with_device(&cpu, || io::load_npy(&p))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bytes"), "{e}");
    std::fs::remove_file(&p).unwrap();
    // A deflated .npz member of 1 GiB of zeros (a few MiB on disk).
    let p = d.join("bomb.npz");
    {
        let mut z = zip::ZipWriter::new(std::fs::File::create(&p).unwrap());
        let opts = zip::write::FileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .large_file(true);
        z.start_file("x.npy", opts).unwrap();
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (268435456,)}";
        z.write_all(&npy(header, &[])).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..1024 {
            z.write_all(&zeros).unwrap();
        }
        z.finish().unwrap();
    }
    let e = wmx::with_device(&cpu, || io::load_npz(&p))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("out of memory") && e.contains("1073741824 bytes"),
        "{e}"
    );
    // Ordinary work goes on.
    let s = wmx::sum(&wmx::ones(&[1000], DType::F32).unwrap(), None, false).unwrap();
    assert_eq!(s.item::<f32>().unwrap(), 1000.0);
    std::fs::remove_dir_all(&d).unwrap();
    println!("large loads checked");
}

/// SplitMix64, for the fuzz loop's mutations.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn fuzzed_files_load_or_fail_cleanly() {
    if std::env::var("WMX_FUZZ_CHILD").is_ok() {
        return fuzz_child();
    }
    in_memory_limited_child(
        "fuzzed_files_load_or_fail_cleanly",
        "WMX_FUZZ_CHILD",
        2 << 20,
        "fuzzed loads checked",
    );
}

/// Mutants of a valid file of each format (bit flips, bytes set to extremes,
/// truncations, insertions), 4 seconds a format: each load returns, `Ok` or `Err`.
fn fuzz_child() {
    let d = dir("fuzz");
    let cpu = Device::cpu();
    let a = Array::from_slice_on(&[1.5f32, -2.0, 3.25, 0.0, 7.0, 8.0], &[2, 3], &cpu).unwrap();
    let b = Array::from_slice_on(&[1i32, 2, 3], &[3], &cpu).unwrap();
    type Load<'a> = &'a dyn Fn(&Path) -> wmx::Result<usize>;
    let formats: [(&str, Load); 3] = [
        ("npy", &|p| io::load_npy(p).map(|a| a.size())),
        ("npz", &|p| io::load_npz(p).map(|v| v.len())),
        ("safetensors", &|p| io::load_safetensors(p).map(|v| v.len())),
    ];
    let mut seed = 0x5eed;
    let mut total = 0;
    for (ext, load) in formats {
        let p = d.join(format!("valid.{ext}"));
        match ext {
            "npy" => io::save_npy(&p, &a).unwrap(),
            "npz" => io::save_npz(&p, &[("a", &a), ("b", &b)]).unwrap(),
            _ => io::save_safetensors(&p, &[("a", &a), ("b", &b)]).unwrap(),
        }
        let valid = std::fs::read(&p).unwrap();
        let m = d.join(format!("mutant.{ext}"));
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(4) {
            let mut v = valid.clone();
            for _ in 0..1 + next(&mut seed) % 4 {
                let at = (next(&mut seed) % v.len().max(1) as u64) as usize;
                match next(&mut seed) % 5 {
                    0 => v[at] ^= 1 << (next(&mut seed) % 8),
                    1 => v[at] = [0u8, 0xff, 0x7f, 0x80][(next(&mut seed) % 4) as usize],
                    2 => v.truncate(at),
                    3 => v.insert(at, next(&mut seed) as u8),
                    _ => v[at] = b"([{'9,:"[(next(&mut seed) % 7) as usize],
                }
                if v.is_empty() {
                    break;
                }
            }
            std::fs::write(&m, &v).unwrap();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                wmx::with_device(&cpu, || load(&m))
            }));
            assert!(
                r.is_ok(),
                "loading a mutant {ext} panicked: {:?}",
                &v[..v.len().min(64)]
            );
            total += 1;
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
    println!("fuzzed loads checked: {total} mutants");
}

/// A file mixing f32 and i64 loads whole on the GPU (i64 held as pairs of words,
/// its values exact), and a tensor wmx cannot hold is an error naming the file
/// and the tensor.
#[test]
fn gpu_loads_i64_and_errors_name_the_file_and_the_tensor() {
    let Some(gpu) = wmx_tests::gpu::device(wmx_webgpu::open) else {
        return;
    };
    let d = dir("names");
    let p = d.join("mixed.safetensors");
    let cpu = Device::cpu();
    let f = Array::from_slice_on(&[1.0f32, 2.0], &[2], &cpu).unwrap();
    let steps = [i64::MIN, (1 << 53) + 1, -1, i64::MAX];
    let i = Array::from_slice_on(&steps, &[2, 2], &cpu).unwrap();
    io::save_safetensors(&p, &[("weights", &f), ("steps", &i)]).unwrap();
    let all = wmx::with_device(&gpu, || io::load_safetensors(&p)).unwrap();
    assert_eq!(all[0].0, "steps");
    let s = &all[0].1;
    assert_eq!((s.dtype(), s.shape()), (DType::I64, &[2, 2][..]));
    assert_eq!(s.device(), &gpu);
    assert_eq!(s.to_vec::<i64>().unwrap(), steps);
    // Saved again from the GPU, the bytes are the file's.
    let q = d.join("again.safetensors");
    io::save_safetensors(&q, &[("steps", s)]).unwrap();
    let back = io::load_safetensors(&q).unwrap();
    assert_eq!(back[0].1.to_vec::<i64>().unwrap(), steps);

    // An i16 tensor (safetensors' I16: no wmx dtype).
    let header = br#"{"counts":{"dtype":"I16","shape":[2],"data_offsets":[0,4]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[1, 0, 2, 0]);
    let r = d.join("i16.safetensors");
    std::fs::write(&r, bytes).unwrap();
    for dev in [&cpu, &gpu] {
        let e = wmx::with_device(dev, || io::load_safetensors(&r))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&r.display().to_string())
                && e.contains("tensor counts")
                && e.contains("I16"),
            "{e}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}
