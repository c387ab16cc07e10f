"""What the parts of the package share: the element type tables, sizes,
paths, dtype names and the options every entry point passes on."""

from __future__ import annotations

import os
from typing import Any, Tuple, Union

import numpy as np

from . import _native
from ._errors import CooAssemblerError, InputError


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


def _extent(s: Any) -> int:
    """An extent: an integer (a float, even integral, is refused, as
    ``range`` refuses it)."""
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
        raise TypeError(f"shape entries must be integers, got {s!r}")
    if s < 0:
        raise InputError(f"extent {s} is negative")
    return int(s)


def _index_array(c: Any) -> np.ndarray:
    """An index array as given; an empty one of no integer dtype (``[]``
    is float64 to NumPy) as an empty int32 array, as scipy reads it."""
    a = np.asarray(c)
    if a.size == 0 and a.dtype.kind not in "iu":
        return np.zeros(a.shape, dtype=np.int32)
    return a
