"""TensorDictBase and its behaviour, written once for every tensordict class.

``base`` assembles :class:`TensorDictBase` from one mixin per concern, each a module named for
it: ``entries`` (get/set/update/pop), ``setitem`` (``td[index] = value``), ``update_resize``,
``structure`` (select/exclude, nesting, flattening keys), ``shape``, ``combine`` (stack, cat,
split and the ``__torch_function__`` table), ``ops`` (the one tree walk) with ``arithmetic``,
``reductions`` and ``tensor_methods`` on it, ``device``, ``locking``, ``names`` (dim names),
``storage`` (shared memory, memmap state), ``consolidate`` (one storage for every leaf),
``autograd``, ``ragged``, ``padding`` (``pad``, ``pad_sequence``, ``collate``) and
``upstream_private`` (upstream's private methods TorchRL calls), ``nesting`` (how deep trees
may nest, and a clear error where the recursion limit would strike). ``forwards`` is the table of
methods implemented above the behaviour (serial, memmap, parallel, nn, formats, store).

Imports: the primitives (collection, options, indexing, batch_shape, unbatched, factory),
``nontensor``, ``keys`` and each other. The concrete classes and everything built on them are
reached through ``tensordict.core.factory`` or bound through ``forwards``.
"""
