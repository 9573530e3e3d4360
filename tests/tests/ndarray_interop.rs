//! ndarray interop (feature `ndarray`): `Array::from_ndarray[_on]`, `to_ndarray`,
//! `TryFrom<ndarray::Array>`, on the CPU and (lavapipe in CI) the GPU, against the
//! ndarray values themselves: every dtype, transposed, sliced and broadcast views,
//! 0-d and empty arrays, and the wrong element type as an `Err`.

use ndarray::{ArrayD, IxDyn, s};
use wmx_core::{Array, DType, Device, Element, bf16, f16};
use wmx_tests::gpu::devices;

/// `a` to an array on `dev` with `T`'s dtype and back, unchanged.
fn round_trip<T: Element, D: ndarray::Dimension>(a: ndarray::Array<T, D>, dev: &Device) {
    let x = Array::from_ndarray_on(&a, dev).unwrap();
    assert_eq!((x.shape(), x.dtype()), (a.shape(), T::DTYPE));
    assert_eq!(x.to_ndarray::<T>().unwrap(), a.into_dyn());
}

#[test]
fn round_trips_every_dtype() {
    for dev in devices() {
        round_trip(
            ndarray::Array::from_shape_fn((3, 4), |(i, j)| i as f32 * 10.0 - j as f32 * 0.25),
            &dev,
        );
        round_trip(
            ndarray::Array::from_shape_fn((2, 3, 2), |(a, b, c)| (a * 6 + b * 2 + c) as i32 - 5),
            &dev,
        );
        round_trip(ndarray::arr1(&[0u8, 7, 255]), &dev);
        round_trip(ndarray::arr1(&[0u32, 7, u32::MAX]), &dev);
        round_trip(ndarray::arr2(&[[true, false], [false, true]]), &dev);
        round_trip(
            ndarray::arr1(&[f16::from_f32(0.1), f16::from_f32(-2.5), f16::INFINITY]),
            &dev,
        );
        round_trip(
            ndarray::arr1(&[bf16::from_f32(0.1), bf16::from_f32(-3e38)]),
            &dev,
        );
    }
}

#[test]
fn views_are_copied_in_logical_order() {
    for dev in devices() {
        let base = ndarray::Array::from_shape_fn((5, 6), |(i, j)| (i * 6 + j) as f32);
        // Transposed, stepped and negative-stepped slices, and a broadcast (stride 0).
        let t = base.t();
        let sl = base.slice(s![1..5;2, ..;-3]);
        let bc = ndarray::arr1(&[1.0f32, 2.0, 3.0])
            .broadcast((4, 3))
            .unwrap()
            .to_owned();
        let bcv = ndarray::arr1(&[1.0f32, 2.0, 3.0]);
        let bcv = bcv.broadcast((4, 3)).unwrap();
        for (what, v, want) in [
            (
                "transposed",
                Array::from_ndarray_on(&t, &dev),
                t.to_owned().into_dyn(),
            ),
            (
                "sliced",
                Array::from_ndarray_on(&sl, &dev),
                sl.to_owned().into_dyn(),
            ),
            (
                "broadcast",
                Array::from_ndarray_on(&bcv, &dev),
                bc.into_dyn(),
            ),
        ] {
            let got = v.unwrap().to_ndarray::<f32>().unwrap();
            assert_eq!(got, want, "{what}");
        }
        // A wmx result read back: a transposed view computed on the device.
        let x = Array::from_ndarray_on(&base, &dev).unwrap();
        let y = (&x.t().unwrap() * 2.0).to_ndarray::<f32>().unwrap();
        assert_eq!(y, base.t().mapv(|v| v * 2.0).into_dyn());
    }
}

#[test]
fn scalars_empty_errors_and_try_from() {
    for dev in devices() {
        let z = ndarray::arr0(4.5f32);
        let x = Array::from_ndarray_on(&z, &dev).unwrap();
        assert_eq!(x.shape(), &[] as &[usize]);
        assert_eq!(x.to_ndarray::<f32>().unwrap(), z.into_dyn());

        let e = ArrayD::<f32>::zeros(IxDyn(&[3, 0, 2]));
        let x = Array::from_ndarray_on(&e, &dev).unwrap();
        assert_eq!(x.shape(), &[3, 0, 2]);
        assert_eq!(x.to_ndarray::<f32>().unwrap(), e);

        // The wrong element type is an Err naming the dtypes, never a reinterpretation.
        let x = Array::from_ndarray_on(&ndarray::arr1(&[1.0f32, 2.0]), &dev).unwrap();
        let err = x.to_ndarray::<i32>().unwrap_err().to_string();
        assert!(err.contains("f32") && err.contains("i32"), "{err}");
        assert_eq!(
            x.astype(DType::I32).unwrap().to_ndarray::<i32>().unwrap(),
            ndarray::arr1(&[1, 2]).into_dyn()
        );
    }
    // TryFrom on the default device.
    let a = ndarray::arr2(&[[1.0f32, 2.0], [3.0, 4.0]]);
    let x = Array::try_from(a.clone()).unwrap();
    assert_eq!(x.to_ndarray::<f32>().unwrap(), a.into_dyn());
}
