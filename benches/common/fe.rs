//! Shared bench data generators (included with `#[path]` by pipeline.rs and
//! e2e.rs; not a bench target itself).
//!
//! FE: a structured 3D mesh of `m^3` trilinear (Q1) hexahedra, one dof per
//! node, visited in element order; each element emits its dense 8x8 Laplace
//! stiffness matrix (2x2x2 Gauss quadrature on the reference cube, scaled by
//! the element size and a per-element coefficient in [1, 1.5)), so rows sum
//! to zero and the pattern is the 27-point stencil. 64 contributions per
//! element; every interior matrix entry is hit up to 8 times.
#![allow(dead_code)]

/// splitmix64 step.
pub fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Uniform in [0, 1).
pub fn unit(s: &mut u64) -> f64 {
    (splitmix(s) >> 11) as f64 / (1u64 << 53) as f64
}

/// The 8x8 Laplace stiffness matrix of the unit cube, Q1, 2x2x2 Gauss.
pub fn q1_laplace() -> [f64; 64] {
    let corners: [[f64; 3]; 8] = [
        [0., 0., 0.],
        [1., 0., 0.],
        [1., 1., 0.],
        [0., 1., 0.],
        [0., 0., 1.],
        [1., 0., 1.],
        [1., 1., 1.],
        [0., 1., 1.],
    ];
    let g = [0.5 - 0.5 / 3f64.sqrt(), 0.5 + 0.5 / 3f64.sqrt()];
    let mut k = [0.0; 64];
    for &x in &g {
        for &y in &g {
            for &z in &g {
                let p = [x, y, z];
                let mut grad = [[0.0; 3]; 8];
                for (a, c) in corners.iter().enumerate() {
                    let f = |d: usize| if c[d] == 1.0 { p[d] } else { 1.0 - p[d] };
                    let s = |d: usize| if c[d] == 1.0 { 1.0 } else { -1.0 };
                    grad[a] = [s(0) * f(1) * f(2), s(1) * f(0) * f(2), s(2) * f(0) * f(1)];
                }
                for a in 0..8 {
                    for b in 0..8 {
                        let dot: f64 = (0..3).map(|d| grad[a][d] * grad[b][d]).sum();
                        k[a * 8 + b] += dot / 8.0; // Gauss weight (1/2)^3
                    }
                }
            }
        }
    }
    k
}

/// Elements per edge so that `m^3 * 64 >= n`.
pub fn fe_edge(n: u64) -> u64 {
    let elems = n.div_ceil(64).max(1);
    let mut m = (elems as f64).cbrt().floor() as u64;
    while m * m * m < elems {
        m += 1;
    }
    m.max(1)
}

/// Matrix extent (nodes) for `n` FE contributions.
pub fn fe_nodes(n: u64) -> u64 {
    let p = fe_edge(n) + 1;
    p * p * p
}

/// Call `f(row, col, value)` for the first `n` FE contributions.
pub fn fe_contributions(n: u64, mut f: impl FnMut(u64, u64, f64)) {
    let mut left = n;
    fe_elements(n.div_ceil(64), |dofs, vals| {
        for a in 0..8 {
            for b in 0..8 {
                if left > 0 {
                    f(dofs[a], dofs[b], vals[a * 8 + b]);
                    left -= 1;
                }
            }
        }
    });
}

/// The first `n` FE contributions as row, column (i32) and value arrays.
pub fn fe_arrays(n: u64) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
    let (mut rows, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
    fe_contributions(n, |r, c, v| {
        rows.push(r as i32);
        cols.push(c as i32);
        vals.push(v);
    });
    (rows, cols, vals)
}

/// Call `f(dofs, element_matrix)` for `n_elems` elements in element order.
pub fn fe_elements(n_elems: u64, mut f: impl FnMut(&[u64; 8], &[f64; 64])) {
    let m = fe_edge(n_elems * 64);
    let p = m + 1;
    let k = q1_laplace();
    let h = 1.0 / m as f64;
    let mut s = 0x5eed_u64;
    let mut dofs = [0u64; 8];
    let mut vals = [0.0f64; 64];
    let mut done = 0u64;
    for ez in 0..m {
        for ey in 0..m {
            for ex in 0..m {
                if done == n_elems {
                    return;
                }
                let c = [
                    [0, 0, 0],
                    [1, 0, 0],
                    [1, 1, 0],
                    [0, 1, 0],
                    [0, 0, 1],
                    [1, 0, 1],
                    [1, 1, 1],
                    [0, 1, 1],
                ];
                for (d, o) in dofs.iter_mut().zip(c) {
                    *d = (ez + o[2]) * p * p + (ey + o[1]) * p + ex + o[0];
                }
                let coef = h * (1.0 + 0.5 * unit(&mut s));
                for (v, kk) in vals.iter_mut().zip(k) {
                    *v = coef * kk;
                }
                f(&dofs, &vals);
                done += 1;
            }
        }
    }
}

/// FE contributions as a vector of exactly `n` records.
pub fn fe_vec(n: u64) -> Vec<(u64, u64, f64)> {
    let mut v = Vec::with_capacity(n as usize);
    fe_contributions(n, |r, c, x| v.push((r, c, x)));
    v
}

/// Extent of the random matrix: 2^24 x 2^24, so that 5e7 uniform
/// coordinates have about 75 duplicates.
pub const RANDOM_EXTENT: u64 = 1 << 24;

/// Call `f(row, col, value)` for `n` uniform random contributions.
pub fn random_contributions(n: u64, mut f: impl FnMut(u64, u64, f64)) {
    let mut s = 0x1234_5678_u64;
    for _ in 0..n {
        let z = splitmix(&mut s);
        let r = z >> 40;
        let c = (z >> 16) & (RANDOM_EXTENT - 1);
        f(r, c, 2.0 * unit(&mut s) - 1.0);
    }
}
