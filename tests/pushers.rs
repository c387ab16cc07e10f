//! More pushers alive than `threads` (issue 22): an OpenMP or pthreads code
//! with more threads than the assembler's `threads` must be able to push,
//! with the budget shared among however many pushers are alive, the same
//! bytes as one pusher, and no pusher waiting on one that is idle.

use coo_assembler::{
    AssembleOptions, Builder, DType, Error, builder::Pusher, options::DuplicatePolicy,
};
use std::path::Path;
use std::sync::{Barrier, mpsc};
use std::time::Duration;

const SHAPE: [u64; 2] = [64, 80];

/// The smallest budget the planner accepts for `threads`.
fn opts(policy: DuplicatePolicy, dtype: DType, threads: usize, dir: &Path) -> AssembleOptions {
    AssembleOptions {
        memory_budget: crate::common::min_budget(&SHAPE, dtype, threads),
        threads,
        duplicates: policy,
        temp_dir: Some(dir.to_path_buf()),
        ..AssembleOptions::default()
    }
}

/// One pusher's contributions: every coordinate is hit by every pusher
/// many times. Values are unique per contribution (so `last` shows which
/// one won) and, for f64, of mixed magnitudes (so a sum that is not exact
/// shows in the last bits).
fn part(t: u64, n: usize) -> Vec<([u64; 2], f64)> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (0..n as u64)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let idx = [s % SHAPE[0], (s >> 20) % SHAPE[1]];
            let mag = [1e15, 1.0, 1e-9, -1e15, 3.25][(i % 5) as usize];
            (idx, mag * (1.0 + (t * 100_000 + i) as f64 / 1e6))
        })
        .collect()
}

/// The value pushed for `v`: itself into f64, a value from its bits into
/// i64 (unique enough for `last` to show which contribution won).
fn ival(v: f64) -> i64 {
    ((v.to_bits() >> 12) % 1_000_000_007) as i64
}

fn push_one(p: &mut Pusher, idx: &[u64], v: f64, dtype: DType) {
    if dtype == DType::F64 {
        p.push(idx, v).unwrap();
    } else {
        p.push(idx, ival(v)).unwrap();
    }
}

/// Push `entries` through `p` with each of the three kinds of call.
fn push_all(p: &mut Pusher, entries: &[([u64; 2], f64)], dtype: DType) {
    let mut k = 0;
    while k < entries.len() {
        let (idx, v) = entries[k];
        match k % 3 {
            0 => {
                push_one(p, &idx, v, dtype);
                k += 1;
            }
            1 => {
                let n = (entries.len() - k).min(7);
                let flat: Vec<u64> = entries[k..k + n].iter().flat_map(|(i, _)| *i).collect();
                let vals: Vec<f64> = entries[k..k + n].iter().map(|e| e.1).collect();
                if dtype == DType::F64 {
                    p.push_many(&flat, &vals).unwrap();
                } else {
                    let ints: Vec<i64> = vals.iter().map(|&v| ival(v)).collect();
                    p.push_many(&flat, &ints).unwrap();
                }
                k += n;
            }
            _ => {
                // A 1x1 element matrix: one contribution through push_element.
                if dtype == DType::F64 {
                    p.push_element(&idx[..1], &[v]).unwrap();
                } else {
                    p.push_element(&idx[..1], &[ival(v)]).unwrap();
                }
                k += 1;
            }
        }
    }
}

/// The coordinates push_all gives a 1x1 element `(i, i)`: the same
/// contributions pushed one at a time (for the one-pusher reference).
fn as_pushed(entries: &[([u64; 2], f64)]) -> Vec<([u64; 2], f64)> {
    let mut out = Vec::new();
    let mut k = 0;
    while k < entries.len() {
        match k % 3 {
            0 => {
                out.push(entries[k]);
                k += 1;
            }
            1 => {
                let n = (entries.len() - k).min(7);
                out.extend_from_slice(&entries[k..k + n]);
                k += n;
            }
            _ => {
                let (idx, v) = entries[k];
                out.push(([idx[0], idx[0]], v));
                k += 1;
            }
        }
    }
    out
}

/// The file one pusher writes from `flat` (contributions as pushed, see
/// [`as_pushed`]), one part after the other.
fn one_pusher(
    flat: &[Vec<([u64; 2], f64)>],
    policy: DuplicatePolicy,
    dtype: DType,
    dir: &Path,
) -> Vec<u8> {
    let o = AssembleOptions {
        memory_budget: 64 << 20,
        threads: 1,
        duplicates: policy,
        temp_dir: Some(dir.to_path_buf()),
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&SHAPE, dtype, o).unwrap();
    {
        let mut p = b.pusher().unwrap();
        for part in flat {
            for &(idx, v) in part {
                push_one(&mut p, &idx, v, dtype);
            }
        }
    }
    let out = dir.join("one.hrry");
    b.finish(&out).unwrap();
    std::fs::read(&out).unwrap()
}

/// Run `f` on its own thread; fail the test instead of hanging if it does
/// not end in `secs` (a pusher waiting on an idle one would never end).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(_) => panic!("{what}: still running after {secs} s (deadlocked?)"),
    }
}

/// Thread `t`'s part in four phases: a share that grows with `t` in even
/// phases and shrinks in odd ones, so threads reach a barrier unevenly.
fn phases(part: &[([u64; 2], f64)], t: usize) -> Vec<&[([u64; 2], f64)]> {
    let mut rest = part;
    let mut out = Vec::new();
    for phase in 0..4 {
        let w = if phase % 2 == 0 { t + 1 } else { 8 - t };
        let n = if phase == 3 {
            rest.len()
        } else {
            (part.len() * w / 40).min(rest.len())
        };
        let (now, later) = rest.split_at(n);
        out.push(now);
        rest = later;
    }
    out
}

/// 8 threads, each with its own pusher, all alive at once under
/// `threads = 2` and the smallest budget. They meet at barriers after
/// unequal amounts, so pushers sit idle holding data while others need
/// chunks. Sum (exact f64) and `last` (i64, unique values), each byte for
/// byte as one pusher writes the same contributions in pusher order.
#[test]
fn eight_pushers_under_two_threads_write_what_one_pusher_writes() {
    for (policy, dtype) in [
        (DuplicatePolicy::Sum, DType::F64),
        (DuplicatePolicy::Last, DType::I64),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let parts: Vec<_> = (0..8u64)
            .map(|t| part(t, 12_000 + 2_000 * t as usize))
            .collect();
        // What push_all pushes, phase by phase (its calls restart with each).
        let flat: Vec<_> = parts
            .iter()
            .enumerate()
            .map(|(t, p)| phases(p, t).iter().flat_map(|ph| as_pushed(ph)).collect())
            .collect();
        let want = one_pusher(&flat, policy, dtype, dir.path());
        let o = opts(policy, dtype, 2, dir.path());
        let d = dir.path().to_path_buf();
        let parts2 = parts.clone();
        let d2 = dir.path().to_path_buf();
        let (s, got) = within(300, "8 pushers under threads = 2", move || {
            let mut b = Builder::new(&SHAPE, dtype, o).unwrap();
            // Made in order on this thread: `last` ranks them so.
            let pushers: Vec<Pusher> = (0..8).map(|_| b.pusher().unwrap()).collect();
            let barrier = Barrier::new(8);
            std::thread::scope(|sc| {
                for (t, (mut p, part)) in pushers.into_iter().zip(&parts2).enumerate() {
                    let barrier = &barrier;
                    sc.spawn(move || {
                        for now in phases(part, t) {
                            push_all(&mut p, now, dtype);
                            barrier.wait();
                        }
                    });
                }
            });
            let out = d.join("eight.hrry");
            let s = b.finish(&out).unwrap();
            (s, std::fs::read(&out).unwrap())
        });
        let n: usize = parts.iter().map(Vec::len).sum();
        assert_eq!(s.contributions, n as u64, "{policy:?}");
        assert!(
            s.runs_spilled > 0,
            "{policy:?}: no spill at the smallest budget: {s:?}"
        );
        assert!(
            s.peak_buffer_bytes <= s.memory_budget,
            "{policy:?}: peak {} over the budget {}",
            s.peak_buffer_bytes,
            s.memory_budget
        );
        if got != want {
            let entries = |b: &[u8]| {
                let p = d2.join("cmp.hrry");
                std::fs::write(&p, b).unwrap();
                let f = coo_assembler::HurrayFile::open(&p).unwrap();
                let t = f.only_tensor().unwrap();
                t.iter().map(|(i, v)| (i.to_vec(), v)).collect::<Vec<_>>()
            };
            let (g, w) = (entries(&got), entries(&want));
            let diff: Vec<_> = g.iter().zip(&w).filter(|(a, b)| a != b).take(5).collect();
            panic!(
                "{policy:?}: 8 pushers wrote other bytes than one: {} vs {} entries, {diff:?}",
                g.len(),
                w.len()
            );
        }
    }
}

/// Pushers used in turns from one thread, with threads = 1 (the pushers
/// sort on their own thread) and 2. A waiting pusher can only go on if it
/// takes an idle one's chunk. With `last` the pusher made last wins,
/// whenever it pushed: here it pushes first.
#[test]
fn pushers_taking_turns_on_one_thread_keep_pusher_order() {
    for threads in [1, 2] {
        for (policy, dtype) in [
            (DuplicatePolicy::Last, DType::I64),
            (DuplicatePolicy::Sum, DType::F64),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let flat: Vec<_> = (0..4u64).map(|t| as_pushed(&part(t, 30_000))).collect();
            // Each pusher starts with (0, 0) = its rank + 1; they push it
            // in the reverse order of their ranks.
            let firsts: Vec<_> = (0..4)
                .map(|t| {
                    let mut f = vec![([0, 0], t as f64 + 1.0)];
                    f.extend_from_slice(&flat[t]);
                    f
                })
                .collect();
            let want = one_pusher(&firsts, policy, dtype, dir.path());
            let o = opts(policy, dtype, threads, dir.path());
            let d = dir.path().to_path_buf();
            let (s, got) = within(300, "pushers in turns", move || {
                let mut b = Builder::new(&SHAPE, dtype, o).unwrap();
                let mut pushers: Vec<Pusher> = (0..4).map(|_| b.pusher().unwrap()).collect();
                for t in (0..4).rev() {
                    push_one(&mut pushers[t], &[0, 0], t as f64 + 1.0, dtype);
                }
                // Then bursts of different lengths, in turns.
                let mut at = [0usize; 4];
                let mut round = 0usize;
                while at.iter().zip(&flat).any(|(a, f)| a < &f.len()) {
                    for t in 0..4 {
                        let burst = 500 + 997 * ((round + t) % 7);
                        let end = (at[t] + burst).min(flat[t].len());
                        for &(idx, v) in &flat[t][at[t]..end] {
                            push_one(&mut pushers[t], &idx, v, dtype);
                        }
                        at[t] = end;
                    }
                    round += 1;
                }
                drop(pushers);
                let out = d.join("turns.hrry");
                let s = b.finish(&out).unwrap();
                (s, std::fs::read(&out).unwrap())
            });
            assert!(
                s.peak_buffer_bytes <= s.memory_budget,
                "threads {threads}, {policy:?}: {s:?}"
            );
            assert!(s.runs_spilled > 0, "threads {threads}, {policy:?}: {s:?}");
            assert!(
                got == want,
                "threads {threads}, {policy:?}: other bytes than one pusher"
            );
        }
    }
}

/// A hundred pushers alive at once, pushed in turns from one thread, and
/// the builder's own pusher too: no limit, the budget holds. Then the
/// builder goes while guests live: their pushes end with `Finished`.
#[test]
fn a_hundred_pushers_alive_at_once() {
    for (policy, dtype) in [
        (DuplicatePolicy::Sum, DType::F64),
        (DuplicatePolicy::Last, DType::I64),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let flat: Vec<_> = (0..100u64).map(|t| part(t, 1_500)).collect();
        let mut with_corner = flat.clone();
        with_corner.push(vec![([63, 79], 1.0)]);
        let want = one_pusher(&with_corner, policy, dtype, dir.path());
        let o = opts(policy, dtype, 2, dir.path());
        let d = dir.path().to_path_buf();
        let (s, got) = within(300, "100 pushers", move || {
            let mut b = Builder::new(&SHAPE, dtype, o).unwrap();
            let mut pushers: Vec<Pusher> = (0..100).map(|_| b.pusher().unwrap()).collect();
            for k in (0..1_500).step_by(300) {
                for (p, f) in pushers.iter_mut().zip(&flat) {
                    for &(idx, v) in &f[k..k + 300] {
                        push_one(p, &idx, v, dtype);
                    }
                }
            }
            // The builder's own pusher is one more (made last, so it does
            // not change what `last` keeps: it pushes a new coordinate).
            if dtype == DType::F64 {
                b.push(&[63, 79], 1.0).unwrap();
            } else {
                b.push(&[63, 79], ival(1.0)).unwrap();
            }
            drop(pushers);
            let out = d.join("hundred.hrry");
            let s = b.finish(&out).unwrap();
            (s, std::fs::read(&out).unwrap())
        });
        assert_eq!(s.contributions, 150_001);
        assert!(s.peak_buffer_bytes <= s.memory_budget, "{policy:?}: {s:?}");
        assert!(
            got == want,
            "{policy:?}: 100 pushers wrote other bytes than one"
        );
    }
}

/// Guests whose builder is gone: a push that needs a chunk says
/// `Finished` (never hangs), whatever the policy.
#[test]
fn guests_outliving_their_builder_get_finished() {
    for policy in [DuplicatePolicy::Sum, DuplicatePolicy::Last] {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(policy, DType::F64, 2, dir.path());
        let r = within(120, "guests after the builder", move || {
            let b = Builder::new(&SHAPE, DType::F64, o).unwrap();
            let mut pushers: Vec<Pusher> = (0..6).map(|_| b.pusher().unwrap()).collect();
            for p in &mut pushers {
                p.push(&[1, 1], 1.0).unwrap();
            }
            drop(b);
            let mut errors = Vec::new();
            for p in &mut pushers {
                let mut e = None;
                for i in 0..10_000_000u64 {
                    if let Err(x) = p.push(&[i % 64, i % 80], 1.0) {
                        e = Some(x);
                        break;
                    }
                }
                errors.push(e);
            }
            errors
        });
        for e in r {
            assert!(matches!(e, Some(Error::Finished)), "{policy:?}: {e:?}");
        }
    }
}
