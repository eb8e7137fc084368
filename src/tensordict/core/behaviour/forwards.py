"""The methods of ``TensorDictBase`` implemented above the behaviour: one table.

Each row binds a method to the function that implements it, in a room of core built on the
classes (``serial``, ``padding``) or a package built on core (``memmap``, ``parallel``, ``nn``,
``formats``, ``store``). The function is the method: its signature and docstring are what
``help(TensorDict.map_iter)`` shows, and ``PersistentTensorDict``, lazy stacks and every other
class get the same rows by inheritance. Rows are bound on first use (see
:class:`~tensordict.core.factory.Forward`); importing a format's module does not import its
library, which is imported when the method runs.

The modules are named with :class:`~tensordict.core.factory.home` (nothing is imported here at
run time); type checkers read the real modules instead, so that every row is typed with its
function's parameters (``td.map_iter(fn, chunk_size=5)`` is a type error).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensordict.core.factory import forward, home

if TYPE_CHECKING:  # the functions themselves, for type checkers (a row's type is its function's)
    from tensordict import store
    from tensordict.core.behaviour import padding
    from tensordict.core.serial import convert, printing
    from tensordict.core.serial import pack as serial_pack
    from tensordict.core.serial import state_dict as serial_state
    from tensordict.formats import persistent, schema, struct, tables
    from tensordict.memmap import io as memmap_io
    from tensordict.memmap import load as memmap_load
    from tensordict.memmap import make as memmap_make
    from tensordict.nn import functional_modules
    from tensordict.parallel import api as parallel
else:
    printing = home("tensordict.core.serial.printing")
    serial_state = home("tensordict.core.serial.state_dict")
    serial_pack = home("tensordict.core.serial.pack")
    padding = home("tensordict.core.behaviour.padding")
    convert = home("tensordict.core.serial.convert")
    memmap_io = home("tensordict.memmap.io")
    memmap_load = home("tensordict.memmap.load")
    memmap_make = home("tensordict.memmap.make")
    parallel = home("tensordict.parallel.api")
    functional_modules = home("tensordict.nn.functional_modules")
    persistent = home("tensordict.formats.persistent")
    schema = home("tensordict.formats.schema")
    tables = home("tensordict.formats.tables")
    struct = home("tensordict.formats.struct")
    store = home("tensordict.store")

__all__ = ["ForwardsMixin"]


class ForwardsMixin:
    """The forwarded methods of every tensordict class (see the module docstring)."""

    __slots__ = ()

    # ------------------------------------------------------------------ core: serial, padding
    __repr__ = forward(printing.td_repr)
    state_dict = forward(serial_state.state_dict)
    load_state_dict = forward(serial_state.load_state_dict)
    pack = forward(serial_pack.pack)
    pad = forward(padding.pad)
    to_namedtuple = forward(convert.to_namedtuple)
    to_pytree = forward(convert.to_pytree)
    from_list = forward(convert.from_list, "classmethod")
    from_namedtuple = forward(convert.from_namedtuple, "constructor")
    from_tuple = forward(convert.from_tuple, "constructor")
    from_any = forward(convert.from_any, "constructor")
    from_pytree = forward(convert.from_pytree, "constructor")

    # ------------------------------------------------------------------ memory-mapped storage
    memmap_ = forward(memmap_io.memmap_)
    memmap = save = dumps = forward(memmap_io.memmap)
    memmap_like = forward(memmap_io.memmap_like)
    memmap_refresh_ = forward(memmap_io.memmap_refresh_)
    load_memmap = load = forward(memmap_io.load_memmap, "constructor")
    load_memmap_ = forward(memmap_load.load_memmap_into)
    make_memmap = forward(memmap_make.make_memmap)
    make_memmap_from_tensor = forward(memmap_make.make_memmap_from_tensor)
    make_memmap_from_storage = forward(memmap_make.make_memmap_from_storage)

    # ------------------------------------------------------------------ parallel map, nn
    map_iter = forward(parallel.map_iter)
    map = forward(parallel.map)
    from_modules = forward(functional_modules.from_modules, "constructor")
    to_module = forward(functional_modules.to_module)

    # ------------------------------------------------------------------ files, tables, servers
    to_h5 = forward(persistent.to_h5)
    from_h5 = forward(persistent.open_h5, "constructor")
    to_zarr = forward(persistent.to_zarr)
    from_zarr = forward(persistent.open_zarr, "constructor")
    from_schema = forward(schema.from_schema, "constructor")
    to_pandas = forward(tables.to_pandas)
    from_pandas = forward(tables.from_pandas, "constructor")
    to_csv = forward(tables.to_csv)
    from_csv = forward(tables.from_csv, "constructor")
    to_json = forward(tables.to_json)
    from_json = forward(tables.from_json, "constructor")
    to_parquet = forward(tables.to_parquet)
    from_parquet = forward(tables.from_parquet, "constructor")
    to_struct_array = forward(struct.to_struct_array)
    from_struct_array = forward(struct.from_struct_array, "constructor")
    to_store = forward(store.to_store)
