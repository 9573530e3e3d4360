//! `--readback`: where a GPU-to-host read's time goes (issue 39's staging): the
//! library's read, then its pieces by hand (the staging buffer's creation, copy and
//! map, the copy out of the mapped memory, a fresh host buffer's first touch), and
//! a user's `to_vec` of a fresh array.

use super::{Res, err};
use std::time::Instant;
use wmx_kernels as k;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

pub(crate) fn bench_readback(kern: &k::Kernels) -> Res<()> {
    let dev = kern.device();
    let queue = kern.queue();
    const CHUNK: u64 = 64 << 20;
    for size in [16u64 << 20, 256 << 20] {
        let src = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback src"),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut lib = Vec::new();
        for _ in 0..4 {
            let t = Instant::now();
            let v = kern.read_blocking(&src, 0, size).map_err(err)?;
            lib.push(ms(t));
            drop(v);
        }
        let chunk = size.min(CHUNK);
        let t = Instant::now();
        let staging = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback staging"),
            size: chunk,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let t_create = ms(t);
        let mut dst = vec![1u8; size as usize];
        let (mut t_map, mut t_copy, mut t_wait) = (0.0, 0.0, 0.0);
        for _ in 0..3 {
            let mut done = 0;
            while done < size {
                let len = (size - done).min(chunk);
                let t = Instant::now();
                let mut enc = dev.create_command_encoder(&Default::default());
                enc.copy_buffer_to_buffer(&src, done, &staging, 0, len);
                queue.submit([enc.finish()]);
                dev.poll(wgpu::PollType::wait_indefinitely()).map_err(err)?;
                t_wait += ms(t);
                let t = Instant::now();
                staging.slice(..len).map_async(wgpu::MapMode::Read, |_| {});
                dev.poll(wgpu::PollType::wait_indefinitely()).map_err(err)?;
                t_map += ms(t);
                let t = Instant::now();
                {
                    let view = staging.slice(..len).get_mapped_range().map_err(err)?;
                    dst[done as usize..(done + len) as usize].copy_from_slice(&view);
                }
                staging.unmap();
                t_copy += ms(t);
                done += len;
            }
        }
        let t = Instant::now();
        let mut fresh: Vec<u8> = Vec::with_capacity(size as usize);
        fresh.extend_from_slice(&dst);
        let t_touch = ms(t);
        let t = Instant::now();
        let again = dst.clone();
        let t_clone = ms(t);
        drop((fresh, again));
        lib.sort_by(|a, b| a.total_cmp(b));
        let gb = |ms: f64| size as f64 / ms / 1e6;
        println!(
            "readback {} MiB: library read {:.2} ms ({:.1} GB/s); by hand per read: copy {:.2} ms ({:.1} GB/s), map {:.2}, copy out of mapped {:.2} ({:.1} GB/s); staging creation {:.2} ms; fresh Vec first touch {:.2} ms ({:.1} GB/s), clone {:.2} ms",
            size >> 20,
            lib[1],
            gb(lib[1]),
            t_wait / 3.0,
            gb(t_wait / 3.0),
            t_map / 3.0,
            t_copy / 3.0,
            gb(t_copy / 3.0),
            t_create,
            t_touch,
            gb(t_touch),
            t_clone
        );
    }
    Ok(())
}

/// `to_vec::<f32>` of a fresh (never read) GPU array of 16 and 256 MiB: the
/// median of 5, the array computed and waited for before each timed read.
pub(crate) fn bench_to_vec(dev: &wmx::Device) -> Res<()> {
    for mib in [16usize, 256] {
        let n = (mib << 20) / 4;
        let mut times = Vec::new();
        for i in 0..5 {
            let x = wmx::with_device(dev, || wmx::full(&[n], i as f64, wmx::DType::F32))
                .map_err(err)?;
            x.eval().map_err(err)?;
            dev.synchronize().map_err(err)?;
            let t = Instant::now();
            let v = x.to_vec::<f32>().map_err(err)?;
            times.push(ms(t));
            if v[n - 1] != i as f32 {
                return Err(format!("to_vec read {} for {i}", v[n - 1]));
            }
        }
        times.sort_by(|a, b| a.total_cmp(b));
        println!(
            "to_vec {mib} MiB f32: {:.2} ms ({:.1} GB/s), median of 5",
            times[2],
            (mib << 20) as f64 / times[2] / 1e6
        );
    }
    Ok(())
}
