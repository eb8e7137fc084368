"""Python objects stored in a tensordict: NonTensorData, MetaData and NonTensorStack.

``data`` holds the classes: one object for the whole batch (``NonTensorData``, ``MetaData``)
or one per element (``NonTensorStack``, a numpy object array of the batch shape). ``api``
answers every other tensordict method by running the TensorDict's own on a *shell* of the same
batch size, so indexing and shape operations follow the tensor rules exactly. ``combine`` is
how ``torch.stack``/``torch.cat`` treat them.

Imports: only the primitives (collection, options, indexing, factory). The rest of core sees
these classes as leaves, so they sit below it: the shell's ``TensorDict``, lazy ``new_*``,
padding and rewriting a memory-mapped entry are reached through ``tensordict.core.factory``,
pickling through forwarding rows.
"""
