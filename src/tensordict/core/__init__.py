"""The in-memory data model: TensorDict, lazy stacks, non-tensor data, and their behaviour.

core/ is read in tiers; a module imports, at module level, only its own tier and the ones
before it (``tests/test_layout.py`` checks it)::

    1  collection options indexing batch_shape unbatched factory   primitives every class uses
    2  nontensor/        Python objects stored as leaves (NonTensorData, MetaData, NonTensorStack)
    3  keys checks       nested keys and key views; assert_close (they know the non-tensor kinds)
    4  behaviour/        TensorDictBase and its behaviour, one module per concern
    5  dense             TensorDict
    6  typed lazy/       TypedTensorDict; LazyStackedTensorDict and the lazy views
    7  functional        free functions that build, stack, merge or split tensordicts
    8  serial/           pickles, repr, state_dict, pack, pytree, conversions from Python objects

Code in a lower tier that must build a higher tier's class (a ``TensorDict``, a lazy stack) or
call a function of a room or package built on core names it through :mod:`.factory`
(``factory.TensorDict``), and a method that a higher room implements is a row of a forwarding
table (``map_iter = forward("tensordict.parallel.api", "map_iter")``, see
:mod:`.behaviour.forwards`). Those are the only arrows that point up.

Classes keep upstream's module paths (``tensordict._td.TensorDict``, set by
:func:`.collection.publish_as`): pickles and upstream's tests name them so.
"""
