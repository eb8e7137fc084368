"""The methods of ``TensorDictBase`` implemented above the behaviour: one table.

Each row binds a method to the function that implements it, in a room of core built on the
classes (``serial``, ``padding``) or a package built on core (``memmap``, ``parallel``, ``nn``,
``formats``, ``store``, ``distributed``). The function is the method: its signature and
docstring are what ``help(TensorDict.map_iter)`` shows, and ``PersistentTensorDict``, lazy
stacks and every other class get the same rows by inheritance. Rows are bound on first use (see
:class:`~tensordict.core.factory.forward`); importing a format's module does not import its
library, which is imported when the method runs.
"""

from __future__ import annotations

from tensordict.core.factory import forward

__all__ = ["ForwardsMixin"]

_CONVERT = "tensordict.core.serial.convert"
_MEMMAP = "tensordict.memmap.io"
_TABLES = "tensordict.formats.tables"
_PERSISTENT = "tensordict.formats.persistent"
_P2P = "tensordict.distributed.p2p"
_REMOTE = "tensordict.distributed.remote"
_COLLECTIVES = "tensordict.distributed.collectives"
_PIPE = "tensordict.distributed.pipe"


class ForwardsMixin:
    """The forwarded methods of every tensordict class (see the module docstring)."""

    __slots__ = ()

    # ------------------------------------------------------------------ core: serial, padding
    __repr__ = forward("tensordict.core.serial.printing", "td_repr")
    state_dict = forward("tensordict.core.serial.state_dict", "state_dict")
    load_state_dict = forward("tensordict.core.serial.state_dict", "load_state_dict")
    pack = forward("tensordict.core.serial.pack", "pack")
    pad = forward("tensordict.core.behaviour.padding", "pad")
    to_namedtuple = forward(_CONVERT, "to_namedtuple")
    to_pytree = forward(_CONVERT, "to_pytree")
    from_list = forward(_CONVERT, "from_list", "classmethod")
    from_namedtuple = forward(_CONVERT, "from_namedtuple", "constructor")
    from_tuple = forward(_CONVERT, "from_tuple", "constructor")
    from_any = forward(_CONVERT, "from_any", "constructor")
    from_pytree = forward(_CONVERT, "from_pytree", "constructor")

    # ------------------------------------------------------------------ memory-mapped storage
    memmap_ = forward(_MEMMAP, "memmap_")
    memmap = save = dumps = forward(_MEMMAP, "memmap")
    memmap_like = forward(_MEMMAP, "memmap_like")
    memmap_refresh_ = forward(_MEMMAP, "memmap_refresh_")
    load_memmap = load = forward(_MEMMAP, "load_memmap", "constructor")
    load_memmap_ = forward("tensordict.memmap.load", "load_memmap_into")
    make_memmap = forward("tensordict.memmap.make", "make_memmap")
    make_memmap_from_tensor = forward("tensordict.memmap.make", "make_memmap_from_tensor")
    make_memmap_from_storage = forward("tensordict.memmap.make", "make_memmap_from_storage")

    # ------------------------------------------------------------------ parallel map, nn
    map_iter = forward("tensordict.parallel.api", "map_iter")
    map = forward("tensordict.parallel.api", "map")
    from_modules = forward("tensordict.nn.functional_modules", "from_modules", "constructor")
    to_module = forward("tensordict.nn.functional_modules", "to_module")

    # ------------------------------------------------------------------ files, tables, servers
    to_h5 = forward(_PERSISTENT, "to_h5")
    from_h5 = forward(_PERSISTENT, "open_h5", "constructor")
    to_zarr = forward(_PERSISTENT, "to_zarr")
    from_zarr = forward(_PERSISTENT, "open_zarr", "constructor")
    from_schema = forward("tensordict.formats.schema", "from_schema", "constructor")
    to_pandas = forward(_TABLES, "to_pandas")
    from_pandas = forward(_TABLES, "from_pandas", "constructor")
    to_csv = forward(_TABLES, "to_csv")
    from_csv = forward(_TABLES, "from_csv", "constructor")
    to_json = forward(_TABLES, "to_json")
    from_json = forward(_TABLES, "from_json", "constructor")
    to_parquet = forward(_TABLES, "to_parquet")
    from_parquet = forward(_TABLES, "from_parquet", "constructor")
    to_struct_array = forward("tensordict.formats.struct", "to_struct_array")
    from_struct_array = forward("tensordict.formats.struct", "from_struct_array", "constructor")
    to_store = forward("tensordict.store", "to_store")

    # ------------------------------------------------------------------ torch.distributed
    send = forward(_P2P, "send")
    recv = forward(_P2P, "recv")
    isend = forward(_P2P, "isend")
    irecv = forward(_P2P, "irecv")
    asend = forward(_PIPE, "asend")
    arecv = forward(_PIPE, "arecv")
    init_remote = forward(_REMOTE, "init_remote")
    from_remote_init = forward(_REMOTE, "from_remote_init", "constructor")
    broadcast = forward(_REMOTE, "broadcast")
    all_reduce = forward(_COLLECTIVES, "all_reduce")
    reduce = forward(_COLLECTIVES, "reduce")
    all_gather = forward(_COLLECTIVES, "all_gather")
    scatter = forward(_COLLECTIVES, "scatter")
    gather_and_stack = forward(_COLLECTIVES, "gather_and_stack")
