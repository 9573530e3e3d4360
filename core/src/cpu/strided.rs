//! Walking strided layouts on the CPU, with contiguous dims collapsed first.

use crate::layout::collapse_dims;

/// Calls `f` with the buffer element index of every element, row-major.
pub fn for_each_index(shape: &[usize], strides: &[isize], offset: usize, mut f: impl FnMut(usize)) {
    walk::<1>(shape, [strides], [offset], |[i]| f(i));
}

/// Calls `f` with the element indices in `N` buffers of every element of `shape`,
/// row-major. The innermost dimension runs as a tight loop.
pub fn walk<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    offsets: [usize; N],
    mut f: impl FnMut([usize; N]),
) {
    if shape.contains(&0) {
        return;
    }
    let (shape, strides) = collapse_dims(shape, &strides);
    let nd = shape.len();
    let inner = shape[nd - 1];
    let inner_st: [isize; N] = std::array::from_fn(|k| strides[k][nd - 1]);
    let mut idx = vec![0usize; nd];
    let mut base: [isize; N] = std::array::from_fn(|k| offsets[k] as isize);
    loop {
        let mut p = base;
        for _ in 0..inner {
            f(std::array::from_fn(|k| p[k] as usize));
            for k in 0..N {
                p[k] += inner_st[k];
            }
        }
        // Odometer over the outer dims.
        let mut d = nd - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for k in 0..N {
                base[k] += strides[k][d];
            }
            if idx[d] < shape[d] {
                break;
            }
            for k in 0..N {
                base[k] -= strides[k][d] * shape[d] as isize;
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_transposed_and_negative() {
        let mut got = vec![];
        // 2x3 transposed view of a 3x2 buffer.
        for_each_index(&[2, 3], &[1, 2], 0, |i| got.push(i));
        assert_eq!(got, vec![0, 2, 4, 1, 3, 5]);
        got.clear();
        for_each_index(&[4], &[-1], 3, |i| got.push(i));
        assert_eq!(got, vec![3, 2, 1, 0]);
        got.clear();
        for_each_index(&[0, 3], &[3, 1], 0, |i| got.push(i));
        assert!(got.is_empty());
        for_each_index(&[], &[], 5, |i| got.push(i));
        assert_eq!(got, vec![5]);
    }
}
