"""Tensordicts over ``torch.distributed``: the point-to-point and collective methods.

The methods of :class:`~tensordict.TensorDictBase` implemented here are rows of the forwarding
table (``core/behaviour/forwards.py``): each function below is the method.

* :mod:`~tensordict.distributed.p2p`: ``send`` / ``recv`` / ``isend`` / ``irecv``, leaf by leaf
  or as one consolidated storage;
* :mod:`~tensordict.distributed.remote`: ``init_remote`` / ``from_remote_init`` and
  ``broadcast``, which send a tensordict the receiver does not know;
* :mod:`~tensordict.distributed.collectives`: ``all_reduce``, ``reduce``, ``all_gather``,
  ``scatter`` and ``gather_and_stack``;
* :mod:`~tensordict.distributed.pipe`: the UCXX pipe (``tensordict._ucxx``), whose transport is
  optional;
* :mod:`~tensordict.distributed.wire` and :mod:`~tensordict.distributed.schema`: what they share
  (process groups, tags, timeouts and their errors; the leaves of a transfer and their
  fingerprint).

Every transfer starts with a small control exchange that compares the structures of both ends,
so that tensordicts that do not fit raise :class:`~tensordict.errors.TransferMismatchError` on
both ranks before any data moves (gloo itself would write past a buffer, abort the process or
hang); a rank that dies raises :class:`~tensordict.errors.PeerLostError` and a transfer that
outlives its ``timeout=`` raises :class:`~tensordict.errors.DistributedTimeoutError`. Both ends
must therefore run this package (upstream's messages are not understood).

Imports: torch, the core package and :mod:`tensordict.errors`; nothing imports this package
but the forwarding table (and ``tensordict._ucxx``).
"""
