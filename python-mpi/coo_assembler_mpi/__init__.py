"""Distributed assembly across MPI ranks for coo_assembler (mpi4py).

``ca.DistBuilder`` and ``ca.DistPlan`` (also importable from here): every
rank of an mpi4py communicator pushes any coordinate; rows are owned by
contiguous bands (chosen from a sample of the pushed rows, or given as
``row_starts`` / ``local_rows``, PETSc's ownership); the result is a
partition composite file, one file per rank, or each rank's band in
memory as CSR arrays (``finish_csr``): what petsc4py's
``createAIJ(size, csr=(row_ptr, cols, values))`` takes. Float duplicates
are summed exactly, so the result does not depend on the rank count.

A plan (``finish_planned``, or ``DistPlan`` from arrays) refills the bands
from new values with one all-to-all, bit for bit a fresh assembly.

Every call named *collective* must be made by every rank. A rank whose
code fails gives its builder up (leaving a ``with`` block by an
exception, ``abandon``, or the builder's deletion): every other rank's
``finish*`` then raises, naming that rank, and nothing is published;
nobody waits forever.

Built against the system's MPI (the one mpi4py uses):
``pip install ./python-mpi`` (README).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from . import _dist

__all__ = ["DistBuilder", "DistPlan", "LocalCsr"]

_OPTION_NAMES = (
    "memory_budget",
    "temp_dir",
    "threads",
    "duplicates",
    "non_finite",
    "layout",
    "drop_zeros",
    "exact_sums",
    "skip_negative",
    "name",
)


class LocalCsr(NamedTuple):
    """One rank's row band: ``row_ptr`` (local, from 0), ``cols`` (global
    columns), ``values``, and ``rows``, the ``(lo, hi)`` global rows it
    holds."""

    row_ptr: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    rows: tuple


def _fortran_handle(comm):
    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    try:
        return int(comm.py2f())
    except AttributeError:
        raise TypeError(
            f"comm must be an mpi4py communicator (or None for COMM_WORLD), got {type(comm).__name__}"
        ) from None


def _index_bits(index_dtype):
    bits = np.dtype(index_dtype).itemsize * 8
    if np.dtype(index_dtype).kind not in "iu" or bits not in (32, 64):
        raise TypeError(f"index_dtype must be a 32- or 64-bit integer type, got {index_dtype!r}")
    return bits


def _options(kw):
    unknown = set(kw) - set(_OPTION_NAMES)
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; the options are {list(_OPTION_NAMES)}")
    return {k: v for k, v in kw.items() if v is not None}


def _stacked(indices, rank):
    """(n, rank) C-contiguous integers from an (n, rank) array or a sequence
    of ``rank`` 1-D arrays (``(rows, cols)``, as scipy takes them); their
    integer type is kept."""
    if isinstance(indices, (tuple, list)):
        indices = np.stack([np.asarray(i) for i in indices], axis=1)
    a = np.ascontiguousarray(indices)
    if a.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, got {a.dtype}")
    if a.ndim == 1 and rank == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2 or a.shape[1] != rank:
        raise ValueError(f"indices of shape {a.shape} for a rank-{rank} tensor: need (n, {rank})")
    return a


def _int64(a):
    """``a`` as int64, refusing what int64 cannot hold (no silent wrap)."""
    if a.dtype == np.uint64 and a.size and int(a.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"an index {int(a.max())} does not fit int64")
    return a.astype(np.int64, copy=False)


class DistBuilder:
    """Collective: a distributed builder on ``comm`` (mpi4py; ``None`` is
    COMM_WORLD), every rank with the same ``shape``, ``dtype`` and options.

    Ownership: ``row_starts`` (every rank's first row, the same list on
    every rank) or ``local_rows`` (this rank's row count, bands in rank
    order); neither: chosen from a sample of the pushed rows. Options as
    ``ca.Builder``'s (``memory_budget`` is per rank); duplicate policy
    ``last`` is refused (no order across ranks).

    Use it in a ``with`` block: an exception inside gives the builder up on
    this rank, and the other ranks' ``finish*`` raise instead of waiting.
    """

    def __init__(self, comm, shape, dtype="float64", *, row_starts=None, local_rows=None, **options):
        self._shape = tuple(int(s) for s in shape)
        self._native = _dist.NativeDistBuilder(
            _fortran_handle(comm),
            list(self._shape),
            str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype,
            _options(options),
            None if row_starts is None else [int(s) for s in row_starts],
            None if local_rows is None else int(local_rows),
        )

    @property
    def rank(self):
        """This rank."""
        return self._native.rank

    def push(self, index, value):
        """Push one contribution at ``index`` (any coordinate of the shape)."""
        self.push_arrays(np.asarray(index).reshape(1, -1), np.asarray([value]))

    def push_arrays(self, indices, values):
        """Push contributions: ``indices`` (n, rank) or ``(rows, cols)``,
        ``values`` (n,)."""
        self._native.push_arrays(_stacked(indices, len(self._shape)), np.asarray(values).reshape(-1))

    def push_elements(self, dofs, values):
        """Push element matrices: ``dofs`` (E, p), ``values`` (E, p, p);
        element ``e`` adds ``values[e, a, b]`` at ``(dofs[e, a], dofs[e, b])``."""
        self._native.push_elements(np.asarray(dofs), np.asarray(values))

    def finish(self, path):
        """Collective: the partition composite at ``path`` (a shared
        filesystem path, the same on every rank); a summary of this rank."""
        return SimpleNamespace(**self._native.finish(str(path)))

    def finish_per_rank(self, path):
        """Collective: this rank's band as a plain file at ``path`` (a path
        of its own); published only if every rank succeeded."""
        return SimpleNamespace(**self._native.finish_per_rank(str(path)))

    def finish_csr(self, index_dtype=np.int32):
        """Collective: this rank's band in memory, a :class:`LocalCsr` with
        ``index_dtype`` indices (PETSc's ``PetscInt``: int32 by default)."""
        return LocalCsr(*self._native.finish_csr(_index_bits(index_dtype)))

    def finish_planned(self, index_dtype=np.int32):
        """Collective: the band as :meth:`finish_csr` gives it, and the
        :class:`DistPlan` of what was pushed: ``plan.refill(values)`` with
        new values pushed in the same order on every rank."""
        band, plan = self._native.finish_planned(_index_bits(index_dtype))
        return LocalCsr(*band), DistPlan._wrap(plan)

    def abandon(self, why="abandoned"):
        """Give the builder up on this rank (not collective by itself: the
        others' ``finish*`` raise, naming this rank and ``why``)."""
        self._native.abandon(str(why))

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is not None:
            self._native.abandon(f"{kind.__name__}: {exc}")
        else:
            self._native.abandon("left its with block without finishing")
        return False


class DistPlan:
    """Collective: plan this rank's contributions at ``indices`` ((n, rank)
    or ``(rows, cols)``, global coordinates) across the ranks of ``comm``.
    Ownership and options as :class:`DistBuilder`'s; ``layout`` CSR by
    default. ``refill(values)`` (collective) returns this rank's band values
    for new values, one per contribution in the planned order, with one
    all-to-all."""

    def __init__(self, comm, indices, shape, dtype="float64", *, row_starts=None, local_rows=None, **options):
        options.setdefault("layout", "csr")
        self._native = _dist.NativeDistPlan.from_arrays(
            _fortran_handle(comm),
            _int64(_stacked(indices, len(shape))),
            [int(s) for s in shape],
            str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype,
            _options(options),
            None if row_starts is None else [int(s) for s in row_starts],
            None if local_rows is None else int(local_rows),
        )

    @classmethod
    def _wrap(cls, native):
        p = cls.__new__(cls)
        p._native = native
        return p

    def refill(self, values):
        """Collective: this rank's band values for ``values``: of the plan's
        element type (exact, an int64 too), or any type NumPy casts to it
        safely; other values go as float64 and reach the element type by
        the library's rules (a float into an integer plan must be integral)."""
        try:
            v = np.asarray(values).reshape(-1)
            own = np.dtype(self._native.dtype)
            if v.dtype != own and v.dtype.kind in "iu" and own.kind in "iu":
                # Integers into an integer plan: exactly, or refused.
                info = np.iinfo(own)
                if v.size and (int(v.min()) < info.min or int(v.max()) > info.max):
                    raise ValueError(f"refill values from {int(v.min())} to {int(v.max())} do not fit {own}")
                v = v.astype(own)
            elif v.dtype != own:
                v = v.astype(own if np.can_cast(v.dtype, own, "safe") else np.float64)
            v = np.ascontiguousarray(v)
        except Exception as e:
            # The other ranks are in the refill: fail it on every rank.
            raise self._native.refuse(f"{type(e).__name__}: {e}") from e
        return self._native.refill(v)

    def structure(self, index_dtype=np.int32):
        """This rank's band structure: ``(row_ptr, cols)``."""
        return self._native.structure(_index_bits(index_dtype))

    @property
    def rows(self):
        """``(lo, hi)``: the rows this rank owns."""
        return self._native.rows

    @property
    def contributions(self):
        """Values a refill takes on this rank."""
        return self._native.contributions

    @property
    def nnz(self):
        """Entries of this rank's band."""
        return self._native.nnz

    @property
    def memory_bytes(self):
        """Bytes this rank's part of the plan holds."""
        return self._native.memory_bytes
