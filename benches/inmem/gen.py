#!/usr/bin/env python3
"""The inputs of the in-memory harness, as contiguous .npy arrays (int32
rows and columns, float64 values) plus a `.shape` file, in DIR:

  python gen.py DIR fe      # DIR/fe.bin (24-byte records from benches/e2e.rs) -> fe_*.npy
  python gen.py DIR rand    # 5e7 uniform coordinates in 2^24 x 2^24
  python gen.py DIR el      # 1e7 3D Q1 elasticity contributions (576 per element)

Existing outputs are kept.
"""
import os
import sys

import numpy as np


def save(d, name, r, c, v, shape):
    np.save(os.path.join(d, f"{name}_r32.npy"), np.ascontiguousarray(r, dtype=np.int32))
    np.save(os.path.join(d, f"{name}_c32.npy"), np.ascontiguousarray(c, dtype=np.int32))
    np.save(os.path.join(d, f"{name}_v.npy"), np.ascontiguousarray(v, dtype=np.float64))
    with open(os.path.join(d, f"{name}.shape"), "w") as f:
        f.write(",".join(str(x) for x in shape))


def fe(d):
    rec = np.fromfile(os.path.join(d, "fe.bin"), dtype=[("r", "<u8"), ("c", "<u8"), ("v", "<f8")])
    with open(os.path.join(d, "fe.shape")) as f:
        shape = tuple(int(x) for x in f.read().strip().split(","))
    save(d, "fe", rec["r"], rec["c"], rec["v"], shape)


def rand(d, n=50_000_000, extent=1 << 24):
    g = np.random.default_rng(23)
    r = g.integers(0, extent, n, dtype=np.int32)
    c = g.integers(0, extent, n, dtype=np.int32)
    v = g.uniform(-1.0, 1.0, n)
    save(d, "rand", r, c, v, (extent, extent))


def q1_elasticity(E=1.0, nu=0.3):
    """The 24x24 stiffness of the unit cube, trilinear, 2x2x2 Gauss."""
    lam = E * nu / ((1 + nu) * (1 - 2 * nu))
    mu = E / (2 * (1 + nu))
    D = np.zeros((6, 6))
    D[:3, :3] = lam
    D[np.arange(3), np.arange(3)] += 2 * mu
    D[np.arange(3, 6), np.arange(3, 6)] = mu
    corners = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                        [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], float)
    g = [0.5 - 0.5 / np.sqrt(3), 0.5 + 0.5 / np.sqrt(3)]
    K = np.zeros((24, 24))
    for x in g:
        for y in g:
            for z in g:
                p = np.array([x, y, z])
                f = np.where(corners == 1, p, 1 - p)  # 8 x 3
                s = np.where(corners == 1, 1.0, -1.0)
                grad = np.stack([s[:, 0] * f[:, 1] * f[:, 2],
                                 s[:, 1] * f[:, 0] * f[:, 2],
                                 s[:, 2] * f[:, 0] * f[:, 1]], axis=1)
                B = np.zeros((6, 24))
                for a in range(8):
                    gx, gy, gz = grad[a]
                    B[0, 3 * a] = gx
                    B[1, 3 * a + 1] = gy
                    B[2, 3 * a + 2] = gz
                    B[3, 3 * a], B[3, 3 * a + 1] = gy, gx
                    B[4, 3 * a + 1], B[4, 3 * a + 2] = gz, gy
                    B[5, 3 * a], B[5, 3 * a + 2] = gz, gx
                K += B.T @ D @ B / 8.0
    return K


def el(d, n=10_000_000):
    ne = -(-n // 576)
    m = int(round(ne ** (1 / 3)))
    while m ** 3 < ne:
        m += 1
    p = m + 1
    ez, ey, ex = np.meshgrid(np.arange(m), np.arange(m), np.arange(m), indexing="ij")
    base = (ez * p * p + ey * p + ex).ravel()[:ne]
    off = np.array([0, 1, p + 1, p, p * p, p * p + 1, p * p + p + 1, p * p + p])
    nodes = base[:, None] + off[None, :]                      # ne x 8
    dofs = (3 * nodes[:, :, None] + np.arange(3)).reshape(ne, 24)
    K = q1_elasticity()
    coef = 1.0 + 0.5 * np.random.default_rng(5).random(ne)
    r = np.repeat(dofs, 24, axis=1).ravel()[:n]
    c = np.tile(dofs, (1, 24)).ravel()[:n]
    v = (coef[:, None] * K.ravel()[None, :] / m).ravel()[:n]
    save(d, "el", r, c, v, (3 * p ** 3, 3 * p ** 3))


def main():
    d, what = sys.argv[1], sys.argv[2]
    if os.path.exists(os.path.join(d, f"{what}_v.npy")):
        return
    {"fe": fe, "rand": rand, "el": el}[what](d)


if __name__ == "__main__":
    main()
