"""Reading ahead: which pages a chunk covers, when the parent asks for them, and map_iter's
results over a memory-mapped source that is not in the page cache."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch

from tensordict import TensorDict
from tensordict.memmap import pagecache
from tensordict.parallel import WorkerPool, readahead
from tensordict.parallel.plan import ChunkPlan
from tensordict.parallel.readahead import ReadAhead

from .helpers import reads_randomly, reduce_sum

pytestmark = pytest.mark.skipif(not pagecache.supported(), reason="needs mincore and madvise")
PAGE = pagecache.PAGE


def _source(tmp_path: Path, rows: int = 512, cols: int = 1024) -> TensorDict:
    """Rows of ``cols`` float32 (4 KiB by default: one page each), memory-mapped."""
    x = torch.arange(rows * cols, dtype=torch.float32).view(rows, cols)
    return TensorDict({"x": x, "n": {"y": torch.arange(rows)}}, [rows]).memmap_(tmp_path / "td")


def _evict(td: TensorDict) -> bool:
    for leaf in td.values(include_nested=True, leaves_only=True):
        pagecache.unmap_pages(leaf)
        pagecache.evict_file(leaf.filename)
    return not any(
        pagecache.residency(*pagecache.mapping(leaf)).any()
        for leaf in td.values(include_nested=True, leaves_only=True)
    )


def test_dense_slices_cover_one_run_of_pages(tmp_path: Path) -> None:
    td = _source(tmp_path)
    ahead = ReadAhead.for_call(td, ChunkPlan(512, 0, chunksize=128))
    assert ahead is not None
    x_runs, y_runs = ahead.pages(1)
    assert x_runs.tolist() == [[128, 256]]  # rows 128..255, a page each
    assert y_runs.tolist() == [[0, 1]]  # 128 int64 rows from byte 1024 on: all in page 0


def test_strided_and_shuffled_rows_cover_only_their_pages(tmp_path: Path) -> None:
    td = _source(tmp_path, rows=8192, cols=256)[::8]  # 1 KiB rows, one every 8 KiB
    perm = torch.randperm(1024, generator=torch.Generator().manual_seed(0))
    ahead = ReadAhead.for_call(td, ChunkPlan(1024, 0, chunksize=512, perm=perm))
    assert ahead is not None
    x_runs = ahead.pages(0)[0]
    rows = np.sort(perm[:512].numpy())  # row r of the view: page 2 r of the file
    assert x_runs.tolist() == [[2 * r, 2 * r + 1] for r in rows]


def test_nothing_to_read_ahead_gives_none(tmp_path: Path) -> None:
    td = _source(tmp_path)
    assert ReadAhead.for_call(td, ChunkPlan(512, 0, chunksize=1)) is None  # 4 KiB chunks
    plain = TensorDict({"x": torch.zeros(512, 1024)}, [512])
    assert ReadAhead.for_call(plain, ChunkPlan(512, 0, chunksize=128)) is None  # not a file
    wide = TensorDict({"x": torch.zeros(4, 512, 1024)}, [4, 512]).memmap_(tmp_path / "w")
    # rows along dim 1 interleave with those of the other index: not read ahead
    assert ReadAhead.for_call(wide, ChunkPlan(512, 1, chunksize=128)) is None


def test_a_cold_chunk_is_read_ahead_and_a_resident_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    td = _source(tmp_path)
    asked: list[int] = []
    monkeypatch.setattr(readahead._READER, "submit", lambda ahead, k: asked.append(k))
    ahead = ReadAhead.for_call(td, ChunkPlan(512, 0, chunksize=128))
    assert ahead is not None
    ahead.request(0)  # just written: resident, nothing asked
    assert asked == [] and not ahead.cold
    if not _evict(td):
        pytest.skip("this file system keeps its pages in memory")
    ahead.request(1)
    assert asked == [1] and ahead.cold
    assert ahead.read(1) == 128 + 1  # x: 128 pages; y: its 128 rows of 8 bytes share one page
    for _ in range(200):  # the reads complete in the background
        if pagecache.all_resident(td["x"][128:256].data_ptr(), 128 * PAGE):
            break
        time.sleep(0.01)
    assert pagecache.all_resident(td["x"][128:256].data_ptr(), 128 * PAGE)
    assert not pagecache.all_resident(td["x"][256:].data_ptr(), PAGE)  # the next chunk: not
    assert ahead.read(1) == 0  # resident now: nothing asked again


def test_the_parent_checks_samples_again_once_chunks_are_resident(tmp_path: Path) -> None:
    td = _source(tmp_path)
    ahead = ReadAhead.for_call(td, ChunkPlan(512, 0, chunksize=128))
    assert ahead is not None
    ahead.cold = True
    for k in range(readahead.WARM_AGAIN):  # everything is resident (just written)
        assert ahead.cold
        ahead.read(k % 4)
    assert not ahead.cold


@pytest.mark.parametrize("shuffle", [False, True])
def test_map_iter_over_a_cold_source_gives_the_same_results(tmp_path: Path, shuffle: bool) -> None:
    td = _source(tmp_path)
    expected = td["x"].sum(-1)
    _evict(td)
    kw = {"num_workers": 2, "chunksize": 128, "shuffle": shuffle, "generator": torch.Generator()}
    out = list(td.map_iter(reduce_sum, **kw))
    got = torch.cat([o["y"] for o in out])
    if shuffle:  # each chunk's rows in some order: compare the multisets
        got, expected = got.sort().values, expected.sort().values
    assert torch.equal(got, expected)


def test_a_worker_pool_reads_a_cold_source_right_every_epoch(tmp_path: Path) -> None:
    td = _source(tmp_path)
    expected = td["x"].sum(-1)
    with WorkerPool(2, generator=torch.Generator()) as pool:
        for _ in range(2):
            _evict(td)
            out = torch.cat([o["y"] for o in td.map_iter(reduce_sum, chunksize=128, pool=pool)])
            assert torch.equal(out, expected)


def test_rows_over_page_boundaries_ask_for_each_of_their_pages_once(tmp_path: Path) -> None:
    td = _source(tmp_path, rows=512, cols=1536)  # 6 KiB rows: most span two or three pages
    perm = torch.randperm(512, generator=torch.Generator().manual_seed(1))
    ahead = ReadAhead.for_call(td, ChunkPlan(512, 0, chunksize=128, perm=perm))
    assert ahead is not None
    if not _evict(td):
        pytest.skip("this file system keeps its pages in memory")
    rows = perm[:128].tolist()
    row_bytes = 1536 * 4
    pages = {p for r in rows for p in range(r * row_bytes // PAGE, -(-(r + 1) * row_bytes // PAGE))}
    y_pages = {r * 8 // PAGE for r in rows}  # the int64 leaf of the nested tensordict
    assert ahead.read(0) == len(pages) + len(y_pages)


def _smaps_flags(path: str) -> set[str]:
    flags, current = set(), False
    with open("/proc/self/smaps") as f:
        for line in f:
            if line[:1].isdigit() or line[:1] in "abcdef":
                current = line.rstrip().endswith(path)
            elif current and line.startswith("VmFlags:"):
                flags.update(line.split()[1:])
    return flags


def test_advise_access_marks_the_mappings_random_and_undoes_it(tmp_path: Path) -> None:
    td = _source(tmp_path)
    path = td["x"].filename
    readahead.advise_access(td, scattered=True)
    assert "rr" in _smaps_flags(path)
    readahead.advise_access(td, scattered=False)
    assert "rr" not in _smaps_flags(path)


def test_shuffled_calls_read_randomly_in_workers_and_later_calls_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    td = _source(tmp_path)
    monkeypatch.setenv("TD_TEST_MAPPED_FILE", td["x"].filename)
    with WorkerPool(2, generator=torch.Generator()) as pool:
        shuffled = list(td.map_iter(reads_randomly, chunksize=128, shuffle=True, pool=pool))
        assert all(bool(out["rr"].all()) for out in shuffled)
        in_order = list(td.map_iter(reads_randomly, chunksize=128, pool=pool))
        assert not any(bool(out["rr"].any()) for out in in_order)
    assert "rr" not in _smaps_flags(td["x"].filename)  # this process's own mapping: untouched


@pytest.mark.parametrize("shuffled", [False, True])
def test_resident_chunks_are_checked_one_in_a_stride_after_a_streak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shuffled: bool
) -> None:
    # every chunk is checked until WARM_STREAK in a row were resident, then one in WARM_STRIDE;
    # data that turns cold then is read ahead from the next chunk checked on
    td = _source(tmp_path, rows=16384, cols=256)  # 1 KiB rows, 64 chunks of 256 KiB
    checked: list[object] = []
    asked: list[int] = []
    real = readahead._Leaf.missing
    monkeypatch.setattr(
        readahead._Leaf, "missing", lambda leaf, index: checked.append(index) or real(leaf, index)
    )
    monkeypatch.setattr(readahead._READER, "submit", lambda ahead, k: asked.append(k))
    perm = torch.randperm(16384, generator=torch.Generator().manual_seed(0)) if shuffled else None
    plan = ChunkPlan(16384, 0, chunksize=256, perm=perm)
    ahead = ReadAhead.for_call(td, plan)
    assert ahead is not None
    streak, stride = readahead.WARM_STREAK, readahead.WARM_STRIDE
    requests = streak + 3 * stride
    for k in range(requests):
        ahead.request(k)
    want = list(range(streak)) + [streak + stride * j + stride - 1 for j in range(3)]
    # two leaves (x, then n.y) are checked per chunk while both are resident
    got = checked[::2]
    assert len(got) == len(want)
    for index, k in zip(got, want):
        assert (
            torch.equal(torch.as_tensor(plan.index(k)), torch.as_tensor(index))
            if shuffled
            else index == plan.index(k)
        )
    assert asked == [] and not ahead.cold
    if not _evict(td):
        pytest.skip("this file system keeps its pages in memory")
    for k in range(requests, requests + stride):
        ahead.request(k)
    assert asked == [requests + stride - 1] and ahead.cold  # the first chunk checked
    ahead.request(requests + stride)  # cold: every chunk goes to the reading thread
    assert asked == [requests + stride - 1, requests + stride]
    # resident again, and the reading thread said so: a call that met cold data still checks
    # every chunk (in a stream of cold data, the chunks the thread read look resident)
    for leaf in td.values(include_nested=True, leaves_only=True):
        leaf.sum()  # read every page back into the page cache
    ahead.cold = False
    checked.clear()
    first = requests + stride + 1
    for k in range(first, first + streak + stride):
        ahead.request(k)
    assert len(checked) == 2 * (streak + stride) and not ahead.cold
