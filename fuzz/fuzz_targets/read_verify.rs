//! Hostile Hurray files: `HurrayFile::from_bytes_with` (strict and
//! permissive), `verify`, and the accessors on whatever opens. Any panic,
//! hang (libFuzzer -timeout) or huge allocation (-malloc_limit_mb) is a
//! finding.
//!
//!   cd fuzz && cargo +nightly fuzz run read_verify -- -max_total_time=300 -malloc_limit_mb=64
#![no_main]

use coo_assembler::{HurrayFile, ReadOptions, Tensor};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for permissive in [false, true] {
        let Ok(f) = HurrayFile::from_bytes_with(data, ReadOptions { permissive }) else {
            continue;
        };
        let _ = f.verify();
        for _ in f.kv() {}
        for t in f.tensor_views() {
            let Tensor::Compressed(c) = t else { continue };
            let _ = c.verify();
            for (n, e) in c.iter().enumerate() {
                if let (true, Ok((i, j, _))) = (n < 4, e) {
                    let _ = c.get(&[i, j]);
                }
            }
            for m in [0, 1, c.major_extent().saturating_sub(1)] {
                let _ = c.lane::<f64>(m);
                let _ = c.row::<i32>(m);
                let _ = c.column::<f32>(m);
            }
            let _ = c.get(&[1, 1]);
        }
        for t in f.tensors() {
            let _ = t.verify();
            let rank = t.rank();
            for (n, (idx, _v)) in t.iter().enumerate() {
                if n < 4 {
                    let _ = t.get(idx);
                    let _ = t.find(idx);
                }
            }
            let probe = vec![1u64; rank];
            let _ = t.get(&probe);
            let _ = t.lower_bound(&probe);
            let _ = t.prefix_range(&probe[..rank.min(1)]);
        }
    }
});
