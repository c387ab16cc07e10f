"""The exceptions of coo_assembler; the native module raises these.

Each is also an instance of the builtin it resembles, so ``except
ValueError`` or ``except OSError`` code keeps working.
"""

from __future__ import annotations

__all__ = [
    "CooAssemblerError",
    "InputError",
    "BudgetError",
    "StorageError",
    "StorageNotFoundError",
    "InvalidFileError",
]


class CooAssemblerError(Exception):
    """Base class of every error raised by coo_assembler.

    Raised as such when a builder is used after ``finish``/``close``, or
    was left unusable by an earlier error.
    """


class InputError(CooAssemblerError, ValueError):
    """Bad input or options: a negative or out-of-range index, arrays of
    different lengths, a float pushed into an integer tensor, an unknown
    dtype or policy, a duplicate under ``duplicates="error"``, an integer
    sum that overflows the element type."""


class BudgetError(CooAssemblerError, MemoryError):
    """The memory budget is too small for this shape and dtype (the message
    gives the minimum), or memory inside the budget could not be had."""


class StorageError(CooAssemblerError, OSError):
    """An operating-system I/O call failed (disk full, permission denied,
    missing directory); the message names the call and the path."""


class StorageNotFoundError(StorageError, FileNotFoundError):
    """A file or folder that is not there (``ca.open`` of a missing path, a
    missing ``temp_dir`` or output folder): ``except FileNotFoundError``
    catches it."""


class InvalidFileError(CooAssemblerError, ValueError):
    """The file is not a valid Hurray file, is damaged (a checksum or a
    spill run failed its checks), or uses a feature not supported yet."""
