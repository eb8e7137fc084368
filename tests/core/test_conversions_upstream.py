"""merge_tensordicts' callback (keys in every input, all values), tolist's options and
contiguous(canonical=True), with upstream 0.15's semantics."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict, merge_tensordicts


def test_merge_callback_sees_every_value_of_keys_present_everywhere() -> None:
    seen: list[int] = []

    def stack(*values: torch.Tensor) -> torch.Tensor:
        seen.append(len(values))
        return torch.stack(values)

    tds = [
        TensorDict({"all": i, "n": {f"k{i}": i}, "two": i} if i < 2 else {"all": i, "n": {}})
        for i in range(3)
    ]
    out = merge_tensordicts(*tds, callback_exist=stack)
    assert seen == [3] and out["all"].tolist() == [0, 1, 2]
    assert out["two"] == 0  # in two of three: the first value, no callback
    assert out["n", "k0"] == 0 and out["n", "k1"] == 1
    by_key = merge_tensordicts(*tds, callback_exist={"two": stack})
    assert by_key["all"] == 0 and by_key["two"] == 0


def _td() -> TensorDict:
    return TensorDict(
        a=torch.arange(8).view(2, 2, 2),
        b=TensorDict(c=torch.arange(8).view(2, 2, 2), batch_size=[2, 2, 2]),
        batch_size=[2, 2],
    )


def test_tolist_first_turns_nested_batch_dims_into_lists() -> None:
    first = _td().tolist(tolist_first=True)
    assert [e["c"].item() for e in first[1][0]["b"]] == [4, 5]
    plain = _td().tolist()
    assert plain[1][0]["b"]["c"].tolist() == [4, 5]
    converted = _td().tolist(tolist_first=True, convert_tensors=True)
    assert converted[1][1] == {"a": [6, 7], "b": [{"c": 6}, {"c": 7}]}


def test_tolist_convert_tensors_needs_convert_nodes() -> None:
    with pytest.raises(TypeError, match="convert_tensors requires convert_nodes"):
        _td().tolist(convert_nodes=False, convert_tensors=True)
    assert isinstance(_td().tolist(convert_nodes=False)[0][0], TensorDict)


def test_contiguous_canonical_fixes_strides_torch_calls_contiguous() -> None:
    odd = torch.empty_strided((1, 4, 5), (5, 5, 1)).copy_(torch.arange(20.0).view(1, 4, 5))
    assert odd.is_contiguous()
    plain = torch.randn(2, 3)
    td = TensorDict({"odd": odd, "plain": plain, "n": {"odd": odd}}, [])
    assert td.contiguous()["odd"].data_ptr() == odd.data_ptr()
    out = td.contiguous(canonical=True)
    for key in ("odd", ("n", "odd")):
        assert out[key].stride() == (20, 5, 1) and out[key].data_ptr() != odd.data_ptr()
        assert torch.equal(out[key], odd)
    assert out["plain"].data_ptr() == plain.data_ptr()
    assert td.contiguous(canonical=True, inplace=True) is td and td["odd"].stride() == (20, 5, 1)
