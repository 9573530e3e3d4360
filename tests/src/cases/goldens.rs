//! Goldens from PyTorch (`tests/goldens/*.py` write `name|shape|values` lines,
//! CPU float32), parsed once per file and compared with wmx's results.

use std::collections::HashMap;
use std::sync::OnceLock;
use wmx_core::{Array, Device};

/// One golden: its shape and values.
pub type Golden = (Vec<usize>, Vec<f64>);

/// The goldens of one file, parsed on first use.
pub struct Goldens {
    text: &'static str,
    parsed: OnceLock<HashMap<String, Golden>>,
}

impl Goldens {
    /// The goldens in `text` (an `include_str!` of a `.txt`).
    pub const fn new(text: &'static str) -> Goldens {
        Goldens {
            text,
            parsed: OnceLock::new(),
        }
    }

    /// The golden `name`; a missing one panics naming it.
    pub fn get(&self, name: &str) -> &Golden {
        self.get_opt(name)
            .unwrap_or_else(|| panic!("no golden {name}"))
    }

    /// The golden `name`, if the file has it.
    pub fn get_opt(&self, name: &str) -> Option<&Golden> {
        self.parsed
            .get_or_init(|| {
                self.text
                    .lines()
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(parse)
                    .collect()
            })
            .get(name)
    }

    /// The golden as an f32 array on `dev`.
    pub fn arr(&self, dev: &Device, name: &str) -> Array {
        let (shape, v) = self.get(name);
        let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        super::ok(name, Array::from_slice_on(&v, shape, dev))
    }

    /// The golden as an i32 array on `dev` (indices).
    pub fn idx(&self, dev: &Device, name: &str) -> Array {
        let (shape, v) = self.get(name);
        let v: Vec<i32> = v.iter().map(|&x| x as i32).collect();
        super::ok(name, Array::from_slice_on(&v, shape, dev))
    }

    /// `got` against golden `name`: shape, and values within `rtol` of each value
    /// plus `atol` of the golden's scale (its largest magnitude, at least 1).
    pub fn check(&self, what: &str, got: &Array, name: &str, rtol: f64, atol: f64) {
        let (shape, want) = self.get(name);
        assert_eq!(got.shape(), shape.as_slice(), "{what}: shape");
        let g: Vec<f64> = super::ok(what, got.to_vec_as::<f64>());
        let scale = want.iter().fold(0f64, |m, v| m.max(v.abs())).max(1.0);
        for (i, (&a, &b)) in g.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= rtol * b.abs() + atol * scale,
                "{what}: element {i}: got {a}, the golden {b}"
            );
        }
    }
}

fn parse(line: &str) -> (String, Golden) {
    let mut it = line.split('|');
    let mut field = || {
        it.next()
            .unwrap_or_else(|| panic!("bad golden line {line:.60}"))
    };
    let name = field().to_string();
    let numbers = |s: &str| -> Vec<f64> {
        s.split(',')
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse()
                    .unwrap_or_else(|_| panic!("bad number {s} in golden {name}"))
            })
            .collect()
    };
    let shape = numbers(field()).into_iter().map(|d| d as usize).collect();
    let vals = numbers(field());
    (name, (shape, vals))
}
