"""The demo's synthetic dataset: built once under the cache folder, reused while it is intact.

The cache folder holds::

    source/                 the dataset, a memory-mapped tensordict: obs, label, id
    source.manifest.json    written last: what was built, and a fingerprint of it
    normalised/             the normalised copy (rewritten by every run)

A build removes the manifest, preallocates the files with ``memmap_like`` and fills them block by
block, so memory stays at one block whatever the size; the manifest is written when every block
is in. A later run reuses the dataset only if the manifest asks for the same rows, ``load_memmap``
succeeds, the shapes match, the ids are ``0 .. N-1`` and the fingerprint (a hash of sampled rows)
matches. Anything else, such as a build that was interrupted or a file cut short, rebuilds it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from tensordict import TensorDict
from tensordict.errors import MemmapFormatError

__all__ = [
    "FEATURES",
    "ROW_BYTES",
    "build",
    "feature_params",
    "fingerprint",
    "load_if_intact",
    "open_dataset",
    "rows_for",
]

FEATURES = 256
#: bytes per row: obs (FEATURES float32), label (int64), id (int64)
ROW_BYTES = FEATURES * 4 + 8 + 8
BLOCK_ROWS = 16384
LABELS = 10
#: bump when the generated data change, so that older caches are rebuilt
GENERATOR_VERSION = 1
_SEED = 0
_SAMPLED_ROWS = 64


def rows_for(nbytes: int) -> int:
    """The number of rows of a dataset of about ``nbytes`` (at least one).

    Examples:
        >>> rows_for(2**30), rows_for(1)
        (1032444, 1)
    """
    return max(1, nbytes // ROW_BYTES)


def feature_params() -> tuple[torch.Tensor, torch.Tensor]:
    """The true per-feature mean and standard deviation of ``obs``."""
    return torch.linspace(-2.0, 2.0, FEATURES), torch.linspace(0.5, 3.0, FEATURES)


def source_dir(directory: Path) -> Path:
    """Where the dataset lives under the cache folder."""
    return directory / "source"


def manifest_path(directory: Path) -> Path:
    """The manifest, written after the last block of the dataset."""
    return directory / "source.manifest.json"


def open_dataset(directory: Path, rows: int, progress: bool = True) -> tuple[TensorDict, bool]:
    """The dataset of ``rows`` rows under ``directory``: reused if intact, else built.

    Returns:
        The memory-mapped dataset, and whether it was reused.
    """
    data = load_if_intact(directory, rows)
    if data is not None:
        return data, True
    return build(directory, rows, progress), False


def _expected_manifest(rows: int) -> dict[str, Any]:
    return {"rows": rows, "features": FEATURES, "version": GENERATOR_VERSION, "seed": _SEED}


def load_if_intact(directory: Path, rows: int) -> TensorDict | None:
    """The dataset under ``directory`` if it is complete and has ``rows`` rows, else None."""
    try:
        manifest = json.loads(manifest_path(directory).read_text())
        data = TensorDict.load_memmap(source_dir(directory))
    except (OSError, ValueError, MemmapFormatError):
        return None
    expected = _expected_manifest(rows)
    if {k: manifest.get(k) for k in expected} != expected:
        return None
    shapes = {k: tuple(v.shape) for k, v in data.items()}
    if shapes != {"obs": (rows, FEATURES), "label": (rows,), "id": (rows,)}:
        return None
    if not torch.equal(data["id"], torch.arange(rows)):
        return None
    if manifest.get("fingerprint") != fingerprint(data):
        return None
    return data


def build(directory: Path, rows: int, progress: bool = True) -> TensorDict:
    """Write a new dataset of ``rows`` rows under ``directory``, block by block.

    ``obs`` is normal with the means and deviations of :func:`feature_params`, ``label`` is
    uniform in ``0 .. 9`` and ``id`` is the row number.
    """
    directory.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        manifest_path(directory).unlink()  # from here on, the cache is not complete
    # files of an earlier dataset (another size) would be reused, grown or left longer
    shutil.rmtree(source_dir(directory), ignore_errors=True)
    layout = TensorDict(
        {
            "obs": torch.empty((), dtype=torch.float32).expand(rows, FEATURES),
            "label": torch.empty((), dtype=torch.int64).expand(rows),
            "id": torch.empty((), dtype=torch.int64).expand(rows),
        },
        [rows],
    )
    data = layout.memmap_like(source_dir(directory))  # zero-filled files, nothing in memory
    loc, scale = feature_params()
    generator = torch.Generator().manual_seed(_SEED)
    bar = _progress_bar(rows * ROW_BYTES, "building the dataset", progress)
    for start in range(0, rows, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, rows)
        n = stop - start
        data["obs"][start:stop] = torch.randn(n, FEATURES, generator=generator) * scale + loc
        data["label"][start:stop] = torch.randint(0, LABELS, (n,), generator=generator)
        data["id"][start:stop] = torch.arange(start, stop)
        bar.update(n * ROW_BYTES)
    bar.close()
    manifest = {**_expected_manifest(rows), "fingerprint": fingerprint(data)}
    _write_atomically(manifest_path(directory), json.dumps(manifest, indent=2))
    return data


def fingerprint(data: TensorDict) -> str:
    """A hash of the shapes and of 64 rows spread over the dataset (cheap: reads 64 rows)."""
    rows = data.batch_size[0]
    positions = torch.linspace(0, rows - 1, _SAMPLED_ROWS).long().unique()
    digest = hashlib.sha256(repr(sorted((k, tuple(v.shape)) for k, v in data.items())).encode())
    for key in ("obs", "label", "id"):
        digest.update(data[key][positions].numpy().tobytes())
    return digest.hexdigest()


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(total: int, desc: str, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024)
