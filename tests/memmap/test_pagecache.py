"""The page-cache helpers: residency, eviction, reading ahead (Linux ``mincore``/``madvise``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from tensordict.memmap import MemoryMappedTensor, pagecache

pytestmark = pytest.mark.skipif(not pagecache.supported(), reason="needs mincore and madvise")


def _mapped_file(tmp_path: Path, pages: int = 64) -> MemoryMappedTensor:
    x = MemoryMappedTensor.empty(
        pages * pagecache.PAGE // 4, dtype=torch.float32, filename=tmp_path / "x.memmap"
    )
    x.copy_(torch.arange(x.numel(), dtype=torch.float32))
    return x


def _evicted(x: MemoryMappedTensor) -> bool:
    """Evict ``x``'s file; False where the file system keeps its pages (tmpfs: shared memory)."""
    pagecache.unmap_pages(x)
    pagecache.evict_file(x.filename)
    vec = pagecache.residency(*pagecache.mapping(x))
    return vec is not None and not vec.any()


def test_mapping_is_the_whole_file(tmp_path: Path) -> None:
    x = _mapped_file(tmp_path)
    addr, nbytes = pagecache.mapping(x[10:20])
    assert (addr, nbytes) == (x.data_ptr(), 64 * pagecache.PAGE)


def test_written_pages_are_resident_and_evicting_drops_them(tmp_path: Path) -> None:
    x = _mapped_file(tmp_path)
    vec = pagecache.residency(*pagecache.mapping(x))
    assert vec is not None and vec.tolist() == [1] * 64  # just written: in the cache
    assert pagecache.all_resident(*pagecache.mapping(x))
    if not _evicted(x):
        pytest.skip("this file system keeps its pages in memory")
    assert not pagecache.all_resident(*pagecache.mapping(x))
    assert x[: pagecache.PAGE // 4].sum() == sum(range(pagecache.PAGE // 4))  # read back intact


def test_willneed_reads_exactly_the_pages_asked_for(tmp_path: Path) -> None:
    x = _mapped_file(tmp_path)
    if not _evicted(x):
        pytest.skip("this file system keeps its pages in memory")
    addr, _ = pagecache.mapping(x)
    assert pagecache.advise(addr + 8 * pagecache.PAGE, 4 * pagecache.PAGE, pagecache.WILLNEED)
    for _ in range(200):  # the reads complete in the background: wait for them (bounded)
        vec = pagecache.residency(addr, 64 * pagecache.PAGE)
        if vec[8:12].all():
            break
        time.sleep(0.01)
    assert vec[8:12].tolist() == [1, 1, 1, 1]
    assert not vec[:8].any() and not vec[16:].any()  # nothing far from the range


def test_residency_of_an_unmapped_range_is_unknown() -> None:
    assert pagecache.residency(pagecache.PAGE, pagecache.PAGE) is None  # page 1 is never mapped
    assert pagecache.all_resident(pagecache.PAGE, pagecache.PAGE)  # nothing known missing
