"""LazyStackedTensorDict and the lazy views: tensordicts that keep an operation instead of
copying.

``stack`` is :class:`~tensordict.LazyStackedTensorDict`, a stack of members that may differ in
keys and shapes, and ``members`` adds them, joins their batch sizes (``-1`` where they differ) and
updates them; ``index`` turns an index over the stacked dims into a tree of member indices;
``shape`` keeps shape operations, ``torch.stack``/``torch.cat`` of stacks and padding lazy;
``names`` holds the stack dim's name; ``keys`` removes keys member by member; ``new_lazy``
is ``new_zeros(..., empty_lazy=True)``.
``views`` holds the lazy views (``td._get_sub_tensordict(index)``, upstream's legacy lazy
shape ops), whose writes reach their source.

Imports: the primitives, ``nontensor``, ``keys``, ``behaviour`` and ``dense``; never ``serial``
(the pickling methods are rows of a forwarding table).
"""
