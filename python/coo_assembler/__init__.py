"""Assemble sparse matrices and tensors out of core, with exact sums.

coo_assembler turns contributions ``(index tuple, value)`` -- as many as a
finite-element code produces, most coordinates hit many times -- into one
sorted, duplicate-free sparse tensor in a Hurray file, under a fixed memory
budget. Float duplicates are summed exactly (the correctly rounded sum), so
the result does not depend on thread count, budget or push order.

Three entry points:

- :func:`assemble`: the one-call replacement for
  ``scipy.sparse.coo_array((data, (row, col)), shape).tocsr()``.
- :class:`Builder`: push from any number of threads (the GIL is released),
  element matrices included, then :meth:`Builder.finish` writes the file.
- :func:`open`: read a file back: lookups, rows, checks, scipy arrays whose
  value array is a view of the file.

Errors are :class:`CooAssemblerError` subclasses: :class:`InputError`,
:class:`BudgetError`, :class:`StorageError`, :class:`InvalidFileError`.
"""

from __future__ import annotations

import builtins
import os
import tempfile
import weakref
from dataclasses import dataclass
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._errors import (
    BudgetError,
    CooAssemblerError,
    InputError,
    InvalidFileError,
    StorageError,
)

__all__ = [
    "Builder",
    "Summary",
    "File",
    "TensorInfo",
    "Statistics",
    "open",
    "assemble",
    "assemble_file",
    "plan",
    "plan_elements",
    "load_plan",
    "plan_to_file",
    "plan_elements_to_file",
    "refill_file",
    "PlanFileSummary",
    "Plan",
    "parse_size",
    "DTYPES",
    "CooAssemblerError",
    "InputError",
    "BudgetError",
    "StorageError",
    "InvalidFileError",
]

__version__ = "0.1.0"

#: The library's element types as ``(library name, NumPy name)``: the one
#: table every front end reads (``"bfloat16"`` has no NumPy type: push
#: float arrays into it, read it back as float32).
_DTYPE_TABLE: Tuple[Tuple[str, str], ...] = tuple(_native.dtypes())

#: Element types a tensor can hold, in NumPy spelling.
DTYPES: Tuple[str, ...] = tuple(numpy for _, numpy in _DTYPE_TABLE)

_NUMPY_NAME = dict(_DTYPE_TABLE)
_LIBRARY_NAME = {numpy: lib for lib, numpy in _DTYPE_TABLE}

PathLike = Union[str, "os.PathLike[str]"]
Size = Union[int, str]


def parse_size(size: Size) -> int:
    """Bytes in ``size``: an int, or a string in the library's one size
    grammar (the CLI's too): ``"256MiB"``, ``"256 MiB"``, ``"1.5GiB"``,
    ``"64M"``, ``"2g"``, ``"1e9"``, ``"100MB"`` (KB, MB, GB, TB are powers
    of 1000; K, M, G, T and the *iB forms powers of 1024)."""
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        if size < 0:
            raise InputError(f"size {size} is negative")
        if size >= 1 << 64:
            raise InputError(f"size {size} is too large (at most 2^64 - 1 bytes)")
        return int(size)
    if not isinstance(size, str):
        raise InputError(f"size must be an int or a string like '256MiB', got {size!r}")
    return _native.parse_size(size)


def _path(p: Any) -> str:
    """A path argument as the native side takes it: str, bytes or any
    ``os.PathLike`` (bytes decoded as the file system encodes names)."""
    try:
        return os.fsdecode(p)
    except TypeError:
        raise TypeError(
            f"a path must be a str, bytes or os.PathLike, got {type(p).__name__}"
        ) from None


#: `_dtype_name`'s answers by argument (NumPy's name lookup costs about a
#: microsecond and small assemblies call it every time).
_DTYPE_NAMES: dict = {}


def _dtype_name(dtype: Any) -> str:
    """The NumPy-spelled name of a supported element type (cached)."""
    try:
        return _DTYPE_NAMES[dtype]
    except (KeyError, TypeError):
        pass
    name = _dtype_name_uncached(dtype)
    try:
        _DTYPE_NAMES[dtype] = name
    except TypeError:
        pass
    return name


def _dtype_name_uncached(dtype: Any) -> str:
    """The NumPy-spelled name of a supported element type.

    NumPy's spellings keep NumPy's meaning (``np.float64``, ``"float64"``,
    ``"<f8"``, ``"d"``; so ``"i8"`` is int64 and ``"f16"`` float128 here, as
    NumPy says, where the CLI's ``i8`` is int8); the library's names NumPy
    does not claim (``"f64"``, ``"bf16"``) are taken too."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        if not isinstance(dtype, str):
            raise InputError(
                f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}"
            ) from None
        # Not NumPy's: the library's table (its error names the choices).
        return _NUMPY_NAME[_native.parse_dtype(dtype)]
    if name not in _LIBRARY_NAME:
        hint = ""
        if isinstance(dtype, str):
            try:
                hint = (
                    f" (NumPy reads {dtype!r} as {name}; the library's {dtype} is "
                    f"{_NUMPY_NAME[_native.parse_dtype(dtype)]}: pass that name)"
                )
            except CooAssemblerError:
                pass
        raise InputError(
            f"dtype {name} is not supported{hint}; use one of {', '.join(DTYPES)}"
        )
    return name


def _options(**kw: Any) -> dict:
    """The assembly options as the native side takes them: sizes and names
    are parsed there, by the library's grammar and tables."""
    if kw.get("memory_budget") is not None:
        kw["memory_budget"] = parse_size(kw["memory_budget"])
    if kw.get("temp_dir") is not None:
        kw["temp_dir"] = _path(kw["temp_dir"])
    for flag in ("drop_zeros", "exact_sums", "skip_negative"):
        if flag in kw:
            kw[flag] = bool(kw[flag])
    return kw


def _native_order(a: np.ndarray) -> np.ndarray:
    """``a`` in the machine's byte order (a copy only when it is not)."""
    if not a.dtype.isnative:
        return a.astype(a.dtype.newbyteorder("="))
    return a


def _values(data: Any) -> np.ndarray:
    v = _native_order(np.asarray(data))
    if v.ndim != 1:
        raise InputError(f"values must be a 1-D array, got shape {v.shape}")
    if v.dtype.kind not in "fiucb":
        raise InputError(
            f"values must be float16/32/64, complex64/128, bool or integers, got {v.dtype}"
        )
    return v


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


def _summary(d: dict) -> Summary:
    d["path"] = os.fspath(d["path"])
    d["stale_removed"] = [os.fspath(p) for p in d["stale_removed"]]
    return Summary(**d)


def _extent(s: Any) -> int:
    """An extent: an integer (a float, even integral, is refused, as
    ``range`` refuses it)."""
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
        raise TypeError(f"shape entries must be integers, got {s!r}")
    if s < 0:
        raise InputError(f"extent {s} is negative")
    return int(s)


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
        or ``"csc"`` (matrices only).
    skip_negative
        Skip contributions with a negative index in a signed index array
        (PETSc's convention; sfepy marks removed Dirichlet dofs with -1),
        counted in :attr:`Summary.skipped_negative`; with
        :meth:`push_elements`, the entries of a negative row or column.
        Default ``False``: a negative index is an :class:`InputError`.

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
    ) -> None:
        shape_t = tuple(_extent(s) for s in shape)
        self._shape = shape_t
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
            ),
        )

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

    def finish(self, path: PathLike) -> Summary:
        """Merge everything and write the tensor to ``path`` atomically
        (temporary file, fsync, rename). An output that could not be
        published (a missing or read-only folder, a directory, a file
        pushed into this builder) is refused before the merge: the builder
        keeps every contribution, fix the path and finish again. Once the
        merge starts the builder is spent whatever the outcome, and its
        spill files are removed."""
        return _summary(self._native.finish(_path(path)))

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


# Bits of the statistics section's computed_mask (Hurray spec).
_RANGE_VALID = 1 << 2
_MOMENTS_VALID = 1 << 3
_NM_VALID = 1 << 4
_NAN_INF_VALID = 1 << 5


@dataclass(frozen=True)
class Statistics:
    """The statistics section of a tensor. Values are over the logical
    tensor, implicit zeros included; a field the writer did not compute is
    None."""

    nnz: int
    sparsity_ratio: float
    value_min: Optional[float]
    value_max: Optional[float]
    value_abs_max: Optional[float]
    value_mean: Optional[float]
    value_stddev: Optional[float]
    nm_sparsity: Optional[Tuple[int, int]]
    has_nan: Optional[bool]
    has_inf: Optional[bool]

    @classmethod
    def _from_native(cls, d: dict) -> "Statistics":
        m = d["computed_mask"]

        def when(bit: int, v: Any) -> Any:
            return v if m & bit else None

        return cls(
            nnz=d["nnz"],
            sparsity_ratio=d["sparsity_ratio"],
            value_min=when(_RANGE_VALID, d["value_min"]),
            value_max=when(_RANGE_VALID, d["value_max"]),
            value_abs_max=when(_RANGE_VALID, d["value_abs_max"]),
            value_mean=when(_MOMENTS_VALID, d["value_mean"]),
            value_stddev=when(_MOMENTS_VALID, d["value_stddev"]),
            nm_sparsity=when(_NM_VALID, (d["nm_n"], d["nm_m"])),
            has_nan=when(_NAN_INF_VALID, d["has_nan"]),
            has_inf=when(_NAN_INF_VALID, d["has_inf"]),
        )


class TensorInfo(NamedTuple):
    """One tensor of a file as its descriptor describes it (see
    :attr:`File.tensors`). A Hurray file is a container: it may hold dense
    tensors next to sparse ones."""

    #: Its name in the file.
    name: str
    #: The spec's name of its layout: ``"coo"``, ``"csr"``, ``"csc"``,
    #: ``"row-major"``, ``"column-major"``, ... (the tag in hex, such as
    #: ``"0x33"``, for a tag the spec does not name).
    layout: str
    #: ``"sparse"``, ``"dense"``, ``"indirect"`` or ``"virtual"`` (None for
    #: an unnamed tag).
    kind: Optional[str]
    #: Element type, NumPy spelling (the tag in hex for a type this package
    #: does not read).
    dtype: str
    shape: Tuple[int, ...]
    #: Whether this package reads its entries (COO, CSR and CSC).
    readable: bool


def _index_dtype(nnz: int, shape: Tuple[int, ...]) -> type:
    """int32 when every index and pointer fits, as scipy chooses."""
    return np.int32 if max((nnz,) + shape) <= np.iinfo(np.int32).max else np.int64


def _scipy_data(values: np.ndarray) -> np.ndarray:
    # scipy.sparse refuses float16: widen (a copy).
    return values.astype(np.float32) if values.dtype == np.float16 else values


class File:
    """One tensor of an open Hurray file (see :func:`open`).

    The file is memory-mapped and its structure validated when opened;
    :meth:`verify` checks the content. Value arrays handed out are
    read-only views of the mapping and keep it alive.

    A file may hold several tensors, of any layout: :attr:`tensors` lists
    them. Opened without a ``tensor`` name, a file of several tensors
    chooses none (the methods that read one say how to choose). A dense
    tensor (row-major, column-major) opens and gives its :attr:`shape`,
    :attr:`dtype`, :attr:`layout` and :meth:`verify`; the methods that read
    entries (:meth:`get`, :meth:`row`, :meth:`to_scipy`, ...) raise
    :class:`InvalidFileError` naming its layout and what they serve.
    """

    def __init__(
        self, path: PathLike, tensor: Optional[str] = None, *, in_memory: bool = False
    ) -> None:
        self._native = _native.File(_path(path), tensor, in_memory)
        self.path = _path(path)

    @property
    def tensor(self) -> Optional[str]:
        """Name of the tensor this object reads (None when the file holds
        several and none was chosen)."""
        return self._native.tensor_name

    @property
    def tensor_names(self) -> List[str]:
        """Every tensor in the file."""
        return self._native.tensor_names

    @property
    def tensors(self) -> List[TensorInfo]:
        """Every tensor in the file, whatever its layout: name, layout,
        kind, element type, shape, and whether this package reads it."""
        return [
            TensorInfo(
                name=d["name"],
                layout=d["layout"],
                kind=d["kind"],
                dtype=_NUMPY_NAME.get(d["dtype"], d["dtype"]),
                shape=tuple(d["shape"]),
                readable=d["readable"],
            )
            for d in self._native.tensor_infos()
        ]

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self._native.shape)

    @property
    def ndim(self) -> int:
        return len(self._native.shape)

    @property
    def dtype(self) -> str:
        """Element type, NumPy spelling (``np.dtype(f.dtype)`` works for all
        but ``"bfloat16"``, which is read as float32)."""
        return _NUMPY_NAME[self._native.dtype]

    @property
    def nnz(self) -> int:
        """Stored entries."""
        return self._native.nnz

    @property
    def layout(self) -> str:
        """Storage layout of the tensor: ``"coo"`` (sorted row-major when
        :attr:`is_sorted`), ``"csr"`` or ``"csc"``; :meth:`to_scipy` returns
        this layout by default, its value array a view of the file. A
        tensor this package lists only has the spec's name of its layout
        (``"row-major"``, ``"column-major"``, ...)."""
        return self._native.layout

    @property
    def is_sorted(self) -> bool:
        """Entries stored in row-major order without duplicates: a sorted
        COO tensor or a CSR matrix."""
        return self._native.is_sorted

    @property
    def statistics(self) -> Optional[Statistics]:
        """The statistics section, or None when the file has none."""
        d = self._native.statistics()
        return None if d is None else Statistics._from_native(d)

    def get(self, idx: Sequence[int]) -> Union[int, float]:
        """Value at ``idx`` (one index per dimension); zero when not stored.
        Binary search on sorted tensors."""
        self._native.require("get")
        return self._native.get([int(i) for i in idx])

    def row(self, i: int) -> Tuple[np.ndarray, np.ndarray]:
        """Entries whose first index is ``i``: ``(indices, values)``.

        For a matrix, ``indices`` are the column indices (int64, shape
        ``(m,)``); for rank r > 2, the remaining coordinates (shape
        ``(m, r - 1)``). ``values`` is a read-only view of the file for a
        sorted COO tensor or a CSR matrix; for a CSC matrix, where a row is
        not contiguous, the row is found by a binary search in every column
        and ``values`` is a copy. Unsorted COO tensors are refused.
        """
        self._native.require("row")
        if self.ndim < 2:
            raise InputError("row() needs a tensor of rank 2 or more")
        layout = self.layout
        if layout == "csr":
            start, end = self._native.lane_range(int(i))
            return self._native.minor_slice(start, end), self._native.values_slice(start, end)
        if layout == "csc":
            cols, pos = self._native.csc_row(int(i))
            return cols, self.values()[pos.astype(np.intp)]
        start, end = self._native.row_range(int(i))
        coords = self._native.coords_slice(start, end)[:, 1:]
        if self.ndim == 2:
            coords = coords[:, 0]
        return coords, self._native.values_slice(start, end)

    def values(self) -> np.ndarray:
        """All stored values in storage order: a read-only, zero-copy view
        of the file (a float32 copy for bfloat16)."""
        self._native.require("values")
        return self._native.values_slice(0, self.nnz)

    def coords(self) -> np.ndarray:
        """All coordinates as int64, shape ``(rank, nnz)`` (a copy)."""
        self._native.require("coords")
        return self._native.coords_by_dim()

    def verify(self) -> List[str]:
        """Content checks (bounds, order, duplicates, statistics,
        checksums), O(nnz). Returns what was found, one string each: empty
        means sound with nothing to add. Lines starting ``"warning: "``
        (statistics that disagree with the data) and ``"note: "`` (a
        tensor of another writer carries no stored checksums: its bytes
        could not be checked) leave the file sound; any other line is a
        problem. Of a dense tensor: its stored checksum, if any (its
        buffer's size and place were checked when the file was opened)."""
        return self._native.verify()

    def to_scipy(self, layout: Optional[str] = None, *, index_dtype: Any = None) -> Any:
        """The tensor as a scipy sparse array.

        ``layout`` is ``"coo"``, ``"csr"`` or ``"csc"``; the default is the
        file's own :attr:`layout`. The value array is a read-only view of
        the mapped file (no copy; float16 and bfloat16 are widened to
        float32, which scipy needs) when the result has the file's order:
        ``coo`` of any file, ``csr`` of a CSR or sorted COO file, ``csc``
        of a CSC file. Index arrays are new int32 or int64 arrays, as scipy
        chooses for the size (scipy needs signed indices). CSR of a sorted
        COO file costs one pass over the indices; CSC of a COO file a
        counting sort by column, with the values permuted into a new array;
        the other compressed layout of a CSR/CSC file is scipy's conversion
        (a copy). Results from CSR, CSC and sorted COO files have sorted
        indices and no duplicates (``has_canonical_format``).
        ``index_dtype`` (int32 or int64) forces the CSR/CSC index type;
        the default is int32 when every index and pointer fits.
        """
        import scipy.sparse as sp

        self._native.require("to_scipy")
        stored = self.layout
        layout = stored if layout is None else _native.parse_name("layout", layout)
        shape = self.shape
        if layout == "coo":
            a = sp.coo_array(
                (_scipy_data(self.values()), tuple(self.coords())), shape=shape
            )
            if self.is_sorted:
                a.has_canonical_format = True
            return a
        if self.ndim != 2:
            raise InputError(f"{layout} needs a matrix; the tensor has rank {self.ndim}")
        if stored != "coo" and layout != stored:
            return self.to_scipy(stored, index_dtype=index_dtype).asformat(layout)
        if stored == "coo" and not self.is_sorted:
            return self.to_scipy("coo").asformat(layout)
        if index_dtype is None:
            index_dtype = _index_dtype(self.nnz, shape)
        index64 = np.dtype(index_dtype) == np.int64
        if stored != "coo":
            data, indices, indptr = self._native.compressed_parts(index64)
            cls = sp.csr_array if layout == "csr" else sp.csc_array
            a = cls((_scipy_data(data), indices, indptr), shape=shape)
        elif layout == "csr":
            data, indices, indptr = self._native.csr_parts(index64)
            a = sp.csr_array((_scipy_data(data), indices, indptr), shape=shape)
        else:
            indices, indptr, perm = self._native.csc_parts(index64)
            data = _scipy_data(self.values())[perm]
            a = sp.csc_array((data, indices, indptr), shape=shape)
        if index64:
            # The constructor narrows small int64 indices to int32; keep
            # what was asked for (scipy's tocsr keeps int64 inputs int64).
            a.indices, a.indptr = indices, indptr
        a.has_sorted_indices = True
        a.has_canonical_format = True
        return a

    def matvec(
        self,
        x: Any,
        transpose: bool = False,
        *,
        threads: Optional[int] = None,
        allow_non_finite: bool = False,
        paging: str = "auto",
    ) -> np.ndarray:
        """``A @ x`` (``A.T @ x`` with ``transpose``) straight from the file.

        ``x`` is any 1-D array (converted to float64, or complex128 when
        ``x`` or the matrix is complex); the result is a new float64 (or
        complex128) array. Values of every type are computed in float64;
        a complex product is real products of the parts (``A = Ar + i Ai``,
        ``x = xr + i xi``: ``Ar xr - Ai xi`` and ``Ar xi + Ai xr``), each a
        pass over the file like a real one, streamed the same way. The
        product runs on ``threads`` threads (default: every core) and gives
        the same bytes for any thread count. NaN or infinity in ``x`` raise
        :class:`InputError` unless ``allow_non_finite``. ``paging``:
        ``"stream"`` releases the file's pages behind the pass (for files
        larger than memory), ``"keep"`` leaves them mapped, ``"auto"``
        streams when the matrix exceeds a quarter of physical memory.
        """
        self._native.require("matvec")
        if self.ndim != 2:
            raise InputError(f"matvec needs a matrix; the tensor has rank {self.ndim}")
        xa = np.asarray(x)
        if np.iscomplexobj(xa) or self.dtype in ("complex64", "complex128"):
            return self._complex_matvec(xa, bool(transpose), threads, allow_non_finite, paging)
        xs = np.ascontiguousarray(xa, dtype=np.float64)
        if xs.ndim != 1:
            raise InputError(f"x must be 1-D, got shape {xs.shape}")
        return _native.matvec(
            self._native, xs, bool(transpose), threads, bool(allow_non_finite), paging
        )

    def _complex_matvec(self, x: np.ndarray, transpose: bool, threads: Optional[int],
                        allow_non_finite: bool, paging: str) -> np.ndarray:
        xs = np.ascontiguousarray(x, dtype=np.complex128)
        if xs.ndim != 1:
            raise InputError(f"x must be 1-D, got shape {xs.shape}")
        return _native.matvec_complex(
            self._native, xs, transpose, threads, bool(allow_non_finite), paging
        )

    def export(
        self,
        path: PathLike,
        to: str,
        *,
        symmetric: bool = False,
        npz_layout: str = "auto",
        petsc_int64: bool = False,
        reorder_memory: Size = "64MiB",
        _zip64_at: int = 0,
    ) -> dict:
        """Write the matrix (or vector) to ``path`` for another program,
        streamed from the file, whatever its layout: ``to="mtx"`` (MatrixMarket;
        ``symmetric=True`` checks symmetry and writes one triangle),
        ``"npz"`` (what ``scipy.sparse.load_npz`` reads: ``npz_layout``
        ``"csr"``, ``"csc"``, ``"coo"`` or ``"auto"``, the stored layout)
        or ``"petsc"`` (PETSc binary, 32-bit indices unless
        ``petsc_int64``). A rank-1 tensor exports as a dense vector:
        ``"petsc"`` gives a PETSc ``Vec`` (``VecLoad``), ``"npy"`` a NumPy
        array of its dtype, zeros where no entry is stored (a matrix to
        ``"npy"`` is refused: use ``"npz"``). PETSc stores float64, so
        64-bit integers beyond 2**53 in magnitude are refused
        (``InputError`` naming the entry) rather than rounded. When the
        format's order is not the stored one (PETSc or csr from CSC or
        unsorted COO, csc from COO or CSR, a symmetric check of anything
        but sorted COO, a vector from unsorted COO) the entries are
        reordered in bands of ``reorder_memory`` bytes, one pass over the
        file per band, plus 8 bytes per row or column. The file appears
        whole or not at all. Returns ``{"entries": ..., "bytes": ...}``."""
        return _native.export(
            self._native,
            _path(path),
            to,
            bool(symmetric),
            npz_layout,
            bool(petsc_int64),
            parse_size(reorder_memory),
            int(_zip64_at),
        )

    def spy(self, path: PathLike, size: int = 1024) -> dict:
        """Draw the sparsity pattern into the PNG ``path`` (``size`` pixels
        on the longer side; shade = log of the entries per pixel; shape and
        nnz in a caption). Returns the picture's geometry."""
        return _native.spy(self._native, _path(path), int(size))

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc: Any) -> None:
        # The mapping goes when the last view of it does.
        self._native = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self.tensor is None:
            return f"<coo_assembler.File {self.path!r} tensors={self.tensor_names!r}>"
        info = next(t for t in self.tensors if t.name == self.tensor)
        nnz = f" nnz={self.nnz}" if info.readable else ""
        return (
            f"<coo_assembler.File {self.path!r} tensor={self.tensor!r} shape={info.shape} "
            f"dtype={info.dtype}{nnz} layout={info.layout}>"
        )


def open(path: PathLike, tensor: Optional[str] = None, *, in_memory: bool = False) -> File:
    """Open a Hurray file and validate its structure.

    ``tensor`` names the tensor to read (default: the file's only tensor;
    a file of several opened without a name lists them in
    :attr:`File.tensors` and reads none until one is chosen).
    ``in_memory=True`` reads the file into memory instead of mapping it:
    use it for files another process may truncate while you read them
    (a truncated mapping raises SIGBUS).
    """
    return File(path, tensor, in_memory=in_memory)


#: The index dtype scipy's ``tocsr`` gives, by the kind of input (index
#: dtypes, empty or not): asked of the installed scipy once per kind.
_SCIPY_INDEX_DTYPES: dict = {}


def _scipy_index_dtype(dtypes: List[np.dtype], n: int, shape: Tuple[int, ...]) -> type:
    """The index type ``scipy.sparse.coo_array((data, cols), shape).tocsr()``
    gives for index arrays of ``dtypes`` and ``n`` contributions: int64 when the
    sizes do not fit int32; otherwise the installed scipy's own answer for
    inputs of these dtypes (its rule changed between versions: 1.17 keeps
    int64 for non-empty int64 input and gives int32 for empty input), found
    by a one-entry probe and cached."""
    if _index_dtype(n, shape) is np.int64:
        return np.int64
    if len(shape) != 2 or len(dtypes) != 2:
        return np.int32
    key = (tuple(dtypes), n == 0)
    hit = _SCIPY_INDEX_DTYPES.get(key)
    if hit is None:
        import scipy.sparse as sp

        m = min(n, 1)
        # Zeros of the caller's dtypes: any scipy that looks at the
        # contents sees indices that fit int32, as they do here.
        probe = tuple(np.zeros(m, dtype=d) for d in dtypes)
        try:
            got = sp.coo_array((np.zeros(m), probe), shape=shape).tocsr().indices.dtype
        except Exception:  # a dtype scipy refuses: its error comes later
            got = np.dtype(np.int32)
        hit = _SCIPY_INDEX_DTYPES[key] = np.int64 if got == np.int64 else np.int32
    return hit


def _index_dtypes(coords: Any, rank: int) -> List[np.dtype]:
    """The dtype of each dimension's indices in any form ``push`` takes."""
    if isinstance(coords, (tuple, list)):
        return [_index_array(c).dtype for c in coords]
    return [_index_array(coords).dtype] * rank


def _index_array(c: Any) -> np.ndarray:
    """An index array as given; an empty one of no integer dtype (``[]``
    is float64 to NumPy) as an empty int32 array, as scipy reads it."""
    a = np.asarray(c)
    if a.size == 0 and a.dtype.kind not in "iu":
        return np.zeros(a.shape, dtype=np.int32)
    return a


def _columns(coords: Any, rank: int, n: int) -> Optional[List[np.ndarray]]:
    """One 1-D index array per dimension, as ``coords`` gives them without
    a copy, or None for the forms the Builder reads instead."""
    if isinstance(coords, (tuple, list)):
        cols = [_index_array(c) for c in coords]
    else:
        a = _index_array(coords)
        if a.ndim == 2 and a.shape == (rank, n):
            cols = [a[d] for d in range(rank)]
        else:
            return None
    if len(cols) != rank or any(c.ndim != 1 or c.shape[0] != n for c in cols):
        return None
    return cols


def _scipy_of(parts: Tuple[np.ndarray, np.ndarray, np.ndarray], layout: str, shape: Tuple[int, ...]) -> Any:
    """The scipy array of the in-memory path's result, without a copy."""
    import scipy.sparse as sp

    data, indices, indptr = parts
    if layout == "coo":
        ix = indices.reshape(-1, len(shape))
        a = sp.coo_array((data, tuple(ix[:, d] for d in range(len(shape)))), shape=shape)
        a.has_canonical_format = True
        return a
    cls = sp.csr_array if layout == "csr" else sp.csc_array
    a = cls((data, indices, indptr), shape=shape)
    # The constructor may narrow int64 indices; keep what scipy's tocsr gives.
    a.indices, a.indptr = indices, indptr
    a.has_sorted_indices = True
    a.has_canonical_format = True
    return a


def _default_dtype(values: np.ndarray) -> str:
    name = _DTYPE_NAMES.get(values.dtype) or values.dtype.name
    if name in DTYPES:
        _DTYPE_NAMES[values.dtype] = name
        return name
    raise InputError(f"values of dtype {values.dtype} cannot be assembled; pass dtype=")


def assemble(
    data: Any,
    coords: Any,
    shape: Sequence[int],
    *,
    layout: str = "csr",
    dtype: Any = None,
    memory_budget: Size = "256MiB",
    temp_dir: Optional[PathLike] = None,
    threads: Optional[int] = None,
    duplicates: str = "sum",
    drop_zeros: bool = False,
    exact_sums: bool = True,
    non_finite: str = "keep",
    skip_negative: bool = False,
) -> Any:
    """Assemble contributions into a scipy sparse array in one call.

    The drop-in replacement for
    ``scipy.sparse.coo_array((data, (row, col)), shape).tocsr()``
    (``layout="csc"`` for ``tocsc()``, ``"coo"`` for a canonical COO):
    duplicates summed exactly, memory bounded by ``memory_budget`` while
    assembling (plus the result), sorted indices. ``coords`` takes the forms
    :meth:`Builder.push` takes. ``dtype`` defaults to the values' dtype;
    the other options are :class:`Builder`'s.

    Work that fits the budget is assembled in memory, straight into the
    result's arrays (no file; the caller's arrays are only read): index
    arrays of int32, int64, uint32 or uint64, contiguous, and float64,
    float32, complex128 or complex64 values of the tensor's type (each
    part of a complex value summed exactly on its own), and bool values
    with int32 or int64 indices. Anything else -- other forms, or
    work too large for the budget -- goes through the out-of-core
    :class:`Builder` and a temporary file in ``temp_dir``. Both give the
    same values, bit for bit. The GIL is released; Ctrl-C stops a long
    call with ``KeyboardInterrupt``, leaving nothing behind.
    """
    values = _values(data)
    dtype = _default_dtype(values) if dtype is None else dtype
    layout = _native.parse_name("layout", layout)
    shape_t = tuple(_extent(s) for s in shape)
    cols = _columns(coords, len(shape_t), values.shape[0])
    dtypes = [c.dtype for c in cols] if cols is not None else _index_dtypes(coords, len(shape_t))
    index_dtype = _scipy_index_dtype(dtypes, values.shape[0], shape_t)
    if cols is not None:
        parts = _native.assemble_arrays(
            values,
            cols,
            list(shape_t),
            _LIBRARY_NAME[_dtype_name(dtype)],
            "int64" if index_dtype is np.int64 else "int32",
            _options(
                memory_budget=memory_budget,
                threads=threads,
                duplicates=duplicates,
                drop_zeros=drop_zeros,
                exact_sums=exact_sums,
                non_finite=non_finite,
                layout=layout,
                skip_negative=skip_negative,
            ),
        )
        if parts is not None:
            return _scipy_of(parts, layout, shape_t)
    with tempfile.TemporaryDirectory(prefix="coo-assemble-", dir=temp_dir) as tmp:
        path = os.path.join(tmp, "assembled.hrry")
        with Builder(
            shape,
            dtype,
            memory_budget=memory_budget,
            temp_dir=tmp,
            threads=threads,
            duplicates=duplicates,
            drop_zeros=drop_zeros,
            exact_sums=exact_sums,
            non_finite=non_finite,
            skip_negative=skip_negative,
        ) as b:
            b.push(values, coords)
            b.finish(path)
        f = File(path)
        a = f.to_scipy(layout, index_dtype=index_dtype)
        # Own the values, so nothing refers to the temporary file any more.
        if not a.data.flags.owndata or not a.data.flags.writeable:
            a.data = np.array(a.data)
        del f
    return a


def assemble_file(
    path: PathLike,
    *,
    format: Optional[str] = None,
    shape: Optional[Sequence[int]] = None,
    dtype: Any = None,
    layout: Optional[str] = None,
    output: Optional[PathLike] = None,
    memory_budget: Size = "256MiB",
    temp_dir: Optional[PathLike] = None,
    threads: Optional[int] = None,
    duplicates: str = "sum",
    drop_zeros: bool = False,
    exact_sums: bool = True,
    non_finite: str = "keep",
) -> Any:
    """Assemble an input file -- MatrixMarket, ``.npy``, whitespace text or
    binary records (``format``, recognised when None) -- exactly as
    ``coo-assembler assemble`` does (same bytes, same 1-based,
    line-numbered errors). ``shape`` and ``dtype`` default to what the
    file's header says (MatrixMarket, npy), else ``dtype`` float64 and
    ``shape`` is required.

    With ``output``, the tensor is written there (a Hurray file in
    ``layout``, COO by default as the CLI writes) and the :class:`Summary`
    is returned; without, the scipy sparse array in ``layout`` (``"csr"``
    by default, ``"csc"``, ``"coo"``) is returned, as :func:`assemble`
    does."""
    opts = _options(
        memory_budget=memory_budget,
        temp_dir=temp_dir,
        threads=threads,
        duplicates=duplicates,
        drop_zeros=drop_zeros,
        exact_sums=exact_sums,
        non_finite=non_finite,
        layout=(layout or "coo") if output is not None else "coo",
    )
    # The library's one file-to-file path (the CLI's): a bin input whose
    # work fits the budget goes through the in-memory kernel, read in place.
    def run(out: Any) -> Summary:
        return _summary(
            _native.assemble_file(
                _path(path),
                _path(out),
                format,
                None if shape is None else [int(_extent(s)) for s in shape],
                None if dtype is None else _LIBRARY_NAME[_dtype_name(dtype)],
                opts,
            )
        )

    if output is not None:
        return run(output)
    with tempfile.TemporaryDirectory(prefix="coo-assemble-", dir=temp_dir) as tmp:
        out = os.path.join(tmp, "assembled.hrry")
        opts["temp_dir"] = tmp
        run(out)
        f = File(out)
        a = f.to_scipy(layout or "csr")
        if not a.data.flags.owndata or not a.data.flags.writeable:
            a.data = np.array(a.data)
        del f
    return a


class Plan:
    """The pattern of an assembly, computed once from its coordinates
    (:func:`plan`, :func:`plan_elements`): the output structure and where
    every contribution goes. :meth:`assemble` then takes only values.

    A refill is bit for bit what :func:`assemble` gives for the same
    coordinates and values (duplicates summed exactly, for every thread
    count). A plan is immutable; refills from several threads at once are
    safe. The GIL is released and Ctrl-C stops a long call.
    """

    def __init__(self, native: Any, shape: Tuple[int, ...], index_dtype: type, per_element: int = 0):
        self._native = native
        self._shape = shape
        self._layout = native.layout
        self._index_dtype = index_dtype
        self._per_element = per_element
        name = "int64" if index_dtype is np.int64 else "int32"
        self._indices = native.structure(False, name)
        self._pointers = native.structure(True, name)
        self._indices.flags.writeable = False
        self._pointers.flags.writeable = False
        # Index arrays handed out with results, by id: `out=` checks a
        # result is this plan's by identity first.
        self._issued: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def layout(self) -> str:
        return self._layout

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._native.dtype)

    @property
    def nnz(self) -> int:
        """Entries of every result (explicit zeros included)."""
        return self._native.nnz

    @property
    def contributions(self) -> int:
        """Values every :meth:`assemble` takes."""
        return self._native.contributions

    @property
    def memory_bytes(self) -> int:
        """Bytes the plan holds (its structure and contribution order)."""
        return self._native.memory_bytes + self._indices.nbytes + self._pointers.nbytes

    @property
    def digest(self) -> int:
        """A digest of the coordinates: plans of other coordinates differ."""
        return self._native.digest

    def save(self, path: PathLike) -> None:
        """Write the plan to ``path``: a Hurray file (checksummed, so
        ``coo-assembler verify`` checks it), written atomically. Read it
        back with :func:`load_plan`."""
        self._native.save(_path(path))

    def __reduce__(self) -> Any:
        # Pickled as the bytes of its plan file.
        with tempfile.TemporaryDirectory(prefix="coo-plan-") as d:
            p = os.path.join(d, "plan.hrry")
            self._native.save(p)
            with builtins.open(p, "rb") as f:
                data = f.read()
        name = "int64" if self._index_dtype is np.int64 else "int32"
        return (_plan_from_bytes, (data, name, self._per_element))

    def __repr__(self) -> str:
        return (
            f"<coo_assembler.Plan {self._layout} {self._shape} {self._native.element_type}: "
            f"{self.contributions} contributions, {self.nnz} entries>"
        )

    def _values(self, values: Any) -> np.ndarray:
        v = _native_order(np.asarray(values))
        if v.ndim != 1:
            v = v.reshape(-1) if v.size == self.contributions else v
        if v.ndim != 1 or v.shape[0] != self.contributions:
            raise InputError(
                f"{v.size} values of shape {v.shape} for a plan of {self.contributions} contributions"
            )
        dt = self.dtype
        if v.dtype != dt:
            if v.dtype.kind in "iu" and dt.kind in "fc":
                # The library's rule: integers go into floats when exact.
                big = np.flatnonzero(np.abs(v.astype(np.float64)) > 2.0**53)
                if big.size:
                    k = int(big[0])
                    raise InputError(
                        f"contribution {k}: value {v[k]} refused: the integer is not "
                        "exactly representable as a float (|v| > 2^53)"
                    )
            elif not np.can_cast(v.dtype, dt, "safe"):
                raise TypeError(
                    f"values of dtype {v.dtype} for a plan of {dt}: not a safe cast "
                    f"(pass {dt} values, or plan with dtype={v.dtype.name!r})"
                )
            v = v.astype(dt)
        return np.ascontiguousarray(v)

    def _check_out(self, out: Any) -> np.ndarray:
        """The data array of ``out`` when it is a result of this plan."""
        import scipy.sparse as sp

        if not sp.issparse(out) or out.format != self._layout or tuple(out.shape) != self._shape:
            raise InputError(
                f"out must be a {self._layout} array of shape {self._shape} made by this plan"
            )
        if self._layout == "coo":
            mine = [self._issued.get(id(c)) is c for c in out.coords]
            same = all(mine) or _same_coords(out.coords, self._indices, len(self._shape))
        else:
            mine = [self._issued.get(id(out.indices)) is out.indices,
                    self._issued.get(id(out.indptr)) is out.indptr]
            same = all(mine) or (
                out.indptr.shape == self._pointers.shape
                and out.indices.shape == self._indices.shape
                and np.array_equal(out.indptr, self._pointers)
                and np.array_equal(out.indices, self._indices)
            )
        if not same:
            raise InputError("out does not have this plan's structure (another pattern)")
        data = out.data
        if data.dtype != self.dtype or data.shape != (self.nnz,) or not data.flags.c_contiguous:
            raise InputError(
                f"out's data must be a contiguous {self.dtype} array of {self.nnz} values"
            )
        return data

    def assemble(self, values: Any, out: Any = None) -> Any:
        """The assembly of ``values`` (one per contribution, in the order the
        coordinates were planned) as a scipy array in the plan's layout; with
        ``out`` (a result of this plan), its ``data`` is refilled in place and
        ``out`` returned, nothing allocated."""
        v = self._values(values)
        if out is not None:
            data = self._check_out(out)
            self._native.assemble_into(v, data)
            return out
        data = np.empty(self.nnz, dtype=self.dtype)
        self._native.assemble_into(v, data)
        indices = self._indices.copy()
        pointers = self._pointers.copy()
        a = _scipy_of((data, indices, pointers), self._layout, self._shape)
        if self._layout == "coo":
            for c in a.coords:
                self._issued[id(c)] = c
        else:
            self._issued[id(a.indices)] = a.indices
            self._issued[id(a.indptr)] = a.indptr
        return a

    def assemble_elements(self, ke: Any, out: Any = None) -> Any:
        """:meth:`assemble` for a plan of :func:`plan_elements`: ``ke`` holds
        one ``k x k`` matrix per element (shape ``(elements, k, k)``, or
        flat)."""
        return self.assemble(np.asarray(ke).reshape(-1), out=out)


def _same_coords(coords: Tuple[np.ndarray, ...], indices: np.ndarray, rank: int) -> bool:
    ix = indices.reshape(-1, rank)
    return all(
        c.shape == (ix.shape[0],) and np.array_equal(c, ix[:, d]) for d, c in enumerate(coords)
    )


def _plan_kw(layout: str, memory_budget: Size, threads: Optional[int], duplicates: str,
             exact_sums: bool, non_finite: str, drop_zeros: bool,
             temp_dir: Optional[PathLike] = None) -> dict:
    return _options(
        memory_budget=memory_budget,
        threads=threads,
        duplicates=duplicates,
        drop_zeros=drop_zeros,
        exact_sums=exact_sums,
        non_finite=non_finite,
        layout=layout,
        temp_dir=temp_dir,
    )


def _plan_cols(coords: Any, shape_t: Tuple[int, ...]) -> Tuple[List[np.ndarray], int]:
    """The index arrays of ``coords`` (a tuple of 1-D arrays or a ``(rank, n)``
    array) as contiguous arrays of one dtype the native side reads in place,
    and their length."""
    if isinstance(coords, np.ndarray) and coords.ndim == 2:
        cols = [coords[d] for d in range(coords.shape[0])]
    elif isinstance(coords, (tuple, list)):
        cols = [_index_array(c) for c in coords]
    else:
        raise InputError("coords must be a tuple of 1-D index arrays or a (rank, n) array")
    if len(cols) != len(shape_t):
        raise InputError(f"{len(cols)} index arrays for a rank-{len(shape_t)} shape")
    n = cols[0].shape[0] if cols else 0
    for d, c in enumerate(cols):
        if c.ndim != 1 or c.shape[0] != n:
            raise InputError(f"index array {d} has shape {c.shape}; expected ({n},)")
        if c.dtype.kind not in "iu":
            raise InputError(f"index array {d} has dtype {c.dtype}; expected integers")
    # One contiguous dtype the native side reads in place.
    common = np.result_type(*[c.dtype for c in cols]) if cols else np.dtype(np.int64)
    if common not in (np.int32, np.int64, np.uint32, np.uint64):
        common = np.dtype(np.int64)
    cols = [np.ascontiguousarray(_native_order(c), dtype=common) for c in cols]
    return cols, n


def _plan_dofs(dofs: Any) -> np.ndarray:
    """``dofs`` as a contiguous ``(elements, k)`` integer array."""
    d = _native_order(np.asarray(dofs))
    if d.ndim != 2 or d.dtype.kind not in "iu":
        raise InputError(f"dofs must be a 2-D integer array (elements x k), got {d.dtype} {d.shape}")
    if d.dtype not in (np.int32, np.int64, np.uint32, np.uint64):
        d = d.astype(np.int64)
    d = np.ascontiguousarray(d)
    return d


def plan(
    coords: Any,
    shape: Sequence[int],
    *,
    layout: str = "csr",
    dtype: Any = "float64",
    memory_budget: Size = "256MiB",
    threads: Optional[int] = None,
    duplicates: str = "sum",
    exact_sums: bool = True,
    non_finite: str = "keep",
    drop_zeros: bool = False,
) -> Plan:
    """Plan an assembly from its coordinates alone, for assembling the same
    pattern again and again with new values (Newton steps, time steps)::

        P = ca.plan((row, col), shape)       # once
        A = P.assemble(values)               # a scipy csr_array
        P.assemble(new_values, out=A)        # refill A.data in place

    ``coords`` is a tuple of 1-D integer arrays (one per dimension) or a
    ``(rank, n)`` array. Every element type is planned: floats, integers,
    complex (each part summed exactly), bool (under ``duplicates="sum"`` an
    entry is True when any of its contributions is, as scipy sums bools)
    and float16 and ``"bf16"``, whose values and results are float32 arrays
    (as ``to_scipy`` gives them: scipy refuses float16, NumPy has no
    bfloat16). The options are :func:`assemble`'s; the plan holds
    about 12 bytes per contribution (its memory must fit
    ``memory_budget``, with its working memory: raise it for large plans).
    ``drop_zeros`` is refused: it would change the pattern with the values.
    """
    layout = _native.parse_name("layout", layout)
    shape_t = tuple(_extent(s) for s in shape)
    cols, n = _plan_cols(coords, shape_t)
    index_dtype = _scipy_index_dtype([c.dtype for c in cols], n, shape_t)
    name = _LIBRARY_NAME[_dtype_name(dtype)]
    kw = _plan_kw(layout, memory_budget, threads, duplicates, exact_sums, non_finite, drop_zeros)
    native = _native.plan_arrays(cols, list(shape_t), name, kw)
    return Plan(native, shape_t, index_dtype)


def plan_elements(
    dofs: Any,
    shape: Sequence[int],
    *,
    layout: str = "csr",
    dtype: Any = "float64",
    memory_budget: Size = "256MiB",
    threads: Optional[int] = None,
    duplicates: str = "sum",
    exact_sums: bool = True,
    non_finite: str = "keep",
    drop_zeros: bool = False,
) -> Plan:
    """Plan the assembly of element matrices: ``dofs`` is an
    ``(elements, k)`` integer array, element ``e`` contributing a ``k x k``
    matrix at ``(dofs[e, a], dofs[e, b])``. Then
    ``P.assemble_elements(ke)`` takes ``ke`` of shape ``(elements, k, k)``.
    Options as :func:`plan`."""
    layout = _native.parse_name("layout", layout)
    shape_t = tuple(_extent(s) for s in shape)
    if len(shape_t) != 2:
        raise InputError(f"element plans are for matrices; got a rank-{len(shape_t)} shape")
    d = _plan_dofs(dofs)
    n = d.shape[0] * d.shape[1] * d.shape[1]
    index_dtype = _scipy_index_dtype([d.dtype, d.dtype], n, shape_t)
    name = _LIBRARY_NAME[_dtype_name(dtype)]
    kw = _plan_kw(layout, memory_budget, threads, duplicates, exact_sums, non_finite, drop_zeros)
    native = _native.plan_elements(d, shape_t, name, kw)
    return Plan(native, shape_t, index_dtype, per_element=d.shape[1])


def _plan_from_native(native: Any, index_dtype: str, per_element: int) -> Plan:
    shape = tuple(int(x) for x in native.shape)
    return Plan(native, shape, np.int64 if index_dtype == "int64" else np.int32, per_element)


def _plan_from_bytes(data: bytes, index_dtype: str, per_element: int) -> Plan:
    return _plan_from_native(_native.Plan.from_bytes(data), index_dtype, per_element)


def load_plan(path: PathLike) -> Plan:
    """A plan written by :meth:`Plan.save`. A damaged file, a plan file of
    another version or a file that is not a plan is refused
    (:class:`InvalidFileError`, saying what is wrong)."""
    native = _native.Plan.load(_path(path))
    shape = tuple(int(x) for x in native.shape)
    n = native.contributions
    index_dtype = _index_dtype(max(n, native.nnz), shape)
    name = "int64" if index_dtype is np.int64 else "int32"
    return _plan_from_native(native, name, 0)


class PlanFileSummary(NamedTuple):
    """What :func:`plan_to_file` wrote."""

    path: str
    contributions: int
    nnz: int
    #: Parts the plan is cut into: each fits the planning budget, so a
    #: refill within that budget works part by part.
    parts: int
    bytes: int


def _planned(t: Any) -> PlanFileSummary:
    path, contributions, nnz, parts, nbytes = t
    return PlanFileSummary(os.fspath(path), contributions, nnz, parts, nbytes)


def plan_to_file(
    coords: Any,
    shape: Sequence[int],
    path: PathLike,
    *,
    layout: str = "csr",
    dtype: Any = "float64",
    memory_budget: Size = "256MiB",
    threads: Optional[int] = None,
    duplicates: str = "sum",
    exact_sums: bool = True,
    non_finite: str = "keep",
    temp_dir: Optional[PathLike] = None,
) -> PlanFileSummary:
    """Plan out of core: :func:`plan` for patterns whose plan does not fit
    in memory. The plan is written to ``path`` (atomically) in parts that
    each fit ``memory_budget``, and planning holds no more than the budget
    besides ``coords`` (which may be ``np.memmap`` arrays). Then, step
    after step::

        ca.plan_to_file((row, col), shape, "K.plan", memory_budget="256MiB")
        np.save("v.npy", values)                 # or values.tofile("v.f64")
        K = ca.refill_file("K.plan", "v.npy", "K.hrry")

    Options as :func:`plan` (plans keep explicit zeros: there is no
    ``drop_zeros``); spill files go to ``temp_dir`` (default: the
    system's)."""
    layout = _native.parse_name("layout", layout)
    shape_t = tuple(_extent(s) for s in shape)
    cols, _ = _plan_cols(coords, shape_t)
    name = _LIBRARY_NAME[_dtype_name(dtype)]
    kw = _plan_kw(layout, memory_budget, threads, duplicates, exact_sums, non_finite, False, temp_dir)
    return _planned(_native.plan_to_file(cols, list(shape_t), name, _path(path), kw))


def plan_elements_to_file(
    dofs: Any,
    shape: Sequence[int],
    path: PathLike,
    *,
    layout: str = "csr",
    dtype: Any = "float64",
    memory_budget: Size = "256MiB",
    threads: Optional[int] = None,
    duplicates: str = "sum",
    exact_sums: bool = True,
    non_finite: str = "keep",
    temp_dir: Optional[PathLike] = None,
) -> PlanFileSummary:
    """:func:`plan_to_file` for element matrices (``dofs`` as
    :func:`plan_elements` takes it): every refill's values are the element
    matrices, element after element, ``k * k`` values each, row-major."""
    layout = _native.parse_name("layout", layout)
    shape_t = tuple(_extent(s) for s in shape)
    if len(shape_t) != 2:
        raise InputError(f"element plans are for matrices; got a rank-{len(shape_t)} shape")
    d = _plan_dofs(dofs)
    name = _LIBRARY_NAME[_dtype_name(dtype)]
    kw = _plan_kw(layout, memory_budget, threads, duplicates, exact_sums, non_finite, False, temp_dir)
    return _planned(_native.plan_elements_to_file(d, shape_t, name, _path(path), kw))


def refill_file(
    plan: PathLike,
    values: PathLike,
    output: PathLike,
    *,
    memory_budget: Size = "256MiB",
    threads: Optional[int] = None,
    temp_dir: Optional[PathLike] = None,
) -> File:
    """Assemble one step with a plan file (either kind: :meth:`Plan.save`'s
    or :func:`plan_to_file`'s) and the values file ``values`` (a ``.npy``
    array, or raw little-endian values of the plan's dtype, one per
    contribution in the planned order) into the Hurray file ``output``
    (written atomically; never the plan or the values file), and open it.
    A plan in parts is refilled within ``memory_budget``; a budget below
    what its largest part needs is refused with the minimum. The values are
    bit for bit what :func:`assemble` gives for the same coordinates."""
    if isinstance(values, np.ndarray):
        raise InputError(
            "values must be the path of a .npy or raw values file (np.save(path, v)); "
            "for values held in memory use a Plan (ca.plan) and Plan.assemble"
        )
    kw = _options(memory_budget=memory_budget, threads=threads, temp_dir=temp_dir)
    written = _native.refill_file(_path(plan), _path(values), _path(output), kw)
    return open(os.fspath(written[0]))
