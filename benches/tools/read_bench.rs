//! Reader figures on an existing file: open (structure validated), random
//! lookups with `get`, row ranges, and `verify`.
//!
//! ```text
//! cargo run --release -p coo-assembler-benches --example read_bench -- FILE.hrry [LOOKUPS]
//! ```

use coo_assembler::HurrayFile;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: read_bench FILE.hrry [LOOKUPS]")?;
    let lookups: u64 = args.next().map_or(Ok(2_000_000), |s| s.parse())?;

    // Open cost does not depend on nnz: repeat it to get a stable figure.
    let reps = 200;
    let t = Instant::now();
    for _ in 0..reps {
        let f = HurrayFile::open(&path)?;
        std::hint::black_box(f.tensor_count());
    }
    let open = t.elapsed() / reps;

    let f = HurrayFile::open(&path)?;
    let k = f.only_tensor()?;
    let (nnz, shape) = (k.nnz(), k.shape().to_vec());
    println!(
        "{path}: {} entries, shape {shape:?}, {} bytes",
        nnz,
        f.len()
    );
    println!(
        "open (mmap + structural validation): {:.1} us",
        open.as_secs_f64() * 1e6
    );

    // Half the queries hit stored entries, half are random coordinates.
    let mut s = 0x2545f4914f6cdd1du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let t = Instant::now();
    let mut hits = 0u64;
    let mut idx = vec![0u64; shape.len()];
    for q in 0..lookups {
        if q % 2 == 0 && nnz > 0 {
            idx.copy_from_slice(k.index(next() % nnz));
        } else {
            for (i, e) in idx.iter_mut().zip(&shape) {
                *i = next() % e;
            }
        }
        if !k.get(&idx)?.is_zero() {
            hits += 1;
        }
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "{lookups} gets: {:.2} M lookups/s ({hits} non-zero)",
        lookups as f64 / dt / 1e6
    );

    let t = Instant::now();
    let rows = 100_000u64.min(shape[0]);
    let mut entries = 0u64;
    for _ in 0..rows {
        let r = k.prefix_range(&[next() % shape[0]])?;
        entries += r.end - r.start;
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "{rows} row ranges: {:.2} M rows/s ({entries} entries)",
        rows as f64 / dt / 1e6
    );

    let t = Instant::now();
    let problems = f.verify();
    println!(
        "verify: {:.2} s, {} problems ({:.0} M entries/s)",
        t.elapsed().as_secs_f64(),
        problems.len(),
        nnz as f64 / t.elapsed().as_secs_f64() / 1e6
    );
    Ok(())
}
