//! Each family's way of computing arrays past one binding or one buffer, beside
//! one another: the planner that cuts an index space into pieces is `split.rs`,
//! the segments of arrays past one buffer `segments.rs`; these use both.

mod index;
mod matmul;
mod reduce;
mod scan;
