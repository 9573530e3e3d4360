// out = alpha * x + beta * y, computed in f32 and rounded to T once.
// The prelude wmx-axpby puts in front defines the element type `T` (f32, or f16
// with `enable f16;`), the bound element `E` (T, or vec4<T> for the vectorised
// contiguous path) and `F`, E's f32 counterpart. Parameters (u32 words):
// [n (of E), ndim, alpha bits, beta bits, x offset, y offset (in E),
//  shape[ndim], x strides[ndim], y strides[ndim]].

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<E>;
@group(0) @binding(2) var<storage, read> x: array<E>;
@group(0) @binding(3) var<storage, read> y: array<E>;

const WG: u32 = 256u;

// Row-major index of this thread: the grid is 2-D past 65535 workgroups.
fn index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.y * nwg.x * WG;
}

fn combine(a: E, b: E) -> E {
    return E(bitcast<f32>(p[2]) * F(a) + bitcast<f32>(p[3]) * F(b));
}

// x and y row-contiguous (from their offsets): a grid-stride loop, so each
// thread keeps several loads in flight and consecutive threads read
// consecutive elements.
@compute @workgroup_size(WG)
fn axpby_contiguous(@builtin(global_invocation_id) gid: vec3<u32>,
                    @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * nwg.y * WG;
    for (var i = index(gid, nwg); i < p[0]; i += stride) {
        out[i] = combine(x[p[4] + i], y[p[5] + i]);
    }
}

// Any layouts (transposed, broadcast, sliced): walk the strides.
@compute @workgroup_size(WG)
fn axpby_general(@builtin(global_invocation_id) gid: vec3<u32>,
                 @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = index(gid, nwg);
    if (i >= p[0]) { return; }
    let nd = p[1];
    var r = i;
    var xo = i32(p[4]);
    var yo = i32(p[5]);
    for (var d = i32(nd) - 1; d >= 0; d--) {
        let e = p[6u + u32(d)];
        let k = i32(r % e);
        xo += k * bitcast<i32>(p[6u + nd + u32(d)]);
        yo += k * bitcast<i32>(p[6u + 2u * nd + u32(d)]);
        r /= e;
    }
    out[i] = combine(x[u32(xo)], y[u32(yo)]);
}
