"""Reading a file back: :func:`open`, :class:`File`, :class:`TensorInfo`,
:class:`Statistics`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._errors import InputError
from ._common import PathLike, Size, _NUMPY_NAME, _options, _path, parse_size


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


class CsfTensor:
    """A CSF tensor (compressed sparse fibres, rank 3 and up): the arrays
    of its tree.

    Level ``L`` stores dimension ``mode_order[L]``: the children of node
    ``k`` of level ``L - 1`` are the nodes ``pos[L][k]:pos[L][k + 1]`` of
    level ``L``, whose coordinates are ``crd[L][...]`` (one virtual root
    above level 0); ``values[p]`` is the value of leaf ``p``. From
    :meth:`File.to_csf` the arrays are read-only views of the file (which
    the object keeps open, uint64); from :func:`assemble`, arrays of
    their own (uint32 when the extents and entry count fit it).
    """

    def __init__(
        self,
        shape: Tuple[int, ...],
        mode_order: Sequence[int],
        pos: List[np.ndarray],
        crd: List[np.ndarray],
        values: np.ndarray,
        file: Optional["File"] = None,
    ) -> None:
        self.shape = tuple(int(e) for e in shape)
        self.mode_order: Tuple[int, ...] = tuple(int(d) for d in mode_order)
        self.pos = pos
        self.crd = crd
        self.values = values
        self.file = file

    @classmethod
    def _of_file(cls, file: "File") -> "CsfTensor":
        mode_order, levels = file._native.csf_levels()
        return cls(
            file.shape,
            mode_order,
            [p for p, _ in levels],
            [c for _, c in levels],
            file.values(),
            file,
        )

    @property
    def nnz(self) -> int:
        """Stored entries (leaves)."""
        return int(self.values.shape[0])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> Any:
        return self.values.dtype

    def get(self, idx: Sequence[int]) -> Any:
        """The value at ``idx`` (dimension order), zero when not stored: a
        binary search down the levels (the library's lookup)."""
        if len(idx) != self.ndim:
            raise InputError(f"{len(idx)} indices for a tensor of rank {self.ndim}")
        q = [int(x) for x in idx]
        for d, x in enumerate(q):
            if not 0 <= x < self.shape[d]:
                raise InputError(f"index {x} of dimension {d} is outside 0..{self.shape[d]}")
        leaf = _native.csf_find(self.pos, self.crd, list(self.mode_order), q)
        return self.values.dtype.type(0) if leaf is None else self.values[leaf]

    def coords(self) -> np.ndarray:
        """Coordinates as int64, shape ``(ndim, nnz)``, dimension order, in
        storage order (from the pointers, without a walk: the library's)."""
        flat = _native.csf_coords(self.pos, self.crd, list(self.mode_order))
        return flat.view(np.int64).reshape(self.ndim, self.nnz)

    def to_sparse(self) -> Any:
        """The tensor as a pydata ``sparse.COO`` (its coordinates one
        int64 copy, the values shared)."""
        import sparse

        identity = self.mode_order == tuple(range(self.ndim))
        return sparse.COO(
            self.coords(),
            _scipy_data(self.values),
            shape=self.shape,
            has_duplicates=False,
            sorted=identity,
        )

    def __repr__(self) -> str:
        return (
            f"<coo_assembler.CsfTensor shape={self.shape} dtype={self.dtype} "
            f"nnz={self.nnz} mode_order={self.mode_order}>"
        )


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

    def ttv(
        self,
        x: Any,
        mode: int,
        output: PathLike,
        *,
        layout: str = "coo",
        mode_order: Optional[Sequence[int]] = None,
        memory_budget: Size = "256MiB",
        threads: Optional[int] = None,
        temp_dir: Optional[PathLike] = None,
        drop_zeros: bool = False,
    ) -> "File":
        """The tensor times the vector ``x`` along ``mode`` (``Y[i without
        i_mode] = sum_i_mode T[i] x[i_mode]``), written to ``output`` in
        ``layout`` (CSF in ``mode_order`` for a result of rank 3 and up)
        and opened. Each product is rounded once and each result entry's
        products summed exactly. Along the leaf level of a CSF tensor whose
        other levels come in the result's order, the fibres stream straight
        into the file (one pass, the writer's buffers); otherwise the
        products go through the assembler within ``memory_budget``."""
        xs = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
        if xs.ndim != 1:
            raise InputError(f"x must be a 1-D array, got shape {xs.shape}")
        kw = _options(
            layout=layout,
            mode_order=None if mode_order is None else [int(d) for d in mode_order],
            memory_budget=memory_budget,
            threads=threads,
            temp_dir=temp_dir,
            drop_zeros=drop_zeros,
        )
        kw = {k: v for k, v in kw.items() if v is not None}
        self._native.ttv(xs, int(mode), _path(output), kw)
        return File(output)

    def to_csf(self) -> CsfTensor:
        """The CSF tensor's arrays (``pos``/``crd`` per level, ``values``,
        ``mode_order``), zero-copy views of this file; a tensor of another
        layout raises :class:`InvalidFileError` naming it (convert it with
        ``coo-assembler convert IN OUT --to csf``)."""
        return CsfTensor._of_file(self)

    def to_sparse(self) -> Any:
        """The tensor, of any layout and rank, as a pydata ``sparse.COO``
        with its duplicates already summed: the coordinates one int64
        ``(ndim, nnz)`` copy, the values a view of the file (float16 and
        bfloat16 widened to float32)."""
        import sparse

        self._native.require("to_sparse")
        return sparse.COO(
            self.coords(),
            _scipy_data(self.values()),
            shape=self.shape,
            has_duplicates=False,
            sorted=self.is_sorted,
        )

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
