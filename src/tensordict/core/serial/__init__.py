"""Tensordicts to and from other forms: pickles, repr, state dicts, packed tensors, pytrees and
Python structures.

``upstream_pickle`` writes and reads upstream 0.15's pickle layout (plain pickle,
``torch.save``: files load with either package); ``pickling`` adds the package's own fast paths
(multiprocessing's reducer, the map_iter channel's packing) and dispatches ``__reduce_ex__``;
``printing`` and ``compact_repr`` are ``repr``; ``parse_repr`` reads a repr back;
``state_dict`` is ``torch.nn.Module``'s layout; ``pack`` packs the leaves into one tensor;
``pytree`` registers tensordicts with ``torch.utils._pytree``; ``convert`` builds tensordicts
from namedtuples, tuples, lists, dataclasses, pytrees and formats' own objects, and back.

Imports: anything in core (this is its top tier). The classes below reach these modules only
through forwarding rows (``__reduce_ex__``, ``__repr__``, ``state_dict``, ``pack``, ...).
"""
