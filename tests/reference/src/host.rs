//! A host-side n-d array with views computed by plain index arithmetic (no
//! strides), the reference for core's layouts.

use crate::val::Val;

/// Row-major values with a shape.
#[derive(Debug, Clone)]
pub struct HostArr {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Elements, row-major.
    pub data: Vec<Val>,
}

/// All multi-indices of `shape`, row-major.
pub fn indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0; shape.len()];
    for _ in 0..n {
        out.push(idx.clone());
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Python's `slice(start, stop, step).indices(len)` as the list of indices.
pub fn slice_indices(
    len: usize,
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
) -> Vec<usize> {
    assert!(step != 0);
    let n = len as isize;
    let fix = |v: isize, lo: isize, hi: isize| {
        let v = if v < 0 { v + n } else { v };
        v.clamp(lo, hi)
    };
    let mut out = Vec::new();
    if step > 0 {
        let (mut i, e) = (
            start.map_or(0, |s| fix(s, 0, n)),
            stop.map_or(n, |s| fix(s, 0, n)),
        );
        while i < e {
            out.push(i as usize);
            i += step;
        }
    } else {
        let (mut i, e) = (
            start.map_or(n - 1, |s| fix(s, -1, n - 1)),
            stop.map_or(-1, |s| fix(s, -1, n - 1)),
        );
        while i > e {
            out.push(i as usize);
            i += step;
        }
    }
    out
}

impl HostArr {
    /// From shape and data (lengths must agree).
    pub fn new(shape: &[usize], data: Vec<Val>) -> HostArr {
        assert_eq!(
            shape.iter().product::<usize>(),
            data.len(),
            "host array {shape:?}"
        );
        HostArr {
            shape: shape.to_vec(),
            data,
        }
    }
    /// Element at a multi-index.
    pub fn get(&self, idx: &[usize]) -> Val {
        let mut k = 0;
        for (d, &i) in idx.iter().enumerate() {
            assert!(i < self.shape[d]);
            k = k * self.shape[d] + i;
        }
        self.data[k]
    }
    /// Builds `shape` with `f(index)`.
    pub fn from_fn(shape: &[usize], f: impl Fn(&[usize]) -> Val) -> HostArr {
        let data = indices(shape).iter().map(|i| f(i)).collect();
        HostArr::new(shape, data)
    }
    /// Axes permuted: `out[i] = self[j]` with `j[perm[k]] = i[k]`.
    pub fn transpose(&self, perm: &[usize]) -> HostArr {
        let shape: Vec<usize> = perm.iter().map(|&p| self.shape[p]).collect();
        HostArr::from_fn(&shape, |i| {
            let mut j = vec![0; i.len()];
            for (k, &p) in perm.iter().enumerate() {
                j[p] = i[k];
            }
            self.get(&j)
        })
    }
    /// numpy broadcasting to `shape`.
    pub fn broadcast_to(&self, shape: &[usize]) -> HostArr {
        let pad = shape.len() - self.shape.len();
        HostArr::from_fn(shape, |i| {
            let j: Vec<usize> = (0..self.shape.len())
                .map(|d| if self.shape[d] == 1 { 0 } else { i[d + pad] })
                .collect();
            self.get(&j)
        })
    }
    /// One (start, stop, step) per leading axis.
    pub fn slice(&self, specs: &[(Option<isize>, Option<isize>, isize)]) -> HostArr {
        let lists: Vec<Vec<usize>> = (0..self.shape.len())
            .map(|d| match specs.get(d) {
                Some(&(a, b, s)) => slice_indices(self.shape[d], a, b, s),
                None => (0..self.shape[d]).collect(),
            })
            .collect();
        let shape: Vec<usize> = lists.iter().map(|l| l.len()).collect();
        HostArr::from_fn(&shape, |i| {
            let j: Vec<usize> = i.iter().enumerate().map(|(d, &k)| lists[d][k]).collect();
            self.get(&j)
        })
    }
    /// Same data, new shape.
    pub fn reshape(&self, shape: &[usize]) -> HostArr {
        HostArr::new(shape, self.data.clone())
    }
    /// Reduces `axes` (sorted or not) with `f` over the reduced elements in
    /// row-major order; returns the kept shape.
    pub fn reduce<T>(&self, axes: &[usize], f: impl Fn(&[Val]) -> T) -> (Vec<usize>, Vec<T>) {
        let kept: Vec<usize> = (0..self.shape.len())
            .filter(|d| !axes.contains(d))
            .collect();
        let red: Vec<usize> = (0..self.shape.len()).filter(|d| axes.contains(d)).collect();
        let kshape: Vec<usize> = kept.iter().map(|&d| self.shape[d]).collect();
        let rshape: Vec<usize> = red.iter().map(|&d| self.shape[d]).collect();
        let rind = indices(&rshape);
        let out = indices(&kshape)
            .iter()
            .map(|ki| {
                let vals: Vec<Val> = rind
                    .iter()
                    .map(|ri| {
                        let mut j = vec![0; self.shape.len()];
                        for (k, &d) in kept.iter().enumerate() {
                            j[d] = ki[k];
                        }
                        for (k, &d) in red.iter().enumerate() {
                            j[d] = ri[k];
                        }
                        self.get(&j)
                    })
                    .collect();
                f(&vals)
            })
            .collect();
        (kshape, out)
    }
}
