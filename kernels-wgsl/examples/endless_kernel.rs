//! What an endless user kernel does on this adapter: dispatches one that never
//! ends, waits for the read with a deadline, then tries ordinary work again.
//! (Run by hand on a GPU, under `timeout`; its outcome is in docs/EXTENDING.md.)

use std::time::Instant;
use wmx_kernels::{Batch, Kernels, RequestOptions, UserModule};

fn main() {
    let k = pollster::block_on(Kernels::request(&RequestOptions::default())).expect("a GPU");
    println!("adapter: {}", k.caps().adapter_name);
    let source = "
@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(1)
fn main() {
    var i = 0u;
    loop {
        y[i & 3u] = i;
        i += 1u;
        if (p[0] == 7u && i == 0xffffffffu) { break; }
    }
}";
    let pipe = k
        .user_pipeline(&UserModule {
            label: "endless",
            source,
            entry: "main",
            outputs: 1,
            inputs: 0,
        })
        .expect("it compiles");
    let out = k.create_buffer(16, None).unwrap();
    let mut b = Batch::new();
    b.dispatch_user(&pipe, &[&out], &[0], [1, 1, 1]).unwrap();
    let t = Instant::now();
    println!("submit: {:?}", k.submit(b));
    println!(
        "read: {:?} after {:?}",
        k.read_blocking(&out, 0, 16).map(|v| v.len()),
        t.elapsed()
    );
    let again = k.create_buffer(16, None);
    println!("a new buffer: {:?}", again.as_ref().map(|_| ()));
    if let Ok(o) = again {
        let mut b = Batch::new();
        let r = b.dispatch_user(&pipe, &[&o], &[7], [1, 1, 1]);
        println!("another dispatch: {r:?}; submit: {:?}", k.submit(b));
        println!(
            "its read: {:?}",
            k.read_blocking(&o, 0, 16).map(|v| v.len())
        );
    }
    println!("done after {:?}", t.elapsed());
}
