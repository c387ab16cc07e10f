"""The scipy hand-off: :func:`assemble` and :func:`assemble_file`, whose
results are scipy sparse arrays. Whether the work is assembled in memory
or out of core is the library's choice; this module only hands it the
arrays (or, for forms it does not read in place, a :class:`Builder`)."""

from __future__ import annotations

import os
import tempfile
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import _native
from ._errors import InputError
from ._builder import Builder, Summary, _summary
from ._common import DTYPES, PathLike, Size, _DTYPE_NAMES, _LIBRARY_NAME, _dtype_name, _extent, _index_array, _options, _path, _values
from ._file import CsfTensor, File, _index_dtype


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
    raise InputError(
        f"values of dtype {values.dtype} have no element type here (the element types: "
        f"{', '.join(DTYPES)}); convert them first, e.g. values.astype(np.float64)"
    )


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
    mode_order: Optional[Sequence[int]] = None,
) -> Any:
    """Assemble contributions into a scipy sparse array in one call.

    The drop-in replacement for
    ``scipy.sparse.coo_array((data, (row, col)), shape).tocsr()``
    (``layout="csc"`` for ``tocsc()``, ``"coo"`` for a canonical COO):
    duplicates summed exactly, memory bounded by ``memory_budget`` while
    assembling (plus the result), sorted indices. ``coords`` takes the forms
    :meth:`Builder.push` takes. ``dtype`` defaults to the values' dtype;
    the other options are :class:`Builder`'s.

    The library reads the caller's arrays in place (they are only read)
    when they are contiguous 1-D index arrays of one of int32, int64,
    uint32 or uint64, with float64, float32, complex128 or complex64
    values of the tensor's type (each part of a complex value summed
    exactly on its own), or bool values with int32 or int64 indices; it
    assembles in memory when the work fits the budget and out of core,
    through a temporary file in ``temp_dir``, when it does not. Other
    forms are pushed through a :class:`Builder`. Every way gives the
    same values, bit for bit. The GIL is released; Ctrl-C stops a long
    call with ``KeyboardInterrupt``, leaving nothing behind.

    ``layout="csf"`` (rank 3 and up; levels in ``mode_order``, default the
    identity) returns a :class:`CsfTensor` instead: its arrays are views
    of an unlinked temporary file, which :meth:`CsfTensor.to_sparse`
    hands to pydata ``sparse``.
    """
    values = _values(data)
    dtype = _default_dtype(values) if dtype is None else dtype
    layout = _native.parse_name("layout", layout)
    shape_t = tuple(_extent(s) for s in shape)
    # Before any contribution is read: a CSR of a rank-3 tensor is refused
    # now, naming the coo layout, not after a whole assembly.
    order = None if mode_order is None else [int(d) for d in mode_order]
    _native.check_layout(layout, len(shape_t), order)
    # What every path takes as Builder's options do (the folder aside).
    policies = dict(
        memory_budget=memory_budget,
        threads=threads,
        duplicates=duplicates,
        drop_zeros=drop_zeros,
        exact_sums=exact_sums,
        non_finite=non_finite,
        skip_negative=skip_negative,
    )
    if layout == "csf":
        return _assemble_csf(values, coords, shape_t, dtype, order, temp_dir, policies)
    _native.check_scipy_shape(list(shape_t))
    if temp_dir is not None:
        # Whichever path serves the call (the in-memory one never needs
        # the folder), a missing one is the library's same error.
        _native.check_temp_dir(_options(temp_dir=temp_dir))
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
            _options(temp_dir=temp_dir, layout=layout, **policies),
        )
        if parts is not None:
            return _scipy_of(parts, layout, shape_t)
    # A form the library does not read in place: pushed a chunk at a time.
    with tempfile.TemporaryDirectory(prefix="coo-assemble-", dir=temp_dir) as tmp:
        path = os.path.join(tmp, "assembled.hrry")
        with Builder(shape, dtype, temp_dir=tmp, **policies) as b:
            b.push(values, coords)
            b.finish(path)
        f = File(path)
        a = f.to_scipy(layout, index_dtype=index_dtype)
        # Own the values, so nothing refers to the temporary file any more.
        if not a.data.flags.owndata or not a.data.flags.writeable:
            a.data = np.array(a.data)
        del f
    return a


def _assemble_csf(
    values: np.ndarray,
    coords: Any,
    shape_t: Tuple[int, ...],
    dtype: Any,
    order: Optional[List[int]],
    temp_dir: Optional[PathLike],
    policies: dict,
) -> CsfTensor:
    """:func:`assemble` into CSF: in the identity order (a CSF's entries
    are then the sorted COO's) the in-memory kernel's COO arrays turned
    into levels in one pass; otherwise, or when the work outgrows the
    budget, through an unlinked temporary file (the arrays read in place
    when they can be, else pushed through a :class:`Builder`)."""
    r = len(shape_t)
    library_dtype = _LIBRARY_NAME[_dtype_name(dtype)]
    cols = _columns(coords, r, values.shape[0])
    if (order is None or order == list(range(r))) and cols is not None:
        opts = _options(temp_dir=temp_dir, layout="coo", **policies)
        # 32-bit words where the extents and the count fit them, as for COO.
        wide = _index_dtype(values.shape[0], shape_t) is np.int64
        index = "int64" if wide else "int32"
        parts = _native.assemble_arrays(values, cols, list(shape_t), library_dtype, index, opts)
        if parts is not None:
            data, indices, _ = parts
            # The kernel's indices are non-negative: the same words.
            words = indices.view(np.uint64 if wide else np.uint32)
            levels = _native.csf_levels(words, r, list(range(r)))
            return CsfTensor(shape_t, range(r), [p for p, _ in levels], [c for _, c in levels], data)
    with tempfile.TemporaryDirectory(prefix="coo-assemble-", dir=temp_dir) as tmp:
        path = os.path.join(tmp, "assembled.hrry")
        opts = _options(temp_dir=tmp, layout="csf", mode_order=order, **policies)
        if cols is None or _native.assemble_arrays_to_file(
            values, cols, list(shape_t), library_dtype, path, opts
        ) is None:
            with Builder(shape_t, dtype, temp_dir=tmp, layout="csf", mode_order=order, **policies) as b:
                b.push(values, coords)
                b.finish(path)
        # Mapped before the folder goes: the views outlive the name.
        return File(path).to_csf()


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
    if shape is not None:
        # For scipy: refused before any contribution is read.
        _native.check_layout(_native.parse_name("layout", layout or "csr"), len(shape))
        _native.check_scipy_shape([int(_extent(s)) for s in shape])
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
