"""Every exception type the library raises, in one place.

Each type subclasses the builtin a caller would naturally catch (``KeyError`` for a missing key,
``ValueError`` for a bad argument, ``RuntimeError`` for a state error, ...). Where upstream
tensordict raised a different builtin for the same mistake, the type subclasses both, so code
written for upstream keeps catching it.

Messages follow one rule: say what was expected, what was given, and what to do.
"""

from __future__ import annotations

import dataclasses
import errno

__all__ = [
    "AlreadyMemmappedError",
    "ArchiveReturnEarlyError",
    "BackwardError",
    "BatchSizeError",
    "ChunkError",
    "CycleError",
    "DTypeCastError",
    "DeviceMismatchError",
    "DimIndexError",
    "DimNamesError",
    "FieldTypeError",
    "FileNameTooLongError",
    "FirstClassDimMemmapError",
    "FormatValueError",
    "FromModulesError",
    "FrozenTensorclassError",
    "IncompleteMemmapError",
    "IndexTypeError",
    "IndexingError",
    "InplaceNotSupportedError",
    "KeyMismatchError",
    "KeyTypeError",
    "LazyFirstClassDimError",
    "LazyViewError",
    "LockedError",
    "MappingLimitError",
    "MemmapAppendError",
    "MemmapArchiveError",
    "MemmapArchiveWriteError",
    "MemmapDeviceError",
    "MemmapExistsError",
    "MemmapFormatError",
    "MemmapParamsError",
    "MemmapStorageError",
    "MemmapSymlinkError",
    "MetaDataTypeError",
    "MissingDependencyError",
    "MultipleEllipsisError",
    "NestedWorkersError",
    "NoSpaceError",
    "NotATensorDictError",
    "NotMemmappedError",
    "NotPicklableError",
    "NotYetAvailableError",
    "OutKeyNotFoundError",
    "OutMismatchError",
    "ParamsWriteError",
    "PickleNotAllowedError",
    "PoolBusyError",
    "PoolClosedError",
    "RawKeyPathError",
    "ResultTypeError",
    "ShapeMismatchError",
    "StoreConnectionError",
    "StoreDataError",
    "StoreKeyError",
    "TensorDictKeyError",
    "TensorDictPropertyError",
    "TensorclassArgumentError",
    "TensorclassDefinitionError",
    "TypedFieldError",
    "UnbatchedMemmapError",
    "UndeclaredFieldError",
    "UnsafeKeyError",
    "ViewArgumentError",
    "WorkerCountWarning",
    "WorkerDiedError",
    "WorkerStartError",
    "ZeroDimIterationError",
]


class TensorDictKeyError(KeyError):
    """A key that is not in the tensordict (or a nested key that leads through a leaf)."""

    def __str__(self) -> str:
        # KeyError quotes its argument with repr(); a sentence reads better as is.
        return str(self.args[0]) if self.args else ""


class KeyTypeError(TypeError, KeyError, RuntimeError):
    """A key that is neither a ``str`` nor a tuple of ``str``.

    Subclasses ``KeyError`` and ``RuntimeError`` too: upstream raises those for the same mistake
    (``td.get(1)``, ``1 in td``).
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class BatchSizeError(RuntimeError, ValueError):
    """A batch size that does not fit the leaves, or a leaf that does not fit the batch size.

    Subclasses both ``ValueError`` (bad argument) and ``RuntimeError`` (what upstream raises).
    """


class ShapeMismatchError(RuntimeError, ValueError):
    """Tensordicts or tensors whose shapes or keys cannot be combined (stack, cat, arithmetic)."""


class KeyMismatchError(ShapeMismatchError, TensorDictKeyError):
    """Tensordicts combined entry by entry (arithmetic, comparisons) whose keys differ.

    Subclasses ``KeyError`` too, which upstream raises for this mistake.
    """


class DimNamesError(RuntimeError, ValueError):
    """Dimension names that conflict: renaming a named dimension in ``refine_names``, or
    tensordicts that name the same dimension differently in ``cat`` / ``stack``."""


class DTypeCastError(RuntimeError, TypeError):
    """An in-place operation whose result dtype cannot be stored in the tensor it writes to."""


class DeviceMismatchError(ValueError, RuntimeError):
    """Tensordicts on different devices where one device is required (members of a lazy stack),
    or a tensor off its tensordict's device. Subclasses ``RuntimeError`` too, as upstream raises."""


class NotATensorDictError(TypeError):
    """A value given where a tensordict is required (a member added to a lazy stack)."""


class IndexingError(IndexError):
    """An index that does not fit the batch dimensions (out of range, too many, wrong mask)."""


class ZeroDimIterationError(TypeError):
    """Iteration over a tensordict with no batch dimension (``for x in td`` walks the first
    batch dimension; iterate over ``keys()`` / ``values()`` / ``items()`` instead)."""


class IndexTypeError(IndexingError, TypeError):
    """An index of a type that cannot index a tensordict (a set, a float, ...)."""


class DimIndexError(IndexingError, BatchSizeError):
    """A batch dimension out of range in a shape operation (``permute``, ``split``, ...).

    Subclasses ``IndexError`` (what torch and upstream raise for a dim out of range) and
    ``BatchSizeError`` (``RuntimeError`` / ``ValueError``: what upstream raises in some paths).
    """


class MultipleEllipsisError(IndexingError, RuntimeError):
    """An index with more than one ``...``. Subclasses ``RuntimeError``, as upstream raises."""


class InplaceNotSupportedError(NotImplementedError):
    """``inplace=True`` asked of an operation that cannot change this tensordict in place (a
    shape operation on a lazy stack, whose batch size follows its members)."""


class LazyViewError(RuntimeError):
    """An operation a lazy view (``_CustomOpTensorDict``, ``_SubTensorDict``) cannot do: make
    it dense first (``to_tensordict()``), or act on its source."""


class ViewArgumentError(LazyViewError, TypeError):
    """An argument a lazy view cannot honour: ``to(..., inplace=True)`` (its entries live in its
    source), ``to(..., batch_size=)`` on a shape view. Subclasses ``TypeError``, which upstream
    raises for the same calls."""


class LazyFirstClassDimError(IndexingError, ValueError):
    """A first-class dimension (``functorch.dim``) used on a lazy stack's stack dimension.
    Subclasses ``ValueError``, which upstream raises."""


class FirstClassDimMemmapError(IndexingError, ValueError):
    """A first-class dimension (``functorch.dim``) used to index a MemoryMappedTensor.
    Subclasses ``ValueError``, which upstream raises."""


class LockedError(RuntimeError):
    """A write that would change the structure of a locked tensordict."""


class AlreadyMemmappedError(RuntimeError):
    """``memmap_`` to a new place on a tensordict that is already memory-mapped elsewhere."""


class MemmapFormatError(ValueError):
    """A memory-mapped directory whose metadata or files are malformed."""


class IncompleteMemmapError(MemmapFormatError, FileNotFoundError):
    """A memory-mapped directory missing its metadata or data files (e.g. an interrupted write)."""


class UnsafeKeyError(MemmapFormatError):
    """A key whose file name would escape the directory of a memory-mapped tensordict."""


class RawKeyPathError(UnsafeKeyError, RuntimeError):
    """A key that ``memmap(..., robust_key=False)`` would write under its raw name, which is a
    path (``"a/b"``, ``".."``) rather than a file name. Subclasses ``RuntimeError``, which upstream
    raises for the same call."""


class FileNameTooLongError(MemmapFormatError, OSError):
    """A key whose file name, or whose path below the prefix, is longer than the file system
    allows. Subclasses ``OSError`` too, which upstream raises (``errno`` is ``ENAMETOOLONG``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.errno = errno.ENAMETOOLONG


class MemmapExistsError(FileExistsError, RuntimeError):
    """A write with ``existsok=False`` to a prefix that already holds a saved tensordict.

    Subclasses ``RuntimeError`` too, which upstream raises for the same mistake.
    """


class NotMemmappedError(MemmapFormatError, RuntimeError):
    """``make_memmap*`` on a tensordict that is not memory-mapped to a directory. Subclasses
    ``RuntimeError`` too, which upstream raises for the same call."""


class MemmapStorageError(RuntimeError, ValueError):
    """``make_memmap_from_storage`` with a storage that is mapped from another file, or too
    small for the shape asked. Upstream raises ``RuntimeError`` for the first."""


class FromModulesError(RuntimeError):
    """``from_modules`` with options that cannot go together (``lazy_stack`` with
    ``as_module``, or with lazy modules). Upstream raises ``RuntimeError``."""


class MemmapDeviceError(RuntimeError, ValueError):
    """A memory-mapped tensor asked for on a device other than the CPU (files live in host
    memory). Subclasses ``RuntimeError`` and ``ValueError``, both of which upstream raises."""


class MemmapSymlinkError(RuntimeError):
    """A memory-mapped file asked for at a path that is a symbolic link: writing through it
    would change a file elsewhere. Upstream raises ``RuntimeError`` for the same call."""


class NoSpaceError(OSError):
    """Not enough free space on the file system for a memory-mapped write (``errno`` ENOSPC);
    the message names the path and the sizes. Nothing was left half-written."""


class MappingLimitError(OSError, RuntimeError):
    """More memory-mapped files than the kernel lets one process map (``vm.max_map_count``).

    Subclasses ``RuntimeError`` too, which torch raises when a mapping fails.
    """


class PickleNotAllowedError(MemmapFormatError, RuntimeError):
    """A saved entry that can only be read by unpickling, while ``allow_pickle=False``."""


class NotPicklableError(TypeError):
    """A function or object that must travel to worker processes but cannot be pickled."""


class WorkerDiedError(RuntimeError):
    """A worker process ended (signal, ``os._exit``, OOM killer) while it held a chunk."""

    def __init__(
        self,
        message: str,
        *,
        chunk: int | None = None,
        pid: int | None = None,
        exitcode: int | None = None,
    ) -> None:
        super().__init__(message)
        self.chunk = chunk
        self.pid = pid
        self.exitcode = exitcode


class WorkerStartError(WorkerDiedError):
    """A worker process failed before it could run its first chunk.

    The usual causes: ``fn`` cannot be imported in the worker (defined in a script read from
    stdin, a notebook or ``python -c`` while workers are started by ``spawn``), or the script calls
    ``map_iter`` at its top level without an ``if __name__ == "__main__":`` guard (spawned workers
    import the script, which would start workers again). The message names the cause and the fix;
    the worker's own traceback is the ``__cause__``.
    """


class ResultTypeError(TypeError):
    """``fn`` of ``map``/``map_iter`` returned something other than a tensordict, a
    tensorclass, a tensor or None."""


class PoolBusyError(RuntimeError):
    """A :class:`~tensordict.parallel.WorkerPool` already runs another ``map_iter`` call."""


class PoolClosedError(ValueError):
    """A :class:`~tensordict.parallel.WorkerPool` used after ``close()``.

    Subclasses ``ValueError``, which a closed ``multiprocessing.Pool`` raises.
    """


class ChunkError(RuntimeError):
    """An error in ``fn`` that cannot be re-raised with its own type (e.g. it does not unpickle)."""


class CycleError(ValueError):
    """A tensordict stored inside itself (``td["a"] = td``), directly or deeper down."""


class NestedWorkersError(RuntimeError, AssertionError):
    """``map_iter``/``map`` called where it cannot start worker processes: in a daemonic process
    (a ``multiprocessing.Pool`` worker), or nested deeper than the allowed levels.

    Subclasses ``AssertionError`` too, which ``multiprocessing`` raises (bare) in that case.
    """


class MissingDependencyError(ImportError):
    """An optional dependency that a feature needs is not installed."""


class OutMismatchError(ShapeMismatchError):
    """A result of ``fn`` that does not fit its slice of ``map(..., out=out)``: other keys, another
    batch size or leaf shape (nothing is broadcast)."""


class TensorclassDefinitionError(TypeError, AttributeError):
    """A ``@tensorclass`` declaration that cannot be built: a reserved field name, a field that
    would hide a tensordict method (without ``shadow=True``), or exclusive options.

    Subclasses ``AttributeError`` too, which upstream raises for a shadowing field name.
    """


class TensorclassArgumentError(TypeError):
    """Bad arguments to a tensorclass constructor: an unknown keyword, a missing field, a field
    given twice or too many positional arguments."""


class UndeclaredFieldError(AttributeError):
    """Setting an attribute (or entry) that is not a declared field of the tensorclass."""


class FrozenTensorclassError(dataclasses.FrozenInstanceError):
    """Assigning a field of an instance of a ``frozen=True`` tensorclass."""


class FieldTypeError(TypeError, ValueError):
    """A value a tensorclass field does not accept: under ``nocast``, a value that is not an
    instance of the field's annotation; under ``autocast``, a value the annotation cannot cast."""


class FormatValueError(TypeError, ValueError):
    """A value a file format cannot hold (bfloat16 in HDF5, a 2-d tensor in a table column, a
    python object where only tensors are stored), or a file whose content does not fit a
    tensordict."""


class StoreKeyError(TensorDictKeyError):
    """A tensordict id or entry that the key-value store does not hold."""


class StoreConnectionError(ConnectionError, RuntimeError):
    """The key-value server of a store-backed tensordict cannot be reached or went away."""


class StoreDataError(RuntimeError, ValueError):
    """An entry on a key-value server whose bytes do not match its metadata (incomplete, or
    changed by another program): it is never read back as valid data."""


class OutKeyNotFoundError(ValueError, RuntimeError):
    """``select_out_keys`` with a key the module does not write (upstream raised either builtin)."""


class UnbatchedMemmapError(NotImplementedError):
    """Memory-mapping an ``UnbatchedTensor`` entry (no on-disk layout exists for it, upstream
    either)."""


class TypedFieldError(TypeError):
    """``TypedTensorDict`` construction with a missing required field or an undeclared one."""


class MetaDataTypeError(TypeError):
    """A value given to ``MetaData[cls]`` that is not an instance of ``cls``."""


class NotYetAvailableError(NotImplementedError):
    """A name that upstream tensordict offers and this package will offer, but does not yet.

    Its import path exists so that code importing it still loads; using it raises this error,
    which names the coming feature and the issue that tracks it.
    """


class BackwardError(RuntimeError):
    """``td.backward()`` that cannot run: no leaf requires gradients, a non-scalar leaf without a
    gradient, or a gradient whose shape differs from its leaf's."""


class TensorDictPropertyError(RuntimeError):
    """A tensordict tree whose metadata is inconsistent: a child whose batch size, device, lock
    state or dimension names disagree with its parent's (raised by the checks for tests)."""


class WorkerCountWarning(UserWarning):
    """``num_workers`` larger than the CPUs can serve: fewer workers are started."""


class ParamsWriteError(ValueError, RuntimeError):
    """A write that autograd refuses on the parameters of a ``TensorDictParams`` (an in-place
    ``apply`` on leaves that require grad); upstream raised ``ValueError``."""


class MemmapParamsError(RuntimeError):
    """``memmap_`` on a ``TensorDictParams``: module parameters are not moved to disk in place."""


class MemmapArchiveError(MemmapFormatError):
    """A file given as a memory-mapped archive (``.tdz``) that is not one, or that is damaged or
    truncated, or an archive that cannot be written where asked. Subclasses ``ValueError``
    (through :class:`MemmapFormatError`), which upstream raises."""


class MemmapAppendError(ValueError):
    """``append_memmap`` to something that cannot grow (an archive, a lazy stack, a nested
    tensor) or with rows that do not fit the saved tensordict; nothing was written. Subclasses
    ``ValueError``, which upstream raises."""


class MemmapArchiveWriteError(MemmapArchiveError, RuntimeError):
    """An archive loaded with ``mode="r+"`` holding an entry that cannot be written in place (a
    compressed or misaligned entry, a nested tensor). Subclasses ``RuntimeError``, which
    upstream raises, and ``ValueError`` through :class:`MemmapArchiveError`."""


class ArchiveReturnEarlyError(NotImplementedError):
    """``memmap_like(..., return_early=True)`` to an archive: an archive is written whole, then
    renamed in, so there is nothing to return early. Upstream raises ``NotImplementedError``."""
