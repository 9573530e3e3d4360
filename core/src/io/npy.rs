//! Reading numpy's `.npy` format, bounded: the header is parsed by a small
//! linear parser with a depth limit (numpy's is a Python literal; a general parser
//! took exponential time on nested values and overflowed the stack on deep ones),
//! and every size is checked against the bytes that exist before anything is
//! allocated, which is done fallibly.

use crate::{DType, Error, Result};

/// Headers longer than this are refused (numpy's own default limit is 10 000
/// bytes; wide structured dtypes need more, none a wmx dtype).
const MAX_HEADER: usize = 1 << 20;
/// Nesting of lists, tuples and dicts in a header.
const MAX_DEPTH: usize = 32;

/// What a `.npy` header says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Header {
    /// The dtype, with its byte order.
    pub dtype: DType,
    /// Big-endian data (to be swapped).
    pub big_endian: bool,
    /// The data is the transpose's, row-major.
    pub fortran: bool,
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Where the data starts in the stream.
    pub data_start: usize,
}

impl Header {
    /// Bytes of data the header announces, or an `Err` when that overflows.
    pub(crate) fn data_bytes(&self) -> std::result::Result<usize, String> {
        self.shape
            .iter()
            .try_fold(self.dtype.size(), |a, &d| a.checked_mul(d))
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| format!("shape {:?} of {} overflows", self.shape, self.dtype))
    }
}

/// The header at the start of `bytes` (which holds at least the header; `total`:
/// the stream's length where known, to check the announced sizes against).
pub(crate) fn parse_header(
    bytes: &[u8],
    total: Option<u64>,
) -> std::result::Result<Header, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (no \\x93NUMPY magic)".into());
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
        v => return Err(format!("unknown .npy format version {v}")),
    };
    let end = start + len;
    if len > MAX_HEADER || total.is_some_and(|t| end as u64 > t) {
        return Err(format!(
            "a header of {len} bytes{}",
            total.map_or(String::new(), |t| format!(" in a stream of {t} bytes"))
        ));
    }
    let text = bytes
        .get(start..end)
        .ok_or_else(|| format!("the stream ends inside its {len}-byte header"))?;
    let text = std::str::from_utf8(text).map_err(|_| "the header is not text".to_string())?;
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
    };
    let value = p.value(0)?;
    p.space();
    if p.at != p.s.len() {
        return Err(format!(
            "unexpected text after the header's dict at byte {}",
            p.at
        ));
    }
    let Value::Dict(entries) = value else {
        return Err("the header is not a dict".into());
    };
    let get = |k: &str| entries.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    let descr = match get("descr") {
        Some(Value::Str(s)) => s.clone(),
        Some(_) => return Err("a structured dtype has no wmx dtype".into()),
        None => return Err("the header has no 'descr'".into()),
    };
    let fortran = match get("fortran_order") {
        Some(Value::Bool(b)) => *b,
        _ => return Err("the header has no 'fortran_order' True or False".into()),
    };
    let shape = match get("shape") {
        Some(Value::Tuple(dims)) => dims
            .iter()
            .map(|d| match d {
                Value::Int(i) if *i >= 0 => usize::try_from(*i).map_err(|_| d),
                _ => Err(d),
            })
            .collect::<std::result::Result<Vec<usize>, _>>()
            .map_err(|d| format!("shape entry {d:?} is not a size"))?,
        _ => return Err("the header has no 'shape' tuple".into()),
    };
    let (order, code) = descr.split_at(descr.len().min(1));
    let big_endian = order == ">";
    let code = if matches!(order, "<" | ">" | "|" | "=") {
        code
    } else {
        descr.as_str()
    };
    let dtype = match code {
        "b1" => DType::Bool,
        "u1" => DType::U8,
        "i4" => DType::I32,
        "u4" => DType::U32,
        "i8" => DType::I64,
        "u8" => DType::U64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "c8" => DType::C64,
        _ => {
            return Err(format!(
                "numpy dtype {descr:?} has no wmx dtype (bool, uint8, int32, uint32, int64, \
                 uint64, float16, float32, float64, complex64)"
            ));
        }
    };
    Ok(Header {
        dtype,
        big_endian: big_endian && dtype.size() > 1,
        fortran,
        shape,
        data_start: end,
    })
}

/// A value of numpy's header literal.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(String),
    Int(i128),
    Bool(bool),
    None,
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(String, Value)>),
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.space();
        let hit = self.s.get(self.at) == Some(&c);
        self.at += hit as usize;
        hit
    }

    fn err<T>(&self, what: &str) -> std::result::Result<T, String> {
        Err(format!("{what} at byte {} of the header", self.at))
    }

    fn value(&mut self, depth: usize) -> std::result::Result<Value, String> {
        if depth > MAX_DEPTH {
            return self.err(&format!("values nested deeper than {MAX_DEPTH}"));
        }
        self.space();
        match self.s.get(self.at) {
            Some(b'{') => {
                self.at += 1;
                let mut entries = Vec::new();
                loop {
                    if self.eat(b'}') {
                        return Ok(Value::Dict(entries));
                    }
                    let Value::Str(key) = self.value(depth + 1)? else {
                        return self.err("a dict key that is not a string");
                    };
                    if !self.eat(b':') {
                        return self.err("no ':' after a dict key");
                    }
                    entries.push((key, self.value(depth + 1)?));
                    if !self.eat(b',') {
                        return if self.eat(b'}') {
                            Ok(Value::Dict(entries))
                        } else {
                            self.err("no ',' or '}' in a dict")
                        };
                    }
                }
            }
            Some(&open @ (b'(' | b'[')) => {
                self.at += 1;
                let close = if open == b'(' { b')' } else { b']' };
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.eat(b',') {
                        if self.eat(close) {
                            break;
                        }
                        return self.err("no ',' or closing bracket in a sequence");
                    }
                }
                Ok(if open == b'(' {
                    Value::Tuple(items)
                } else {
                    Value::List(items)
                })
            }
            Some(&q @ (b'\'' | b'"')) => {
                self.at += 1;
                let start = self.at;
                while self.at < self.s.len() && self.s[self.at] != q {
                    if self.s[self.at] == b'\\' {
                        return self.err("an escape in a string");
                    }
                    self.at += 1;
                }
                if self.at == self.s.len() {
                    return self.err("an unterminated string");
                }
                let text = String::from_utf8_lossy(&self.s[start..self.at]).into_owned();
                self.at += 1;
                Ok(Value::Str(text))
            }
            Some(c) if c.is_ascii_digit() || *c == b'-' => {
                let start = self.at;
                self.at += 1;
                while self.at < self.s.len() && self.s[self.at].is_ascii_digit() {
                    self.at += 1;
                }
                // Python 2 longs: `3L`.
                let digits = std::str::from_utf8(&self.s[start..self.at]).unwrap();
                if self.s.get(self.at) == Some(&b'L') {
                    self.at += 1;
                }
                digits
                    .parse()
                    .map(Value::Int)
                    .or_else(|_| self.err("an integer out of range"))
            }
            _ => {
                for (word, v) in [
                    ("True", Value::Bool(true)),
                    ("False", Value::Bool(false)),
                    ("None", Value::None),
                ] {
                    if self.s[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(v);
                    }
                }
                self.err("an unexpected character")
            }
        }
    }
}

/// `n` bytes, allocated fallibly: an `Err` with the byte count when the host
/// cannot give them.
pub(crate) fn alloc(op: &'static str, n: usize) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfRange {
        op,
        msg: format!("out of memory: {n} bytes could not be allocated"),
    })?;
    Ok(v)
}

/// Big-endian elements of `size` bytes to little-endian, in place.
pub(crate) fn swap_bytes(data: &mut [u8], size: usize) {
    for e in data.chunks_exact_mut(size) {
        e.reverse();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str) -> Vec<u8> {
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend((header.len() as u16).to_le_bytes());
        v.extend(header.as_bytes());
        v
    }

    #[test]
    fn numpys_headers() {
        let h = parse_header(
            &npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }          \n"),
            None,
        )
        .unwrap();
        assert_eq!(
            (h.dtype, h.fortran, h.shape.clone()),
            (DType::F32, false, vec![3, 4])
        );
        assert_eq!(h.data_bytes().unwrap(), 48);
        let h = parse_header(
            &npy("{'descr': '>i8', 'fortran_order': True, 'shape': (5,)}"),
            None,
        )
        .unwrap();
        assert!(h.big_endian && h.fortran && h.shape == [5]);
        let h = parse_header(
            &npy("{'shape': (), 'descr': '|b1', 'fortran_order': False}"),
            None,
        )
        .unwrap();
        assert!(h.shape.is_empty() && !h.big_endian);
    }

    #[test]
    fn hostile_headers_are_errs_quickly() {
        let deep = |n: usize| {
            format!(
                "{{'descr': '<f4', 'fortran_order': False, 'shape': {}3{}}}",
                "(".repeat(n),
                ",)".repeat(n)
            )
        };
        for n in [40, 30_000] {
            let e = parse_header(&npy(&deep(n)), None).unwrap_err();
            assert!(e.contains("nested deeper"), "{e}");
        }
        // A list 20 deep in an extra key parses at once (it took 8 s, doubling per level).
        let extra = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': {}{}}}",
            "[".repeat(20),
            "]".repeat(20)
        );
        assert!(parse_header(&npy(&extra), None).is_ok());
        let e = parse_header(&npy("{'descr': '<f4', 'shape': (2,)}"), None).unwrap_err();
        assert!(e.contains("fortran_order"), "{e}");
        let e = parse_header(
            &npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}"),
            None,
        )
        .unwrap_err();
        assert!(e.contains("structured"), "{e}");
        let e = parse_header(
            &npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}"),
            None,
        )
        .unwrap_err();
        assert!(e.contains("not a size"), "{e}");
        // Version 2 with a header length of 2^32 - 1 in a 12-byte file.
        let v2 = b"\x93NUMPY\x02\x00\xff\xff\xff\xff";
        let e = parse_header(v2, Some(12)).unwrap_err();
        assert!(e.contains("4294967295") && e.contains("12 bytes"), "{e}");
        let h = parse_header(
            &npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"),
            None,
        )
        .unwrap();
        assert!(h.data_bytes().is_err());
    }
}
