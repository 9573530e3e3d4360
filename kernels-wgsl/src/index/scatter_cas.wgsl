// Combines update u with element j of output word w by compare-exchange: any op,
// any element width (16-bit and 8-bit elements share their word with others).
fn merge(w: u32, j: u32, u: CB) {
    var old = atomicLoad(&O[w]);
    loop {
        let next = put(old, j, combine(old, j, u));
        let r = atomicCompareExchangeWeak(&O[w], old, next);
        if (r.exchanged) { break; }
        old = r.old_value;
    }
}
