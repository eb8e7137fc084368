"""_from_shared_nontensor: plain values back from multiprocessing shared objects."""

from __future__ import annotations

import multiprocessing as mp

from tensordict.tensorclass import _from_shared_nontensor


def test_shared_value_and_char_array():
    assert _from_shared_nontensor(mp.Value("d", 2.5)) == 2.5
    assert _from_shared_nontensor(mp.Array("c", b"abc\x00\x00")) == "abc"


def test_manager_proxies_become_plain_containers():
    with mp.Manager() as manager:
        as_list = _from_shared_nontensor(manager.list([1, 2]))
        as_dict = _from_shared_nontensor(manager.dict(a=1))
    assert as_list == [1, 2] and type(as_list) is list
    assert as_dict == {"a": 1} and type(as_dict) is dict


def test_other_values_pass_through():
    marker = object()
    assert _from_shared_nontensor(marker) is marker
