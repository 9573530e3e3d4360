//! The conformance suite on the WebGPU backend (Mesa lavapipe in CI). With no
//! adapter every test fails, unless `WMX_ALLOW_NO_GPU=1`.

fn gpu() -> Option<wmx_core::Device> {
    wmx_tests::gpu::device(wmx_webgpu::open)
}

wmx_tests::conformance_tests!(webgpu, gpu());
