"""Assembly from pushes: :class:`Builder` (and its :class:`Summary`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import _native
from ._errors import CooAssemblerError, InputError
from ._common import PathLike, Size, _LIBRARY_NAME, _NUMPY_NAME, _dtype_name, _extent, _index_array, _native_order, _options, _path, _values


@dataclass(frozen=True)
class Summary:
    """What :meth:`Builder.finish` did (the Rust ``Summary``'s fields).

    Times are in seconds. ``time_sort`` is summed over sorter threads and
    overlaps ingestion.
    """

    path: str
    contributions: int
    nnz: int
    dropped_zeros: int
    #: Contributions skipped for a negative index (``skip_negative``);
    #: they are counted in ``contributions`` too.
    skipped_negative: int
    runs: int
    runs_spilled: int
    merge_passes: int
    bytes_spilled: int
    peak_buffer_bytes: int
    memory_budget: int
    file_bytes: int
    time_ingest: float
    time_sort: float
    time_merge: float
    time_write: float
    stale_removed: List[str]
    #: Key ranges the final merge was cut into and merged on several
    #: threads at once (0: one thread).
    merge_ranges: int = 0
    #: How the memory budget was divided: ``(part, bytes)`` pairs, in the
    #: order they were taken.
    budget_parts: List[Tuple[str, int]] = field(default_factory=list)


def _summary(d: dict) -> Summary:
    d["path"] = os.fspath(d["path"])
    d["stale_removed"] = [os.fspath(p) for p in d["stale_removed"]]
    d["budget_parts"] = [tuple(p) for p in d.get("budget_parts", [])]
    return Summary(**d)


class Builder:
    """Assemble one sparse tensor from contributions pushed in any order.

    Parameters
    ----------
    shape
        Extent of each dimension (rank 1 to 64).
    dtype
        Element type of the tensor: one of :data:`DTYPES` (a NumPy dtype or
        its name). Pushed values convert to it: floats go into float
        tensors (summed exactly, rounded once at the end), integers into
        integer tensors when they fit, and into float tensors when they are
        exact (``|v| <= 2**53``).
    memory_budget
        Bytes all of the assembler's buffers may use, as an int or a string
        such as ``"256MiB"``. A budget too small to work raises
        :class:`BudgetError` with the minimum.
    temp_dir
        Where spill files go (a private subdirectory; default: the system
        temporary directory).
    threads
        Cores the assembly may use (default: the number of cores). ``1``
        sorts, merges and writes on the pushing thread. It does not limit
        the pushing threads: any number may push at once, sharing the
        budget.
    duplicates
        ``"sum"`` (exact), ``"min"``, ``"max"``, ``"last"`` or ``"error"``.
    drop_zeros
        Drop entries whose combined value is zero (default: keep them, as
        ``scipy``'s ``tocsr`` does).
    exact_sums
        ``False`` adds floats in arrival order instead: faster, but the last
        bits then depend on threads and budget.
    non_finite
        ``"keep"`` (default), ``"reject-nan"`` or ``"reject-non-finite"``
        (names are case-insensitive and ``_`` may stand for ``-``).
    layout
        The file's layout: ``"coo"`` (default, sorted row-major), ``"csr"``
        or ``"csc"`` (matrices only), ``"csf"`` (compressed fibres, rank 3
        and up).
    mode_order
        With ``layout="csf"``: the dimension stored at each level of the
        tree, outermost first (a permutation of ``range(rank)``; default the
        identity).
    skip_negative
        Skip contributions with a negative index in a signed index array
        (PETSc's convention; sfepy marks removed Dirichlet dofs with -1),
        counted in :attr:`Summary.skipped_negative`; with
        :meth:`push_elements`, the entries of a negative row or column.
        Default ``False``: a negative index is an :class:`InputError`.
    record_plan
        Record where every contribution lands, so that the next steps
        refill by pushing values alone: after :meth:`finish`,
        :attr:`plan` (or ``finish(path, plan_file=...)`` for a plan too
        large for memory). Push calls then run one at a time, in the order
        they start, which is the plan's order. Refused with
        ``drop_zeros``.

    Use it as a context manager: leaving the ``with`` block by an exception
    abandons the assembly -- nothing is published at the target path and
    every temporary file is removed -- and the exception propagates.
    Leaving it normally without :meth:`finish` abandons it too and raises
    :class:`CooAssemblerError`, so that data is never dropped silently.

    >>> import numpy as np, coo_assembler as ca
    >>> with ca.Builder((3, 3)) as b:                     # doctest: +SKIP
    ...     b.push(np.array([1.0, 2.0, 0.5]), (np.array([0, 2, 0]), np.array([1, 2, 1])))
    ...     summary = b.finish("K.hrry")
    >>> summary.nnz                                        # doctest: +SKIP
    2

    Thread safety: ``push``, ``push_elements`` may be called from several
    threads at once, any number of them; each call uses an internal pusher
    of its own for its duration, with the GIL released. ``finish`` waits for pushes in
    flight. If a push raises, contributions before the failing one may
    already be in (bad indices are checked before anything is pushed; a
    value refused by the tensor's type is found while pushing): leave the
    ``with`` block by the exception to discard the assembly.
    """

    def __init__(
        self,
        shape: Sequence[int],
        dtype: Any = "float64",
        memory_budget: Size = "256MiB",
        temp_dir: Optional[PathLike] = None,
        threads: Optional[int] = None,
        duplicates: str = "sum",
        drop_zeros: bool = False,
        exact_sums: bool = True,
        non_finite: str = "keep",
        layout: str = "coo",
        skip_negative: bool = False,
        record_plan: bool = False,
        mode_order: Optional[Sequence[int]] = None,
    ) -> None:
        shape_t = tuple(_extent(s) for s in shape)
        self._shape = shape_t
        self._plan: Any = None
        self._dtype = _dtype_name(dtype)
        self._native = _native.Builder(
            list(shape_t),
            _LIBRARY_NAME[self._dtype],
            _options(
                memory_budget=memory_budget,
                temp_dir=temp_dir,
                threads=threads,
                duplicates=duplicates,
                drop_zeros=drop_zeros,
                exact_sums=exact_sums,
                non_finite=non_finite,
                layout=layout,
                skip_negative=skip_negative,
                mode_order=None if mode_order is None else [int(d) for d in mode_order],
            ),
        )
        if record_plan:
            self._native.record_plan()

    @property
    def shape(self) -> Tuple[int, ...]:
        """The tensor's shape."""
        return self._shape

    @property
    def dtype(self) -> str:
        """The element type, NumPy spelling (``"float64"``, ``"bfloat16"``...)."""
        return self._dtype

    @property
    def is_open(self) -> bool:
        """False once finished or closed."""
        return self._native.is_open

    def push(self, data: Any, coords: Any) -> None:
        """Push contributions ``data[i]`` at coordinates given by ``coords``.

        ``coords`` is either a tuple ``(row, col)`` -- one 1-D index array
        per dimension, as ``scipy.sparse.coo_array((data, (row, col)))``
        takes -- or one 2-D array of shape ``(rank, n)`` or ``(n, rank)``
        (when ``n == rank`` it is read as ``(rank, n)``). Index arrays may
        have any integer dtype; values any float or integer dtype. Arrays
        already contiguous and of the internal types (uint64 or
        non-negative int64 indices, values of any supported dtype) are read
        in place; others are converted a chunk at a time, so no
        input-sized copy is ever made.
        """
        values = _values(data)
        rank = len(self._shape)
        if isinstance(coords, (tuple, list)):
            cols = [_native_order(_index_array(c)) for c in coords]
            for d, c in enumerate(cols):
                if c.ndim != 1:
                    raise InputError(f"index array {d} must be 1-D, got shape {c.shape}")
            self._native.push_columns(cols, values)
            return
        idx = _native_order(_index_array(coords))
        n = values.shape[0]
        if idx.ndim == 1 and rank == 1:
            self._native.push_columns([idx], values)
        elif idx.ndim == 2 and idx.shape == (rank, n):
            self._native.push_columns([idx[d] for d in range(rank)], values)
        elif idx.ndim == 2 and idx.shape == (n, rank):
            if idx.flags.c_contiguous:
                self._native.push_rows(idx, values)
            else:
                self._native.push_columns([idx[:, d] for d in range(rank)], values)
        else:
            raise InputError(
                f"coords of shape {idx.shape} match neither ({rank}, {n}) nor ({n}, {rank}) "
                f"for {n} values and a rank-{rank} tensor"
            )

    def push_elements(self, dofs: Any, ke: Any) -> None:
        """Push a batch of dense element matrices (rank-2 tensors only).

        ``dofs`` has shape ``(n_elements, k)`` and ``ke`` shape
        ``(n_elements, k, k)``; ``ke[e, a, b]`` goes to
        ``(dofs[e, a], dofs[e, b])``. Any integer dtype for ``dofs``, any
        numeric dtype for ``ke``, any strides: transposed views such as
        scikit-fem's ``basis.element_dofs.T`` and
        ``form.elemental(basis).tolocal().swapaxes(1, 2)`` are read in
        place (see ``docs/python.md``).
        """
        d = _native_order(np.asarray(dofs))
        k = _native_order(np.asarray(ke))
        if d.ndim != 2:
            raise InputError(f"dofs must have shape (n_elements, k), got {d.shape}")
        if k.ndim != 3:
            raise InputError(f"ke must have shape (n_elements, k, k), got {k.shape}")
        if k.dtype.kind not in "fiucb":
            raise InputError(
                f"ke must be float16/32/64, complex64/128, bool or integers, got {k.dtype}"
            )
        self._native.push_elements(d, k)

    def push_file(self, path: PathLike, format: Optional[str] = None) -> int:
        """Push every contribution of the input file ``path``: ``format``
        ``"bin"``, ``"text"``, ``"mtx"`` or ``"npy"``, or None to recognise
        it (npy, MatrixMarket and text by their first bytes, bin otherwise; gzip
        and zstd are decompressed). The file's shape, when its header gives
        one, must be the builder's. Exactly what ``coo-assembler assemble``
        pushes, with its 1-based, line-numbered errors; a duplicate found
        when merging names the lines it came from. Returns the number of
        contributions. Waits for pushes in flight."""
        return self._native.push_file(_path(path), format)

    @classmethod
    def _from_file(
        cls, path: PathLike, format: Optional[str], shape: Any, dtype: Any, options: dict
    ) -> "Builder":
        b = cls.__new__(cls)
        native = _native.Builder.from_file(
            _path(path),
            format,
            None if shape is None else [int(_extent(s)) for s in shape],
            None if dtype is None else _LIBRARY_NAME[_dtype_name(dtype)],
            options,
        )
        b._native = native
        b._shape = tuple(native.shape)
        b._dtype = _NUMPY_NAME[native.dtype]
        return b

    def finish(self, path: PathLike, plan_file: Optional[PathLike] = None) -> Summary:
        """Merge everything and write the tensor to ``path`` atomically
        (temporary file, fsync, rename). An output that could not be
        published (a missing or read-only folder, a directory, a file
        pushed into this builder) is refused before the merge: the builder
        keeps every contribution, fix the path and finish again. Once the
        merge starts the builder is spent whatever the outcome, and its
        spill files are removed. Ctrl-C stops the merge at its next step:
        nothing is published, and ``KeyboardInterrupt`` is raised.

        A builder made with ``record_plan=True`` then makes the plan of
        what was pushed: in memory (:attr:`plan`), or with ``plan_file``
        written out of core to that plan file (for :func:`refill_file`)."""
        pf = None if plan_file is None else _path(plan_file)
        s = _summary(self._native.finish(_path(path), pf))
        native = self._native.take_plan()
        if native is not None:
            from ._plan import Plan

            big = max(self._shape) >= 2**31 or native.nnz >= 2**31
            self._plan = Plan(native, self._shape, np.int64 if big else np.int32)
        return s

    @property
    def plan(self) -> Any:
        """The plan this builder recorded (``record_plan=True``), made by
        :meth:`finish`: it takes one value per contribution, in the order
        of the push calls (each call's values in their order; with
        ``record_plan`` push calls run one at a time, in the order they
        start), skipped ones (``skip_negative``) included. Refill it with
        :meth:`Plan.assemble` or by pushing values (:meth:`Plan.refill`)."""
        if self._plan is None:
            raise CooAssemblerError(
                "no recorded plan: make the builder with record_plan=True and call "
                "finish (without plan_file, which writes the plan to a file instead)"
            )
        return self._plan

    def close(self) -> None:
        """Abandon the assembly: nothing is written and temporary files are
        removed. Does nothing after :meth:`finish` or a previous close."""
        self._native.close()

    def __enter__(self) -> "Builder":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        if exc_type is not None:
            self.close()
            return False
        if self._native.is_open:
            self.close()
            raise CooAssemblerError(
                "the builder was left without finish(); nothing was written "
                "(call close() to abandon it on purpose)"
            )
        return False

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<coo_assembler.Builder shape={self._shape} dtype={self._dtype} {state}>"
