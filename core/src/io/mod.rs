//! Loading and saving arrays: numpy's `.npy` and `.npz` (through `npyz`) and
//! safetensors (through `safetensors`), every dtype wmx has. Loads go to the
//! default device (`with_device` picks another).
//!
//! | dtype | `.npy`/`.npz` | safetensors |
//! |---|---|---|
//! | bool, u8, i32, u32, i64, f16, f32, f64 | `|b1 |u1 <i4 <u4 <i8 <f2 <f4 <f8` (either byte order read) | BOOL U8 I32 U32 I64 F16 F32 F64 |
//! | bf16 | an `Err` (numpy has no bfloat16; use safetensors) | BF16 |
//!
//! Fortran-ordered `.npy` data loads as a transposed view (no copy).
//!
//! `load_npy` and `load_safetensors` memory-map the file: its bytes are copied once,
//! from the page cache straight into each array (little-endian `.npy` data without
//! decoding), never first into a buffer of the whole file. The file must not be
//! truncated while it loads (as with any memory map, that would fault).

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
        DType::F16 => typed::<f16, W>(a, w),
        DType::F32 => typed::<f32, W>(a, w),
        DType::F64 => typed::<f64, W>(a, w),
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

/// Reads one `.npy` stream into an array on the default device. `raw`: the whole
/// stream's bytes where they are at hand (a memory map): little-endian data is then
/// copied from them once, without decoding.
fn read_npy<R: Read>(
    op: &'static str,
    path: &Path,
    f: npyz::NpyFile<R>,
    raw: Option<&[u8]>,
) -> Result<Array> {
    let shape: Vec<usize> = f.shape().iter().map(|&d| d as usize).collect();
    let fortran = f.order() == npyz::Order::Fortran;
    // A plain type string such as `<f4`; records and subarrays have no wmx dtype.
    let descr = match f.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => other.descr(),
    };
    let dtype = match descr.trim_start_matches(['<', '>', '|', '=']) {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i4" => DType::I32,
        "u4" => DType::U32,
        "i8" => DType::I64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => {
            return Err(Error::invalid(
                op,
                format!(
                    "{}: numpy dtype {descr:?} has no wmx dtype (bool, uint8, int32, uint32, int64, float16, float32, float64)",
                    path.display()
                ),
            ));
        }
    };
    // Fortran order: the data is the transpose's, row-major.
    let stored: Vec<usize> = if fortran {
        shape.iter().rev().copied().collect()
    } else {
        shape.clone()
    };
    let little = descr.starts_with(['<', '|']);
    let a = match raw.filter(|_| little) {
        Some(raw) => {
            let n = crate::layout::checked_numel(op, &stored, dtype)?;
            let data = npy_data_offset(raw)
                .and_then(|b| Some((b, b.checked_add(n.checked_mul(dtype.size())?)?)))
                .and_then(|(b, e)| raw.get(b..e))
                .ok_or_else(|| {
                    io_err(
                        op,
                        path,
                        format!("the file ends before its {n} elements of {dtype}"),
                    )
                })?;
            Array::from_bytes_on(data.to_vec(), &stored, dtype, &crate::default_device()?)
                .map_err(|e| io_err(op, path, e))?
        }
        None => {
            fn typed<T: Element + npyz::Deserialize, R: Read>(
                f: npyz::NpyFile<R>,
                stored: &[usize],
            ) -> std::io::Result<Result<Array>> {
                Ok(Array::from_slice(&f.into_vec::<T>()?, stored))
            }
            match dtype {
                DType::Bool => typed::<bool, R>(f, &stored),
                DType::U8 => typed::<u8, R>(f, &stored),
                DType::I32 => typed::<i32, R>(f, &stored),
                DType::U32 => typed::<u32, R>(f, &stored),
                DType::I64 => typed::<i64, R>(f, &stored),
                DType::F16 => typed::<f16, R>(f, &stored),
                DType::F64 => typed::<f64, R>(f, &stored),
                DType::F32 | DType::BF16 => typed::<f32, R>(f, &stored), // bf16: never parsed
            }
            .map_err(|e| io_err(op, path, e))??
        }
    };
    if fortran && shape.len() > 1 {
        crate::transpose(&a, None)
    } else {
        Ok(a)
    }
}

/// Where a `.npy` stream's data starts: after the magic (6 bytes), the version (2),
/// the header's length (2 bytes in version 1, 4 after) and the header.
fn npy_data_offset(raw: &[u8]) -> Option<usize> {
    match *raw.get(6)? {
        1 => Some(10 + u16::from_le_bytes(raw.get(8..10)?.try_into().ok()?) as usize),
        2 | 3 => 12usize.checked_add(u32::from_le_bytes(raw.get(8..12)?.try_into().ok()?) as usize),
        _ => None,
    }
}

/// Saves `a` to a `.npy` file (numpy's `np.save`).
pub fn save_npy(path: impl AsRef<Path>, a: &Array) -> Result<()> {
    let path = path.as_ref();
    let file = std::fs::File::create(path).map_err(|e| io_err("save_npy", path, e))?;
    write_npy("save_npy", path, a, std::io::BufWriter::new(file))
}

/// Loads a `.npy` file (numpy's `np.load`).
pub fn load_npy(path: impl AsRef<Path>) -> Result<Array> {
    let path = path.as_ref();
    let map = map_file("load_npy", path)?;
    let f = npyz::NpyFile::new(&map[..]).map_err(|e| io_err("load_npy", path, e))?;
    read_npy("load_npy", path, f, Some(&map))
}

/// The file's bytes, memory-mapped read-only.
fn map_file(op: &'static str, path: &Path) -> Result<memmap2::Mmap> {
    let file = std::fs::File::open(path).map_err(|e| io_err(op, path, e))?;
    // SAFETY: a read-only private map, dropped before the load returns; its bytes are
    // only copied. Another process truncating the file meanwhile would fault, as it
    // would for any reader of a memory map (the module docs say so).
    unsafe { memmap2::Mmap::map(&file) }.map_err(|e| io_err(op, path, e))
}

/// Saves named arrays to a `.npz` archive (numpy's `np.savez`, uncompressed).
pub fn save_npz(path: impl AsRef<Path>, arrays: &[(&str, &Array)]) -> Result<()> {
    let path = path.as_ref();
    let e = |e: std::io::Error| io_err("save_npz", path, e);
    let file = std::fs::File::create(path).map_err(e)?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    for (name, a) in arrays {
        let opts =
            zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Stored);
        zip.start_file(format!("{name}.npy"), opts)
            .map_err(|x| io_err("save_npz", path, x))?;
        write_npy("save_npz", path, a, &mut zip)?;
    }
    zip.finish().map_err(|x| io_err("save_npz", path, x))?;
    Ok(())
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
        let f = npyz::NpyFile::new(file).map_err(|x| e(&x))?;
        out.push((name, read_npy("load_npz", path, f, None)?));
    }
    Ok(out)
}

/// wmx dtypes and their safetensors names, both ways.
const ST_DTYPES: [(DType, safetensors::Dtype); 9] = {
    use safetensors::Dtype as S;
    [
        (DType::Bool, S::BOOL),
        (DType::U8, S::U8),
        (DType::I32, S::I32),
        (DType::U32, S::U32),
        (DType::I64, S::I64),
        (DType::F16, S::F16),
        (DType::BF16, S::BF16),
        (DType::F32, S::F32),
        (DType::F64, S::F64),
    ]
};

/// Saves named arrays to a safetensors file.
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
    safetensors::serialize_to_file(views, None, path)
        .map_err(|e| io_err("save_safetensors", path, e))
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
        let a = Array::from_bytes_on(v.data().to_vec(), v.shape(), dtype, &device)?;
        out.push((name, a));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
