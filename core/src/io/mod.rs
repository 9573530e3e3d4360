//! Loading and saving arrays: numpy's `.npy` and `.npz` (through `npyz`) and
//! safetensors (through `safetensors`), every dtype wmx has. Loads go to the
//! default device (`with_device` picks another).
//!
//! | dtype | `.npy`/`.npz` | safetensors |
//! |---|---|---|
//! | bool, u8, i32, u32, i64, u64, f16, f32, f64, c64 | `|b1 |u1 <i4 <u4 <i8 <u8 <f2 <f4 <f8 <c8` (either byte order read) | BOOL U8 I32 U32 I64 U64 F16 F32 F64 C64 |
//! | bf16 | an `Err` (numpy has no bfloat16; use safetensors) | BF16 |
//!
//! Fortran-ordered `.npy` data loads as a transposed view (no copy).
//!
//! `load_npy` and `load_safetensors` memory-map the file: its bytes are copied once,
//! from the page cache straight into each array (little-endian `.npy` data without
//! decoding), never first into a buffer of the whole file. The file must not be
//! truncated while it loads (as with any memory map, that would fault).

mod npy;

use crate::{Array, DType, Element, Error, Result, f16};
use npyz::WriterBuilder;
use std::io::{Read, Seek, Write};
use std::path::Path;

fn io_err(op: &'static str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::invalid(op, format!("{}: {e}", path.display()))
}

fn shape_u64(a: &Array) -> Vec<u64> {
    a.shape().iter().map(|&d| d as u64).collect()
}

/// Writes `a` as one `.npy` stream (C order).
fn write_npy<W: Write>(op: &'static str, path: &Path, a: &Array, w: W) -> Result<()> {
    fn typed<T: Element + npyz::AutoSerialize, W: Write>(a: &Array, w: W) -> std::io::Result<()> {
        let v: Vec<T> = a.to_vec::<T>().map_err(std::io::Error::other)?;
        let mut out = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&shape_u64(a))
            .writer(w)
            .begin_nd()?;
        out.extend(v)?;
        out.finish()
    }
    let r = match a.dtype() {
        DType::Bool => typed::<bool, W>(a, w),
        DType::U8 => typed::<u8, W>(a, w),
        DType::I32 => typed::<i32, W>(a, w),
        DType::U32 => typed::<u32, W>(a, w),
        DType::I64 => typed::<i64, W>(a, w),
        DType::U64 => typed::<u64, W>(a, w),
        DType::F16 => typed::<f16, W>(a, w),
        DType::F32 => typed::<f32, W>(a, w),
        DType::F64 => typed::<f64, W>(a, w),
        DType::C64 => typed::<num_complex::Complex32, W>(a, w),
        DType::BF16 => {
            return Err(Error::invalid(
                op,
                format!(
                    "{}: numpy has no bfloat16: save bf16 arrays with save_safetensors, or astype first",
                    path.display()
                ),
            ));
        }
    };
    r.map_err(|e| io_err(op, path, e))
}

/// The array a `.npy` stream's header and data make, on the default device.
fn finish(op: &'static str, path: &Path, h: &npy::Header, mut data: Vec<u8>) -> Result<Array> {
    if h.big_endian {
        // A complex element is two f32s, each in the file's byte order.
        let word = if h.dtype == DType::C64 {
            4
        } else {
            h.dtype.size()
        };
        npy::swap_bytes(&mut data, word);
    }
    // Fortran order: the data is the transpose's, row-major.
    let stored: Vec<usize> = if h.fortran {
        h.shape.iter().rev().copied().collect()
    } else {
        h.shape.clone()
    };
    let device = crate::default_device()?;
    let a = crate::cpu::alloc::catching_oom(&device, || {
        Array::from_bytes_on(data, &stored, h.dtype, &device)
    })
    .map_err(|e| io_err(op, path, e))?;
    if h.fortran && h.shape.len() > 1 {
        crate::transpose(&a, None)
    } else {
        Ok(a)
    }
}

/// What a header's size error says.
fn short(h: &npy::Header, n: usize) -> String {
    format!(
        "the data ends before the {n} bytes of its shape {:?} of {}",
        h.shape, h.dtype
    )
}

/// Reads one `.npy` stream held whole in memory (a memory map).
fn read_npy(op: &'static str, path: &Path, raw: &[u8]) -> Result<Array> {
    let h = npy::parse_header(raw, Some(raw.len() as u64)).map_err(|e| io_err(op, path, e))?;
    let n = h.data_bytes().map_err(|e| io_err(op, path, e))?;
    let bytes = h
        .data_start
        .checked_add(n)
        .and_then(|end| raw.get(h.data_start..end))
        .ok_or_else(|| io_err(op, path, short(&h, n)))?;
    let mut data = npy::alloc(op, n).map_err(|e| io_err(op, path, e))?;
    data.extend_from_slice(bytes);
    finish(op, path, &h, data)
}

/// Reads one `.npy` stream of `len` bytes (a `.npz` member) to its end, so the
/// archive's checksum of it is verified.
fn read_npy_stream<R: Read>(op: &'static str, path: &Path, mut r: R, len: u64) -> Result<Array> {
    let e = |x: &dyn std::fmt::Display| io_err(op, path, x);
    let mut head = vec![0u8; 12.min(len as usize)];
    r.read_exact(&mut head).map_err(|x| e(&x))?;
    // The header's length, then the header (bounded by npy::parse_header's checks).
    let hlen = match head.get(6..12) {
        Some([1, _, a, b, ..]) => (u16::from_le_bytes([*a, *b]) as u64).saturating_sub(2),
        Some([2 | 3, _, a, b, c, d]) => u32::from_le_bytes([*a, *b, *c, *d]) as u64,
        _ => 0,
    };
    if 12 + hlen <= len.min(1 << 20) {
        let mut rest = vec![0u8; hlen as usize];
        r.read_exact(&mut rest).map_err(|x| e(&x))?;
        head.extend(rest);
    }
    let h = npy::parse_header(&head, Some(len)).map_err(|x| e(&x))?;
    let n = h.data_bytes().map_err(|x| e(&x))?;
    if (h.data_start as u64).saturating_add(n as u64) > len {
        return Err(e(&short(&h, n)));
    }
    let mut data = npy::alloc(op, n).map_err(|x| e(&x))?;
    // Header bytes read past the header are the data's first bytes.
    data.extend_from_slice(&head[h.data_start.min(head.len())..]);
    let want = n - data.len().min(n);
    (&mut r)
        .take(want as u64)
        .read_to_end(&mut data)
        .map_err(|x| e(&x))?;
    if data.len() != n {
        return Err(e(&short(&h, n)));
    }
    // The end of the member: where zip checks its CRC-32.
    let mut one = [0u8; 1];
    if r.read(&mut one).map_err(|x| e(&x))? != 0 {
        return Err(e(&"bytes after the array's data"));
    }
    finish(op, path, &h, data)
}

/// Writes the file at `path` through `write`, atomically: into a temporary file in
/// the same folder, renamed over `path` once complete and flushed. A failed save
/// (an invalid array, a full disk) leaves the old file as it was and no temporary.
fn write_atomically(
    op: &'static str,
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> Result<()>,
) -> Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SAVES: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io_err(op, path, "not a file name"))?;
    let tmp = path.with_file_name(format!(
        ".{}.{}-{}.wmx-tmp",
        name.to_string_lossy(),
        std::process::id(),
        SAVES.fetch_add(1, Ordering::Relaxed)
    ));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io_err(op, path, e))?;
    let mut w = std::io::BufWriter::new(file);
    let done = write(&mut w).and_then(|()| {
        let file = w.into_inner().map_err(|e| io_err(op, path, e.error()))?;
        file.sync_all().map_err(|e| io_err(op, path, e))?;
        std::fs::rename(&tmp, path).map_err(|e| io_err(op, path, e))
    });
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Saves `a` to a `.npy` file (numpy's `np.save`); a failed save leaves an existing
/// file as it was.
pub fn save_npy(path: impl AsRef<Path>, a: &Array) -> Result<()> {
    let path = path.as_ref();
    write_atomically("save_npy", path, |w| write_npy("save_npy", path, a, w))
}

/// Loads a `.npy` file (numpy's `np.load`).
pub fn load_npy(path: impl AsRef<Path>) -> Result<Array> {
    let path = path.as_ref();
    let map = map_file("load_npy", path)?;
    read_npy("load_npy", path, &map)
}

/// The file's bytes, memory-mapped read-only.
fn map_file(op: &'static str, path: &Path) -> Result<memmap2::Mmap> {
    let file = std::fs::File::open(path).map_err(|e| io_err(op, path, e))?;
    // SAFETY: a read-only private map, dropped before the load returns; its bytes are
    // only copied. Another process truncating the file meanwhile would fault, as it
    // would for any reader of a memory map (the module docs say so).
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| {
        let len = file.metadata().map_or(0, |m| m.len());
        io_err(
            op,
            path,
            format!("the file's {len} bytes could not be mapped: {e}"),
        )
    })
}

/// Saves named arrays to a `.npz` archive (numpy's `np.savez`, uncompressed); a
/// failed save leaves an existing file as it was.
pub fn save_npz(path: impl AsRef<Path>, arrays: &[(&str, &Array)]) -> Result<()> {
    let path = path.as_ref();
    write_atomically("save_npz", path, |w| {
        let mut zip = zip::ZipWriter::new(w);
        for (name, a) in arrays {
            let opts = zip::write::FileOptions::default()
                .compression_method(zip::CompressionMethod::Stored);
            zip.start_file(format!("{name}.npy"), opts)
                .map_err(|x| io_err("save_npz", path, x))?;
            write_npy("save_npz", path, a, &mut zip)?;
        }
        zip.finish().map_err(|x| io_err("save_npz", path, x))?;
        Ok(())
    })
}

/// Loads every array of a `.npz` archive, by name (in the archive's order).
pub fn load_npz(path: impl AsRef<Path>) -> Result<Vec<(String, Array)>> {
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| io_err("load_npz", path, e))?;
    read_npz(path, std::io::BufReader::new(file))
}

fn read_npz<R: Read + Seek>(path: &Path, r: R) -> Result<Vec<(String, Array)>> {
    let e = |e: &dyn std::fmt::Display| io_err("load_npz", path, e);
    let mut zip = zip::ZipArchive::new(r).map_err(|x| e(&x))?;
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let file = zip.by_index(i).map_err(|x| e(&x))?;
        // np.savez names each member `<name>.npy`.
        let Some(name) = file.name().strip_suffix(".npy").map(str::to_string) else {
            continue;
        };
        let len = file.size();
        let a = read_npy_stream("load_npz", path, file, len)
            .map_err(|x| e(&format!("member {name}: {x}")))?;
        out.push((name, a));
    }
    Ok(out)
}

/// wmx dtypes and their safetensors names, both ways.
const ST_DTYPES: [(DType, safetensors::Dtype); 11] = {
    use safetensors::Dtype as S;
    [
        (DType::Bool, S::BOOL),
        (DType::U8, S::U8),
        (DType::I32, S::I32),
        (DType::U32, S::U32),
        (DType::I64, S::I64),
        (DType::U64, S::U64),
        (DType::F16, S::F16),
        (DType::BF16, S::BF16),
        (DType::F32, S::F32),
        (DType::F64, S::F64),
        (DType::C64, S::C64),
    ]
};

/// Saves named arrays to a safetensors file; a failed save leaves an existing file
/// as it was.
pub fn save_safetensors(path: impl AsRef<Path>, arrays: &[(&str, &Array)]) -> Result<()> {
    let path = path.as_ref();
    let data: Vec<(String, Vec<u8>, &Array)> = arrays
        .iter()
        .map(|(n, a)| Ok((n.to_string(), a.to_bytes()?, *a)))
        .collect::<Result<_>>()?;
    let views = data
        .iter()
        .map(|(n, bytes, a)| {
            let Some(&(_, dtype)) = ST_DTYPES.iter().find(|p| p.0 == a.dtype()) else {
                return Err(io_err(
                    "save_safetensors",
                    path,
                    format!("{n}: no safetensors dtype"),
                ));
            };
            safetensors::tensor::TensorView::new(dtype, a.shape().to_vec(), bytes)
                .map(|v| (n.clone(), v))
                .map_err(|e| io_err("save_safetensors", path, e))
        })
        .collect::<Result<Vec<_>>>()?;
    let bytes =
        safetensors::serialize(views, None).map_err(|e| io_err("save_safetensors", path, e))?;
    write_atomically("save_safetensors", path, |w| {
        w.write_all(&bytes)
            .map_err(|e| io_err("save_safetensors", path, e))
    })
}

/// Loads every tensor of a safetensors file, sorted by name.
pub fn load_safetensors(path: impl AsRef<Path>) -> Result<Vec<(String, Array)>> {
    let path = path.as_ref();
    let e = |e: &dyn std::fmt::Display| io_err("load_safetensors", path, e);
    let bytes = map_file("load_safetensors", path)?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|x| e(&x))?;
    let device = crate::default_device()?;
    let mut out = Vec::new();
    for (name, v) in st.tensors() {
        let Some(&(dtype, _)) = ST_DTYPES.iter().find(|p| p.1 == v.dtype()) else {
            return Err(e(&format!(
                "tensor {name}: dtype {:?} has no wmx dtype",
                v.dtype()
            )));
        };
        let a = Array::from_bytes_on(v.data().to_vec(), v.shape(), dtype, &device)
            .map_err(|x| e(&format!("tensor {name}: {x}")))?;
        out.push((name, a));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
