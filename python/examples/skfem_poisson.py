"""Assemble a scikit-fem stiffness matrix through coo_assembler and compare.

A 3D Poisson problem (Laplacian) on a cube meshed with trilinear hexahedra
(ElementHex1), or linear elasticity with ``--elasticity``. scikit-fem
computes the element matrices (``form.elemental(basis)``); our step turns
them into a scipy CSR array, either in one call,
``coo_assembler.assemble(coo.data, coo.indices, coo.shape)`` on the flat
arrays scikit-fem holds (the default, ``--step assemble``: the in-memory
path when the work fits the budget), or by pushing the element matrices
with ``Builder.push_elements`` into a file read back with ``to_scipy``
(``--step builder``, the out-of-core path). The matrix is compared entry by
entry with ``skfem.asm(form, basis)`` and the time and peak memory of both
are printed.

    python skfem_poisson.py --contributions 5e7            # the benchmark
    python skfem_poisson.py --elasticity --contributions 5e7
    python skfem_poisson.py --step builder --contributions 5e7
    python skfem_poisson.py --n 6                          # a quick check

What is timed:
- "element matrices": ``form.elemental(basis)``, scikit-fem's own kernel,
  shared by both paths (``asm`` runs it inside).
- "assembly step": what turns those element matrices into the sparse
  matrix: scikit-fem's ``COOData.tocsr()`` (coo_matrix, eliminate_zeros,
  tocsr) against our ``assemble`` call (``--step assemble``) or
  ``push_elements`` + ``finish`` + ``to_scipy("csr")`` (``--step builder``).
- "asm total": ``skfem.asm(form, basis)`` as a user calls it, against
  element matrices + our assembly step.

Peak memory: the growth of the process's peak RSS during a step above its
RSS when the step starts (the caller's arrays, element matrices included,
are already there), measured by resetting the kernel's high-water mark
(``/proc/self/clear_refs``). With ``--step builder`` our step is reported
both up to ``finish`` (the assembler under its budget) and with the scipy
result loaded; with ``--step assemble`` the peak includes the result.

Note on zeros: scikit-fem drops zero contributions before summing
(``eliminate_zeros`` on the COO data), so a coordinate whose contributions
are all exactly zero is absent from its matrix; we keep it as an explicit
zero (``drop_zeros=False``, scipy's ``tocsr`` convention). The comparison
allows exactly that difference.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from skfem import Basis, BilinearForm, ElementHex1, ElementVector, MeshHex, asm
from skfem.helpers import dot, grad
from skfem.models.elasticity import lame_parameters, linear_elasticity

import coo_assembler as ca


def rss_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS now, VmHWM the peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class Peak:
    """Time and peak RSS growth of a block."""

    def __enter__(self) -> "Peak":
        gc.collect()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset VmHWM to the current RSS
            self.resettable = True
        except OSError:
            self.resettable = False
        self.base = rss_kib("VmRSS")
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.mib = (rss_kib("VmHWM") - self.base) / 1024


def problem(n: int, elasticity: bool, intorder: int):
    mesh = MeshHex.init_tensor(*(np.linspace(0.0, 1.0, n + 1),) * 3)
    if elasticity:
        basis = Basis(mesh, ElementVector(ElementHex1()), intorder=intorder)
        form = linear_elasticity(*lame_parameters(200.0, 0.3))
    else:
        basis = Basis(mesh, ElementHex1(), intorder=intorder)

        @BilinearForm
        def laplace(u, v, _):
            return dot(grad(u), grad(v))

        form = laplace
    return basis, form


def ours(coo, basis, budget: str, threads, tmp: str, exact: bool = True,
         layout: str = "csr"):
    """Assembly step through coo_assembler: returns (csr, times, peaks)."""
    # scikit-fem's element matrices: local[e, j, i] holds the (test i,
    # trial j) integral, which goes to row dofs[i], column dofs[j]. Our
    # ke[e, a, b] goes to (dofs[a], dofs[b]): swap the last two axes.
    # Both are views (no copy); push_elements reads them in place.
    ke = coo.tolocal().swapaxes(1, 2)
    dofs = basis.element_dofs.T
    path = os.path.join(tmp, "K.hrry")
    with Peak() as build:
        with ca.Builder((basis.N, basis.N), memory_budget=budget, threads=threads,
                        temp_dir=tmp, exact_sums=exact, layout=layout) as b:
            b.push_elements(dofs, ke)
            summary = b.finish(path)
    with Peak() as load:
        K = ca.open(path).to_scipy("csr")  # the file's own layout when it is CSR
    return K, summary, build, load


def ours_in_memory(coo, budget: str, threads, exact: bool = True):
    """Assembly step in one call on scikit-fem's flat arrays: (csr, peak).

    ``coo.indices`` is scikit-fem's (2, nnz) int32 array and ``coo.data``
    its float64 values, both contiguous: ``assemble`` reads them in place.
    """
    with Peak() as step:
        K = ca.assemble(coo.data, coo.indices, coo.shape, memory_budget=budget,
                        threads=threads, exact_sums=exact)
    return K, step


def compare(K: sp.csr_array, S) -> str:
    """Entry-by-entry check of ours (K) against scikit-fem's (S)."""
    S = sp.csr_array(S)
    S.sort_indices()
    scale = np.abs(S.data).max() if S.nnz else 1.0
    diff = abs(K - S)
    max_diff = diff.max() if diff.nnz else 0.0
    # Pattern: ours holds everything scikit-fem holds, plus explicit zeros.
    ones_k = sp.csr_array((np.ones(K.nnz), K.indices, K.indptr), shape=K.shape)
    ones_s = sp.csr_array((np.ones(S.nnz), S.indices, S.indptr), shape=S.shape)
    only = ones_k - ones_s
    only.eliminate_zeros()
    extra = only.data > 0
    missing = int((only.data < 0).sum())
    r, c = only.nonzero()
    extra_vals = K[r[extra], c[extra]] if extra.any() else np.zeros(0)
    ok = max_diff <= 1e-12 * scale and missing == 0 and not np.any(extra_vals != 0)
    if not ok:
        raise SystemExit(
            f"MISMATCH: max |ours - skfem| = {max_diff:.3e} (scale {scale:.3e}), "
            f"{missing} entries missing, nonzero extras: {np.count_nonzero(extra_vals)}"
        )
    return (f"equal to rounding: max |ours - skfem| = {max_diff:.2e} "
            f"({max_diff / scale:.1e} of max |K|); {int(extra.sum())} explicit zeros "
            f"kept that skfem drops")


def report(p_asm: Peak, p_el: Peak, p_sk: Peak, ours_step: float) -> None:
    total = p_el.seconds + ours_step
    print(f"asm total: skfem {p_asm.seconds:.2f} s, element matrices + coo_assembler "
          f"{total:.2f} s ({p_asm.seconds / total:.2f}x)")
    print(f"assembly step: skfem {p_sk.seconds:.2f} s, coo_assembler {ours_step:.2f} s "
          f"({p_sk.seconds / ours_step:.2f}x)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--n", type=int, help="elements per cube edge")
    size.add_argument("--contributions", type=float, default=1e6,
                      help="pick n so that n^3 * k^2 is about this (default 1e6)")
    ap.add_argument("--elasticity", action="store_true", help="3 dofs per node")
    ap.add_argument("--budget", default="256MiB", help="memory budget (default 256MiB)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--layout", default="csr", choices=["csr", "coo"],
                    help="layout of the file we write (default csr: what scipy gets, "
                         "so to_scipy only converts the u64 column indices; coo writes "
                         "and reads back the row indices too)")
    ap.add_argument("--step", default="assemble", choices=["assemble", "builder"],
                    help="our assembly step: one ca.assemble call on the flat arrays "
                         "(default) or Builder.push_elements + finish + to_scipy")
    ap.add_argument("--fast-sums", action="store_true",
                    help="exact_sums=False: plain f64 sums in arrival order")
    ap.add_argument("--intorder", type=int, default=3,
                    help="quadrature order (default 3: 2x2x2 Gauss points, exact for these "
                         "stiffness matrices on the box mesh; scikit-fem's own default for "
                         "ElementHex1 uses 4x4x4 points, 8x the memory and kernel time)")
    args = ap.parse_args(argv)

    k = 24 if args.elasticity else 8
    n = args.n or max(1, round((args.contributions / k**2) ** (1 / 3)))
    print(f"problem: {'elasticity' if args.elasticity else 'Poisson'} on {n}^3 "
          f"ElementHex1 hexahedra, {n**3 * k * k:.3g} contributions")

    t = time.perf_counter()
    basis, form = problem(n, args.elasticity, args.intorder)
    print(f"basis: {basis.N} dofs, {basis.nelems} elements "
          f"({time.perf_counter() - t:.1f} s, not timed below)")

    with Peak() as p_asm:
        S = asm(form, basis)
    print(f"skfem asm:              {p_asm.seconds:7.2f} s   peak +{p_asm.mib:7.0f} MiB")
    with Peak() as p_el:
        coo = form.elemental(basis)
    print(f"  element matrices:     {p_el.seconds:7.2f} s   peak +{p_el.mib:7.0f} MiB"
          f"   ({coo.data.nbytes / 2**20:.0f} MiB of values)")
    with Peak() as p_sk:
        S2 = coo.tocsr()
    print(f"  skfem assembly step:  {p_sk.seconds:7.2f} s   peak +{p_sk.mib:7.0f} MiB")
    del S2

    if args.step == "assemble":
        K, step = ours_in_memory(coo, args.budget, args.threads, exact=not args.fast_sums)
        ours_step = step.seconds
        result = (K.data.nbytes + K.indices.nbytes + K.indptr.nbytes) / 2**20
        print(f"coo_assembler step:     {ours_step:7.2f} s   peak +{step.mib:7.0f} MiB"
              f"   (ca.assemble; the result: {result:.0f} MiB, working "
              f"{step.mib - result:.0f} MiB; budget {ca.parse_size(args.budget) / 2**20:.0f} MiB)")
        report(p_asm, p_el, p_sk, ours_step)
        print(compare(K, S))
        del K
    else:
        with tempfile.TemporaryDirectory(prefix="skfem-bench-") as tmp:
            K, summary, build, load = ours(coo, basis, args.budget, args.threads, tmp,
                                           exact=not args.fast_sums, layout=args.layout)
            ours_step = build.seconds + load.seconds
            print(f"coo_assembler step:     {ours_step:7.2f} s")
            print(f"  push_elements+finish: {build.seconds:7.2f} s   peak +{build.mib:7.0f} MiB"
                  f"   (budget {ca.parse_size(args.budget) / 2**20:.0f} MiB; "
                  f"buffers peaked at {summary.peak_buffer_bytes / 2**20:.0f} MiB; "
                  f"{summary.runs_spilled} runs spilled, {summary.merge_passes} merge passes)")
            print(f"  to_scipy('csr'):      {load.seconds:7.2f} s   peak +{load.mib:7.0f} MiB"
                  f"   (the result: {(K.data.nbytes + K.indices.nbytes + K.indptr.nbytes) / 2**20:.0f} MiB)")
            report(p_asm, p_el, p_sk, ours_step)
            print(compare(K, S))
            del K
    if not p_asm.resettable:
        print("note: /proc/self/clear_refs not writable; peaks are whole-process", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
