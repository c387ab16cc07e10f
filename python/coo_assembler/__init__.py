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

from ._builder import Builder, Summary
from ._common import DTYPES, parse_size
from ._errors import (
    BudgetError,
    CooAssemblerError,
    InputError,
    InvalidFileError,
    StorageError,
    StorageNotFoundError,
)
from ._file import CsfTensor, File, Statistics, TensorInfo, open
from ._plan import (
    Plan,
    PlanFileSummary,
    Refill,
    _plan_from_bytes,
    load_plan,
    plan,
    plan_elements,
    plan_elements_to_file,
    plan_to_file,
    refill_file,
)
from ._scipy import assemble, assemble_file

__all__ = [
    "Builder",
    "Summary",
    "File",
    "CsfTensor",
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
    "Refill",
    "parse_size",
    "DTYPES",
    "CooAssemblerError",
    "InputError",
    "BudgetError",
    "StorageError",
    "StorageNotFoundError",
    "InvalidFileError",
]

__version__ = "0.1.0"

# Distributed assembly lives in its own package, built against the
# system's MPI (`pip install ./python-mpi`): `ca.DistBuilder` and
# `ca.DistPlan` load it when first used.
_DISTRIBUTED = ("DistBuilder", "DistPlan", "LocalCsr")


def __getattr__(name):
    if name in _DISTRIBUTED:
        try:
            import coo_assembler_mpi
        except ImportError as e:
            raise ImportError(
                f"coo_assembler.{name} needs the MPI extension, built against your MPI: "
                "pip install ./python-mpi (from the coo-assembler sources; needs mpicc and mpi4py)"
            ) from e
        return getattr(coo_assembler_mpi, name)
    raise AttributeError(f"module 'coo_assembler' has no attribute {name!r}")

# The parts live in modules by role (_builder, _file, _scipy, _plan, and
# _common for what they share); every name is the package's: reprs,
# help() and pickles (a Plan pickles through _plan_from_bytes) say
# `coo_assembler.X`, as before the split.
for _obj in (
    Builder,
    Summary,
    File,
    Statistics,
    TensorInfo,
    open,
    assemble,
    assemble_file,
    Plan,
    PlanFileSummary,
    Refill,
    _plan_from_bytes,
    load_plan,
    plan,
    plan_elements,
    plan_elements_to_file,
    plan_to_file,
    refill_file,
    parse_size,
):
    _obj.__module__ = __name__
del _obj
