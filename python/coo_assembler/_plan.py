"""Plan once, refill many: :class:`Plan` (:func:`plan`,
:func:`plan_elements`, :func:`load_plan`) and plans kept on disk
(:func:`plan_to_file`, :func:`plan_elements_to_file`, :func:`refill_file`)."""

from __future__ import annotations

import builtins
import os
import tempfile
import weakref
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import _native
from ._errors import InputError
from ._common import PathLike, Size, _LIBRARY_NAME, _dtype_name, _extent, _index_array, _native_order, _options, _path
from ._file import File, _index_dtype, open
from ._scipy import _scipy_index_dtype, _scipy_of


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

    def refill(self) -> "Refill":
        """A refill whose values are pushed in the plan's order (for a plan a
        :class:`Builder` recorded, the order of its push calls):
        ``r.push(values)``, ``r.push_elements(ke)``, then ``r.assemble()``."""
        return Refill(self)

    def assemble_elements(self, ke: Any, out: Any = None) -> Any:
        """:meth:`assemble` for a plan of :func:`plan_elements`: ``ke`` holds
        one ``k x k`` matrix per element (shape ``(elements, k, k)``, or
        flat)."""
        return self.assemble(np.asarray(ke).reshape(-1), out=out)


class Refill:
    """Values pushed for one step of a :class:`Plan`, in its order: each
    ``push(values)`` or ``push_elements(ke)`` call takes the values of the
    matching :class:`Builder` call (``push_elements``' ``ke`` in its
    element order, row-major). :meth:`assemble` makes the result (one copy
    of the values joins the pushed arrays) and starts the next step."""

    def __init__(self, plan: Plan):
        self._plan = plan
        self._parts: List[np.ndarray] = []
        self._n = 0

    def push(self, values: Any) -> None:
        """The next values, one per contribution (a 1-D array or a scalar)."""
        v = np.array(values, copy=True).reshape(-1)
        self._plan._native.check_pushed(self._n, v.shape[0])
        self._parts.append(v)
        self._n += v.shape[0]

    def push_elements(self, ke: Any) -> None:
        """The values of element matrices, as ``Builder.push_elements`` took
        them (shape ``(elements, k, k)``)."""
        self.push(np.asarray(ke).reshape(-1))

    def __len__(self) -> int:
        return self._n

    def assemble(self, out: Any = None) -> Any:
        """:meth:`Plan.assemble` of the values pushed; the next step starts."""
        parts, self._parts, self._n = self._parts, [], 0
        values = np.concatenate(parts) if parts else np.empty(0, dtype=self._plan.dtype)
        return self._plan.assemble(values, out=out)


def _same_coords(coords: Tuple[np.ndarray, ...], indices: np.ndarray, rank: int) -> bool:
    ix = indices.reshape(-1, rank)
    return all(
        c.shape == (ix.shape[0],) and np.array_equal(c, ix[:, d]) for d, c in enumerate(coords)
    )


def _plan_kw(layout: str, memory_budget: Size, threads: Optional[int], duplicates: str,
             exact_sums: bool, non_finite: str, drop_zeros: bool,
             temp_dir: Optional[PathLike] = None, skip_negative: bool = False) -> dict:
    return _options(
        skip_negative=skip_negative,
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
    skip_negative: bool = False,
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
    With ``skip_negative=True`` a contribution with a negative index (a
    removed Dirichlet dof) has no place in the result: every refill still
    takes one value per contribution and ignores those, as
    :func:`assemble` skips them.
    """
    layout = _native.parse_name("layout", layout)
    shape_t = tuple(_extent(s) for s in shape)
    cols, n = _plan_cols(coords, shape_t)
    index_dtype = _scipy_index_dtype([c.dtype for c in cols], n, shape_t)
    name = _LIBRARY_NAME[_dtype_name(dtype)]
    kw = _plan_kw(layout, memory_budget, threads, duplicates, exact_sums, non_finite, drop_zeros,
                  skip_negative=skip_negative)
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
    skip_negative: bool = False,
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
    kw = _plan_kw(layout, memory_budget, threads, duplicates, exact_sums, non_finite, drop_zeros,
                  skip_negative=skip_negative)
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
    skip_negative: bool = False,
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
    kw = _plan_kw(layout, memory_budget, threads, duplicates, exact_sums, non_finite, False, temp_dir,
                  skip_negative)
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
    skip_negative: bool = False,
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
    kw = _plan_kw(layout, memory_budget, threads, duplicates, exact_sums, non_finite, False, temp_dir,
                  skip_negative)
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
