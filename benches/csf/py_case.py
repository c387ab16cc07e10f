"""In memory, from Python (issue 41): the P1 triple-product tensor of a 2D
triangle mesh (27 contributions per triangle, element order), assembled
by ``ca.assemble(..., layout="csf")`` and ``layout="coo"``, against pydata
``sparse.COO(coords, data, shape)`` (which sums duplicates), scipy's n-D
``coo_array(...).sum_duplicates()`` and, when installed,
``torch.sparse_coo_tensor(...).coalesce()``; every peer given int64
coordinates (what each takes without a conversion; scipy int32 columns
too) and float64 values.
Best of REPS wall times, in one process.

    python benches/csf/py_case.py [N=1e7] [REPS=3]
"""

import sys
import time

import numpy as np

import coo_assembler as ca


def triple_product(n_contrib):
    m = max(1, int(np.ceil(np.sqrt(n_contrib / 54.0))))
    nv = m + 1
    h = 1.0 / m
    y, x = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    x, y = x.ravel(), y.ravel()
    v = lambda dx, dy: (y + dy) * nv + x + dx
    p = lambda dx, dy: np.stack([(x + dx) * h, (y + dy) * h], axis=1)
    c = 1.0 + ((x * 7 + y * 13) % 17) / 34.0
    ids_list, vals_list = [], []
    for tri in [((0, 0), (1, 0), (1, 1)), ((0, 0), (1, 1), (0, 1))]:
        ids = np.stack([v(*d) for d in tri], axis=1)  # (T, 3)
        pa, pb, pc = (p(*d) for d in tri)
        det = (pb[:, 0] - pa[:, 0]) * (pc[:, 1] - pa[:, 1]) - (pc[:, 0] - pa[:, 0]) * (pb[:, 1] - pa[:, 1])
        area = 0.5 * np.abs(det)
        g = np.stack(
            [
                np.stack([(pb[:, 1] - pc[:, 1]) / det, (pc[:, 0] - pb[:, 0]) / det], axis=1),
                np.stack([(pc[:, 1] - pa[:, 1]) / det, (pa[:, 0] - pc[:, 0]) / det], axis=1),
                np.stack([(pa[:, 1] - pb[:, 1]) / det, (pb[:, 0] - pa[:, 0]) / det], axis=1),
            ],
            axis=1,
        )  # (T, 3, 2)
        gjk = np.einsum("tjd,tkd->tjk", g, g)  # (T, 3, 3)
        val = (c * area / 3.0)[:, None, None, None] * np.broadcast_to(gjk[:, None, :, :], (len(x), 3, 3, 3))
        i = np.broadcast_to(ids[:, :, None, None], (len(x), 3, 3, 3))
        j = np.broadcast_to(ids[:, None, :, None], (len(x), 3, 3, 3))
        k = np.broadcast_to(ids[:, None, None, :], (len(x), 3, 3, 3))
        ids_list.append(np.stack([i.reshape(len(x), -1), j.reshape(len(x), -1), k.reshape(len(x), -1)], axis=0))
        vals_list.append(val.reshape(len(x), -1))
    # Element order: square by square, its two triangles.
    coords = np.stack([a for a in ids_list], axis=2).reshape(3, -1)
    vals = np.stack(vals_list, axis=1).reshape(-1)
    shape = (nv * nv,) * 3
    return np.ascontiguousarray(coords.astype(np.int64)), np.ascontiguousarray(vals), shape


def best(f, reps):
    t = []
    out = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = f()
        t.append(time.perf_counter() - t0)
        del out
    return min(t)


def main():
    n = float(sys.argv[1]) if len(sys.argv) > 1 else 1e7
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    coords, vals, shape = triple_product(n)
    cols = tuple(coords[d] for d in range(3))
    print(f"{vals.size} contributions, shape {shape}")
    rows = {}
    rows["ca csf"] = best(lambda: ca.assemble(vals, cols, shape, layout="csf"), reps)
    rows["ca coo"] = best(lambda: ca.assemble(vals, cols, shape, layout="coo"), reps)
    try:
        import sparse

        rows["sparse.COO"] = best(lambda: sparse.COO(coords, vals, shape=shape), reps)
    except ImportError:
        print("pydata sparse not installed")
    import scipy
    import scipy.sparse as sp

    def scipy_nd(c):
        a = sp.coo_array((vals, c), shape=shape)
        a.sum_duplicates()
        return a

    # scipy in both index forms (contiguous int32 columns are its own
    # choice for these extents): the faster is its figure.
    cols32 = tuple(np.ascontiguousarray(c, dtype=np.int32) for c in cols)
    try:
        for name, c in [("int64", cols), ("int32", cols32)]:
            rows[f"scipy {scipy.__version__} coo_array n-D {name}"] = best(lambda: scipy_nd(c), reps)
    except Exception as e:  # scipy before 1.15 has no n-D COO
        print(f"scipy n-D coo_array: {e}")
    try:
        import torch

        tc = torch.from_numpy(coords)
        tv = torch.from_numpy(vals)
        rows["torch coalesce"] = best(lambda: torch.sparse_coo_tensor(tc, tv, shape).coalesce(), reps)
    except ImportError:
        print("torch not installed")
    coo = rows["ca coo"]
    for name, t in rows.items():
        print(f"{name:>32}: {t:.3f} s  ({t / coo:.2f}x ca coo)")


if __name__ == "__main__":
    main()
