"""MemoryMappedTensor: a CPU tensor whose memory is a file on disk (or anonymous shared memory).

A MemoryMappedTensor maps its *whole* file as one storage, so every view of it (int, slice, unbind,
chunk, split, a view of a view) is described by the file plus the view's ``(size, stride, offset)``
into that storage. That is what it pickles to: a few hundred bytes, whatever the view, with plain
``pickle`` and with ``cloudpickle`` (the rebuild function is module level). The receiving process
maps each file once and keeps the mapping in a small per-process cache, so workers that receive many
chunks of the same file do not map it again for every chunk.

The cache holds weak references only: a mapping lives exactly as long as a tensor uses it, so a
deleted dataset gives its disk (or tmpfs memory) back as soon as nothing refers to it.

Views stay MemoryMappedTensor; every other operation returns a plain tensor.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from tensordict.core.collection import publish_as
from tensordict.core.indexing import is_first_class_dim
from tensordict.errors import (
    AlreadyMemmappedError,
    FirstClassDimMemmapError,
    MemmapDeviceError,
    MemmapExistsError,
    MemmapSymlinkError,
)
from tensordict.memmap.files import WRITEBACK_BYTES, preallocate, start_writeback
from tensordict.memmap.mapping import (
    _file_base,
    _itemsize,
    current_mapping,
    dtype_from_str,
    forget_file,
)
from tensordict.memmap.nested import is_nested_shape, nested_buffer, nested_numel, nested_view

__all__ = ["MemoryMappedTensor", "rebuild_anonymous", "rebuild_file_view"]


def is_whole_file(value: Any, path: str) -> bool:
    """Whether ``value`` is a MemoryMappedTensor that *is* the whole file at ``path``, in order
    (the file now at that path: not one that has been replaced since ``value`` mapped it)."""
    if not (
        isinstance(value, MemoryMappedTensor)
        and value.filename == path
        and value.storage_offset() == 0
        and value.is_contiguous()
        and value.untyped_storage().nbytes() == value.numel() * value.element_size()
    ):
        return False
    if value.numel() == 0:
        return os.path.exists(path)
    base = current_mapping(path, value.dtype, value.numel())
    return base is not None and base.data_ptr() == value.data_ptr()


class _SharedHandler:
    """The anonymous shared memory behind a file-less MemoryMappedTensor (upstream's ``_handler``).

    Every view of one tensor carries the same handler; :meth:`MemoryMappedTensor.from_handler`
    maps it again with another dtype or shape.
    """

    __slots__ = ("storage",)

    def __init__(self, storage: torch.UntypedStorage) -> None:
        self.storage = storage


def _wrap(
    t: torch.Tensor,
    filename: str | None,
    handler: _SharedHandler | None = None,
    parent_shape: torch.Size | None = None,
) -> MemoryMappedTensor:
    out = t.as_subclass(MemoryMappedTensor)
    out._filename = filename
    if filename is None and handler is None:
        handler = _SharedHandler(t.untyped_storage())
    out._handler = handler if filename is None else None
    out._parent_shape = parent_shape
    return out  # type: ignore[return-value]


def _is_basic(index: Any) -> bool:
    if index is None or index is Ellipsis or index.__class__ in (int, slice):
        return True
    if index.__class__ is tuple:
        return all(i is None or i is Ellipsis or i.__class__ in (int, slice) for i in index)
    return False


def rebuild_file_view(
    directory: str,
    name: str,
    dtype_name: str,
    numel: int,
    size: tuple[int, ...],
    stride: tuple[int, ...],
    offset: int,
) -> MemoryMappedTensor:
    """Module-level rebuild of a pickled file-backed view (maps the file once per process).

    The directory travels separately from the file name: the leaves of one tensordict share it,
    and pickle's memo writes it once per message.
    """
    filename = os.path.join(directory, name)
    dtype = dtype_from_str(dtype_name)
    base = _file_base(filename, dtype, numel)
    return _wrap(base.as_strided(size, stride, offset), filename)


def rebuild_anonymous(t: torch.Tensor) -> MemoryMappedTensor:
    """Module-level rebuild of an anonymous shared-memory tensor (shared through its handle)."""
    return _wrap(t, None)


class MemoryMappedTensor(torch.Tensor):
    """A tensor stored in a memory-mapped file (or anonymous shared memory).

    Examples:
        >>> import tempfile, os, torch
        >>> from tensordict.memmap import MemoryMappedTensor
        >>> d = tempfile.mkdtemp()
        >>> path = os.path.join(d, "x.memmap")
        >>> t = MemoryMappedTensor.from_tensor(torch.arange(6.0), filename=path)
        >>> t[2:4]
        MemoryMappedTensor([2., 3.])
        >>> type(t + 1).__name__
        'Tensor'
        >>> MemoryMappedTensor.from_filename(t.filename, torch.float32, [2, 3])[1]
        MemoryMappedTensor([3., 4., 5.])
    """

    _filename: str | None = None
    _handler: _SharedHandler | None = None
    _parent_shape: torch.Size | None = None
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_tensor(
        cls,
        input: torch.Tensor,
        *,
        filename: str | os.PathLike[str] | None = None,
        existsok: bool = False,
        copy_existing: bool = False,
        copy_data: bool = True,
        shape: Sequence[int] | torch.Tensor | None = None,
    ) -> MemoryMappedTensor:
        """A memory-mapped copy of ``input`` in ``filename`` (anonymous shared memory if None).

        A nested ``input`` (or a 2-d tensor of per-element sizes as ``shape``) gives a nested
        memory-mapped tensor whose elements lie one after another in the file.

        Raises:
            MemmapExistsError: the file exists and ``existsok`` is False.
            MemmapSymlinkError: ``filename`` is a symbolic link.
            AlreadyMemmappedError: ``input`` already lives in another file and
                ``copy_existing`` is False.
        """
        same = _reusable(input, filename, copy_existing, copy_data, shape)
        if same is not None:
            return same
        if copy_data and hasattr(input, "full_tensor"):
            # a DTensor: its whole value, gathered from its mesh (every rank of the mesh makes
            # the matching call, as upstream's memmap of a DTensor requires)
            input = input.full_tensor()
        if input.is_nested or is_nested_shape(shape):
            return cls._from_nested(input, filename, existsok, copy_data, shape)
        src = input.detach()
        if src.device.type != "cpu":
            src = src.cpu()
        size = src.shape if shape is None else torch.Size(shape)  # type: ignore[arg-type]
        if filename is None:
            out = _new_shared(size, src.dtype)
            if copy_data:
                out.copy_(src)
            return _wrap(out, None)
        path = _target_path(filename, existsok)
        write_file(path, src if copy_data else None, size, src.dtype)
        return cls._map(path, src.dtype, size)

    @classmethod
    def _from_nested(
        cls,
        input: torch.Tensor,
        filename: Any,
        existsok: bool,
        copy_data: bool,
        shape: Any,
    ) -> MemoryMappedTensor:
        sizes = input._nested_tensor_size() if shape is None else shape  # type: ignore[attr-defined]
        numel = nested_numel(sizes)
        buffer = nested_buffer(input) if copy_data and input.is_nested else None
        flat = cls.from_tensor(
            torch.empty(0, dtype=input.dtype) if buffer is None else buffer,
            filename=filename,
            existsok=existsok,
            copy_data=buffer is not None,
            shape=None if buffer is not None else (numel,),
        )
        return _as_nested(flat, sizes)

    @classmethod
    def _map(cls, path: str, dtype: torch.dtype, shape: Any) -> MemoryMappedTensor:
        if is_nested_shape(shape):
            return _as_nested(cls._map(path, dtype, (nested_numel(shape),)), shape)
        numel = int(torch.Size(shape).numel())
        base = _file_base(path, dtype, numel, writable=os.access(path, os.W_OK))
        return _wrap(base.view(shape), path)

    @classmethod
    def _allocate(
        cls, shape: Any, dtype: torch.dtype | None, filename: Any, existsok: bool
    ) -> MemoryMappedTensor:
        return cls.from_tensor(
            torch.empty(0, dtype=dtype or torch.get_default_dtype()),
            filename=filename,
            existsok=existsok,
            copy_data=False,
            shape=shape,
        )

    @classmethod
    def empty(cls, *args: Any, **kwargs: Any) -> MemoryMappedTensor:
        """A new memory-mapped tensor (zero-filled: files are preallocated, not sparse).

        The shape comes as ``empty(2, 3)``, ``empty((2, 3))`` or ``empty(shape=(2, 3))``; a 2-d
        integer tensor of per-element sizes makes a nested tensor. Keywords: ``dtype``,
        ``device`` (CPU only), ``filename`` (anonymous shared memory if None), ``existsok``.

        Raises:
            TypeError: no shape, or an unknown keyword.
            MemmapDeviceError: a device other than the CPU.

        Examples:
            >>> MemoryMappedTensor.empty(shape=(2,), dtype=torch.int64).shape
            torch.Size([2])
        """
        shape, dtype, filename, existsok = _constructor_args("empty", args, kwargs)
        return cls._allocate(shape, dtype, filename, existsok)

    @classmethod
    def zeros(cls, *args: Any, **kwargs: Any) -> MemoryMappedTensor:
        """A new memory-mapped tensor of zeros; arguments as :meth:`empty`.

        Examples:
            >>> MemoryMappedTensor.zeros(2, 2, dtype=torch.int32).sum().item()
            0
        """
        shape, dtype, filename, existsok = _constructor_args("zeros", args, kwargs)
        out = cls._allocate(shape, dtype, filename, existsok)
        if filename is None:
            out.zero_()
        return out

    @classmethod
    def ones(cls, *args: Any, **kwargs: Any) -> MemoryMappedTensor:
        """A new memory-mapped tensor of ones; arguments as :meth:`empty`.

        Examples:
            >>> MemoryMappedTensor.ones(shape=[3]).tolist()
            [1.0, 1.0, 1.0]
        """
        shape, dtype, filename, existsok = _constructor_args("ones", args, kwargs)
        out = cls._allocate(shape, dtype, filename, existsok)
        out.fill_(1)
        return out

    @classmethod
    def full(cls, *args: Any, fill_value: Any, **kwargs: Any) -> MemoryMappedTensor:
        """A new memory-mapped tensor filled with ``fill_value``; other arguments as :meth:`empty`.

        Examples:
            >>> MemoryMappedTensor.full(2, fill_value=7, dtype=torch.int8).tolist()
            [7, 7]
        """
        shape, dtype, filename, existsok = _constructor_args("full", args, kwargs)
        out = cls._allocate(shape, dtype, filename, existsok)
        out.fill_(fill_value)
        return out

    @classmethod
    def empty_like(
        cls, input: torch.Tensor, *, filename: Any = None, existsok: bool = False
    ) -> MemoryMappedTensor:
        return cls.empty(_shape_of(input), dtype=input.dtype, filename=filename, existsok=existsok)

    @classmethod
    def zeros_like(
        cls, input: torch.Tensor, *, filename: Any = None, existsok: bool = False
    ) -> MemoryMappedTensor:
        return cls.zeros(_shape_of(input), dtype=input.dtype, filename=filename, existsok=existsok)

    @classmethod
    def ones_like(
        cls, input: torch.Tensor, *, filename: Any = None, existsok: bool = False
    ) -> MemoryMappedTensor:
        return cls.ones(_shape_of(input), dtype=input.dtype, filename=filename, existsok=existsok)

    @classmethod
    def full_like(
        cls, input: torch.Tensor, fill_value: Any, *, filename: Any = None, existsok: bool = False
    ) -> MemoryMappedTensor:
        return cls.full(
            _shape_of(input),
            fill_value=fill_value,
            dtype=input.dtype,
            filename=filename,
            existsok=existsok,
        )

    @classmethod
    def from_filename(
        cls,
        filename: str | os.PathLike[str],
        dtype: torch.dtype,
        shape: Sequence[int] | torch.Tensor,
        index: Any = None,
    ) -> MemoryMappedTensor:
        """Map an existing raw file of ``dtype`` elements as a ``shape`` tensor (then ``[index]``).

        A 2-d integer tensor as ``shape`` maps the file as a nested tensor.

        Raises:
            IncompleteMemmapError: the file is missing.
            MemmapFormatError: the file is smaller than ``shape`` needs.
        """
        path = os.path.abspath(str(filename))
        out = cls._map(path, dtype, shape)
        return out if index is None else out[index]

    @classmethod
    def from_handler(
        cls,
        handler: _SharedHandler,
        dtype: torch.dtype,
        shape: Sequence[int] | torch.Tensor,
        index: Any = None,
    ) -> MemoryMappedTensor:
        """Map the shared memory of another file-less tensor (its ``_handler``) again.

        Deprecated upstream (removed in 0.17), kept for code that still calls it.

        Examples:
            >>> import warnings
            >>> a = MemoryMappedTensor.from_tensor(torch.arange(4.0))
            >>> with warnings.catch_warnings():
            ...     warnings.simplefilter("ignore")
            ...     MemoryMappedTensor.from_handler(a._handler, torch.float32, (2, 2))[1]
            MemoryMappedTensor([2., 3.])
        """
        warnings.warn(
            "MemoryMappedTensor.from_handler() is deprecated and will be removed in tensordict "
            "0.17: pickle the tensor, or use from_storage(tensor.untyped_storage(), ...).",
            DeprecationWarning,
            stacklevel=2,
        )
        out = cls.from_storage(handler.storage, shape=shape, dtype=dtype, handler=handler)
        return out if index is None else out[index]

    @classmethod
    def from_storage(
        cls,
        storage: torch.UntypedStorage | torch.TypedStorage,
        *,
        shape: Sequence[int] | torch.Tensor | None = None,
        dtype: torch.dtype | None = None,
        device: Any = None,
        index: Any = None,
        filename: str | os.PathLike[str] | None = None,
        handler: _SharedHandler | None = None,
    ) -> MemoryMappedTensor:
        """A memory-mapped tensor over an existing storage (from the start of it).

        Args:
            storage: the storage to view (typically ``other.untyped_storage()``).
            shape: the shape to view it as (a 2-d tensor of sizes for a nested tensor); the
                whole storage as 1-d when omitted.
            dtype: the element type (the typed storage's, else the default dtype).
            device: must be the CPU (or None).
            index: applied to the result when given.
            filename: the file behind the storage, if any.
            handler: the ``_handler`` to carry (file-less storages).

        Examples:
            >>> a = MemoryMappedTensor.from_tensor(torch.arange(6.0))
            >>> MemoryMappedTensor.from_storage(a.untyped_storage(), shape=(2, 3))[1]
            MemoryMappedTensor([3., 4., 5.])
        """
        _check_cpu(device)
        if isinstance(storage, torch.TypedStorage):
            dtype = dtype or storage.dtype
            storage = storage._untyped_storage
        dtype = dtype or torch.get_default_dtype()
        flat = torch.empty(0, dtype=dtype).set_(
            storage,  # type: ignore[call-overload]
            0,
            (storage.nbytes() // _itemsize(dtype),),
        )
        name = None if filename is None else os.path.abspath(os.fspath(filename))
        if shape is None:
            out = _wrap(flat, name, handler)
        elif is_nested_shape(shape):
            out = _as_nested(_wrap(flat, name, handler), shape)  # type: ignore[arg-type]
        else:
            size = torch.Size(shape)  # type: ignore[arg-type]
            out = _wrap(flat[: size.numel()].view(size), name, handler)
        return out if index is None else out[index]

    # ------------------------------------------------------------------ properties and views
    @property
    def filename(self) -> str | None:
        """The file behind this tensor (None for anonymous shared memory)."""
        return self._filename

    @property
    def parent_shape(self) -> torch.Size:
        """The shape of the tensor this one was indexed from (deprecated upstream).

        Examples:
            >>> import warnings
            >>> t = MemoryMappedTensor.zeros(4, 2)
            >>> with warnings.catch_warnings():
            ...     warnings.simplefilter("ignore")
            ...     t[1:].parent_shape
            torch.Size([4, 2])
        """
        warnings.warn(
            "MemoryMappedTensor.parent_shape is deprecated and will be removed in tensordict 0.17.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._parent_shape if self._parent_shape is not None else self.shape

    def _derive(self, t: torch.Tensor) -> MemoryMappedTensor:
        parent = self._parent_shape
        if parent is None and not self.is_nested:
            parent = self.shape
        return _wrap(t, self.filename, self._handler, parent)

    def __getitem__(self, index: Any) -> Any:
        if not _is_basic(index) and _has_first_class_dim(index):
            raise FirstClassDimMemmapError(
                "Using first class dimension indices with MemoryMappedTensor is not supported: "
                "the result would not be memory-mapped. Index a copy instead (t.clone()[dim])."
            )
        out = torch.Tensor.__getitem__(self, index)
        if self.is_nested or _is_basic(index):
            return self._derive(out)
        return out

    def unbind(self, dim: int = 0) -> tuple[Any, ...]:  # type: ignore[override]
        return tuple(self._derive(t) for t in torch.Tensor.unbind(self, dim))

    def split(self, split_size: Any, dim: int = 0) -> tuple[Any, ...]:  # type: ignore[override]
        return tuple(self._derive(t) for t in torch.Tensor.split(self, split_size, dim))

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Any, ...]:  # type: ignore[override]
        return tuple(self._derive(t) for t in torch.Tensor.chunk(self, chunks, dim))

    def __deepcopy__(self, memo: dict[int, Any]) -> torch.Tensor:
        # a copy is private memory, like every other non-view operation
        out = self.as_subclass(torch.Tensor).clone()
        memo[id(self)] = out
        return out

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        filename = self.filename
        plain = self.as_subclass(torch.Tensor)
        if plain.is_nested:
            storage = plain.untyped_storage()
            flat = torch.empty(0, dtype=self.dtype).set_(
                storage,  # type: ignore[call-overload]
                0,
                (storage.nbytes() // self.element_size(),),
            )
            flat = _wrap(flat, filename, self._handler)
            return (_as_nested, (flat, plain._nested_tensor_size()))  # type: ignore[attr-defined]
        if filename is None:
            return (rebuild_anonymous, (plain,))
        numel = plain.untyped_storage().nbytes() // plain.element_size()
        if plain.storage_offset() == 0 and plain.is_contiguous() and plain.numel() == numel:
            # the whole file: upstream's form, so the pickle loads with either package
            return (MemoryMappedTensor.from_filename, (filename, self.dtype, plain.shape, None))
        return self._reduce_view(plain, filename, numel)

    def _reduce_view(self, plain: torch.Tensor, filename: str, numel: int) -> tuple[Any, ...]:
        directory, name = os.path.split(filename)
        return (
            rebuild_file_view,
            (
                sys.intern(directory),
                name,
                sys.intern(str(self.dtype)),
                numel,
                tuple(plain.shape),
                plain.stride(),
                plain.storage_offset(),
            ),
        )

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
        text = repr(self.as_subclass(torch.Tensor))
        return "MemoryMappedTensor" + text[len("tensor") :]


# pickles and ``repr(type)`` name the class by upstream's path (which re-exports it)
__test__ = publish_as(
    "tensordict.memmap", MemoryMappedTensor
)  # methods' examples: doctest skips them


def _new_shared(shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
    """A zero-filled tensor in new anonymous shared memory (allocated once, nothing copied)."""
    nbytes = int(shape.numel()) * _itemsize(dtype)
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype).share_memory_()
    storage = torch.UntypedStorage._new_shared(nbytes)
    return torch.empty(0, dtype=dtype).set_(storage).view(shape)


def _has_first_class_dim(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(is_first_class_dim(i) for i in items)


def _shape_of(t: torch.Tensor) -> torch.Size | torch.Tensor:
    return t._nested_tensor_size() if t.is_nested else t.shape  # type: ignore[attr-defined]


def _check_cpu(device: Any) -> None:
    if device is not None and torch.device(device).type != "cpu":
        raise MemmapDeviceError(
            f"memory-mapped tensors live in host memory: got device={device!r}. Pass "
            "device='cpu' (or nothing) and move a copy with .to(device) if needed."
        )


def _constructor_args(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, torch.dtype | None, Any, bool]:
    """(shape, dtype, filename, existsok) from the arguments of ``empty``/``zeros``/..."""
    kwargs = dict(kwargs)
    shape = kwargs.pop("shape", None)
    dtype = kwargs.pop("dtype", None)
    filename = kwargs.pop("filename", None)
    existsok = bool(kwargs.pop("existsok", False))
    _check_cpu(kwargs.pop("device", None))
    if kwargs:
        raise TypeError(
            f"MemoryMappedTensor.{name}() got unexpected keyword arguments {sorted(kwargs)}; "
            "it takes shape, dtype, device, filename and existsok."
        )
    if shape is None:
        if not args:
            raise TypeError(
                f"MemoryMappedTensor.{name}() needs a shape: pass it as {name}(2, 3), "
                f"{name}((2, 3)) or {name}(shape=(2, 3))."
            )
        shape = args[0] if len(args) == 1 and not isinstance(args[0], int) else args
    elif args:
        raise TypeError(
            f"MemoryMappedTensor.{name}() got the shape twice: {args} and shape={shape}."
        )
    if is_nested_shape(shape):
        return shape, dtype, filename, existsok
    if isinstance(shape, torch.Tensor):
        shape = shape.tolist()
    return torch.Size(shape), dtype, filename, existsok


def _reusable(
    input: torch.Tensor, filename: Any, copy_existing: bool, copy_data: bool, shape: Any
) -> MemoryMappedTensor | None:
    """``input`` when ``from_tensor`` has nothing to do (a file-backed one needs copy_existing)."""
    if not isinstance(input, MemoryMappedTensor) or copy_existing or shape is not None:
        return None
    if filename is None:
        return input if input.filename is None and copy_data else None
    path = os.path.abspath(os.fspath(filename))
    if is_whole_file(input, path):
        return input
    if input.filename is not None and input.filename != path:
        raise AlreadyMemmappedError(  # upstream's wording first
            "A filename was provided but the tensor already has a file associated: it lives in "
            f"{input.filename}; asked to memory-map it to {path}. Pass copy_existing=True to "
            "copy it there."
        )
    return None


def _target_path(filename: Any, existsok: bool) -> str:
    """The absolute path to write, refusing symlinks and (unless ``existsok``) existing files."""
    path = os.path.abspath(os.fspath(filename))
    if os.path.islink(path):
        raise MemmapSymlinkError(
            f"{path} is a symbolic link: refusing to write a memory-mapped file through symlink "
            f"to {os.path.realpath(path)}. Remove the link or choose another file name."
        )
    if os.path.exists(path) and not existsok:
        raise MemmapExistsError(
            f"{path} already exists. Pass existsok=True to overwrite it, or choose another file."
        )
    return path


def _as_nested(flat: MemoryMappedTensor, sizes: torch.Tensor) -> MemoryMappedTensor:
    plain = flat.as_subclass(torch.Tensor)
    return _wrap(nested_view(plain, sizes), flat.filename, flat._handler)


def write_file(
    path: str,
    src: torch.Tensor | None,
    shape: Sequence[int],
    dtype: torch.dtype,
    *,
    fresh: bool = False,
    flush: bool = False,
) -> None:
    """Write a raw C-contiguous file: the tensor's bytes, or zeros when ``src`` is None.

    Zeros are really allocated (``posix_fallocate``), never a sparse file that a full disk would
    turn into a SIGBUS at the first read.

    ``fresh=True``: ``path`` is in a folder that exists and that this write alone fills (a new
    staging folder, removed whole if the write fails): no previous file can be mapped there, so
    the file is written under its own name, with no temporary name and no rename.
    ``flush=True``: a file of at least ``files.WRITEBACK_BYTES`` starts its writeback to the
    disk at once (a save that ``fsync``s everything it wrote afterwards).

    Raises:
        NoSpaceError: the file system has no room for the file (nothing is left behind).
        OSError: any other write error (nothing is left behind).
    """
    nbytes = int(torch.Size(shape).numel()) * _itemsize(dtype)
    if fresh:
        _write_new(path, src, nbytes, path, os.O_EXCL, flush)
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    # Written under a temporary name and renamed into place: a mapping of the previous file (in
    # this or another process) keeps its own inode instead of seeing the file truncated (SIGBUS).
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        _write_new(tmp, src, nbytes, path, os.O_TRUNC, flush)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    forget_file(path)


def _write_new(
    path: str, src: torch.Tensor | None, nbytes: int, name: str, flag: int, flush: bool
) -> None:
    """Create ``path`` (``flag``: ``O_EXCL`` or ``O_TRUNC``) holding ``src``'s bytes, or
    ``nbytes`` allocated zeros; ``name`` is the final path errors give. Three system calls for
    a small tensor (a buffered file object adds three more: with many threads sharing the GIL,
    each one hands it over). A partly written file is removed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flag | os.O_CLOEXEC, 0o666)
    try:
        if src is None or nbytes == 0:
            preallocate(fd, nbytes, name)
        else:
            flat = src.detach().cpu().resolve_conj().resolve_neg().contiguous().reshape(-1)
            view = flat.view(torch.uint8).numpy().data
            done = 0
            while done < len(view):  # one call below 2 GiB; the kernel caps larger ones
                done += os.write(fd, view[done:])
        if flush and nbytes >= WRITEBACK_BYTES:
            start_writeback(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)
