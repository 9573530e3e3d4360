// Threefry-2x32 random bits in MLX's layout. Parameters: [items, per_key, h, odd,
// e, key_offset, unit, cap]: each key (two u32 words of input a, row-major from key_offset)
// owns e = 2h + odd output words; item c < h of a key hashes counter (c, c+h+odd)
// into words c and c+h+odd, and item h (odd e only) hashes (h, 0) into word h.

// unit = 1 writes MLX's uniform draw of each word instead, min(f32(w) * 2^-32, cap)
// (multiplying by 2^-32 is exact, so this is MLX's division by f32(2^32 - 1) = 2^32).

fn rotl(x: u32, r: u32) -> u32 { return (x << r) | (x >> (32u - r)); }

fn emit(w: u32) -> u32 {
    if (P[6] == 0u) { return w; }
    return bitcast<u32>(min(f32(w) * 2.3283064365386963e-10, bitcast<f32>(P[7])));
}

// Four rounds of mixing with the given rotations.
fn mix4(v0: vec2<u32>, r: vec4<u32>) -> vec2<u32> {
    var v = v0;
    for (var j = 0u; j < 4u; j++) {
        let a = v.x + v.y;
        v = vec2<u32>(a, rotl(v.y, r[j]) ^ a);
    }
    return v;
}

// 20 rounds, key schedule ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA), written out so every
// rotation and key word is a constant or a register (no indexed local arrays).
fn threefry2x32(key: vec2<u32>, ctr: vec2<u32>) -> vec2<u32> {
    let k2 = key.x ^ key.y ^ 0x1BD11BDAu;
    let ra = vec4<u32>(13u, 15u, 26u, 6u);
    let rb = vec4<u32>(17u, 29u, 16u, 24u);
    var v = ctr + key;
    v = mix4(v, ra) + vec2<u32>(key.y, k2 + 1u);
    v = mix4(v, rb) + vec2<u32>(k2, key.x + 2u);
    v = mix4(v, ra) + vec2<u32>(key.x, key.y + 3u);
    v = mix4(v, rb) + vec2<u32>(key.y, k2 + 4u);
    v = mix4(v, ra) + vec2<u32>(k2, key.x + 5u);
    return v;
}

@compute @workgroup_size(WG)
fn random_bits(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
               @builtin(num_workgroups) nwg: vec3<u32>) {
    let per_key = P[1];
    let h = P[2];
    let hi = h + P[3];
    for (var t = thread_index(lid, wid, nwg); t < P[0]; t += thread_count(nwg)) {
        // One key (the common case) needs no division: ~5% of the kernel's time.
        var k = 0u;
        if (per_key < P[0]) { k = t / per_key; }
        let c = t - k * per_key;
        let key = vec2<u32>(wa(P[5] + 2u * k), wa(P[5] + 2u * k + 1u));
        let base = k * P[4];
        if (c < h) {
            let r = threefry2x32(key, vec2<u32>(c, c + hi));
            O[base + c] = emit(r.x);
            O[base + c + hi] = emit(r.y);
        } else {
            O[base + c] = emit(threefry2x32(key, vec2<u32>(c, 0u)).x);
        }
    }
}

// Words [lo, lo + count) of the same layout (an output larger than one binding is
// written in parts), at O[0..count). Parameters: [count, lo, h, h + odd, e,
// key_offset, unit, cap]. One hash per word: a pair's other word may lie in
// another part, so each part computes its own.
@compute @workgroup_size(WG)
fn random_bits_part(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
                    @builtin(num_workgroups) nwg: vec3<u32>) {
    let h = P[2];
    let hi = P[3];
    let e = P[4];
    for (var t = thread_index(lid, wid, nwg); t < P[0]; t += thread_count(nwg)) {
        let g = P[1] + t;
        let k = g / e;
        let p = g - k * e;
        let key = vec2<u32>(wa(P[5] + 2u * k), wa(P[5] + 2u * k + 1u));
        var w: u32;
        if (p < h) {
            w = threefry2x32(key, vec2<u32>(p, p + hi)).x;
        } else if (p < hi) {
            w = threefry2x32(key, vec2<u32>(p, 0u)).x;
        } else {
            w = threefry2x32(key, vec2<u32>(p - hi, p)).y;
        }
        O[t] = emit(w);
    }
}
