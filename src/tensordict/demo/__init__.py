"""The main job of this library, end to end: ``python -m tensordict.demo`` (``make demo``).

It builds a synthetic memory-mapped dataset (1 GiB by default) in a cache folder, computes its
per-feature mean and standard deviation with ``map_iter``, writes a normalised copy with
``map(..., out=memmap_like(...))``, runs one shuffled epoch of minibatches with
``map_iter(shuffle=True)``, checks the results and prints the time, throughput and peak private
memory of each stage next to the same reduce done in-process and with ``torch`` ``DataLoader``.

Modules, in reading order: :mod:`~tensordict.demo.main` (the steps), :mod:`~tensordict.demo.jobs`
(what runs on each chunk), :mod:`~tensordict.demo.stages` (how each step runs and is measured),
:mod:`~tensordict.demo.dataset` (building and reusing the dataset),
:mod:`~tensordict.demo.report` (checks and table).
"""

from tensordict.demo.main import main

__all__ = ["main"]
