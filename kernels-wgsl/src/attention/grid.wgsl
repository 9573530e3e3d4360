// The attention kernels' grid: workgroup t is row block t % P[5] of key head
// (t / P[5]) % P[4], then batch, then chunk of keys (P[23] batches).

struct FlashCell { blk: u32, hk: u32, b: u32, split: u32 }

fn flash_cell(t: u32) -> FlashCell {
    let rest = t / P[5];
    let hb = rest / P[4];
    return FlashCell(t % P[5], rest % P[4], hb % P[23], hb / P[23]);
}
