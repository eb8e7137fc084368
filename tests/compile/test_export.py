"""torch.export of modules that build or take tensordicts, with symbolic batch sizes."""

from __future__ import annotations

import torch

from tensordict import TensorDict
from tensordict.nn import TensorDictParams


class _Build(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> TensorDict:
        return TensorDict({"x": x, "y": x * 2}, batch_size=[x.shape[0], x.shape[1]])


class _BuildScalar(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> TensorDict:
        return TensorDict({"x": x}, batch_size=x.shape[0])


def test_a_symbolic_batch_size_is_exported_and_taken_from_the_inputs() -> None:
    batch = torch.export.Dim("batch", min=1)
    ep = torch.export.export(_Build(), (torch.randn(2, 6, 8),), dynamic_shapes=({0: batch},))
    out = ep.module()(torch.randn(4, 6, 8))
    assert out.batch_size == torch.Size([4, 6]) and torch.equal(out["y"], out["x"] * 2)
    scalar = torch.export.export(
        _BuildScalar(), (torch.zeros(2, 3),), strict=False, dynamic_shapes=({0: batch},)
    )
    assert scalar.module()(torch.zeros(5, 3)).batch_size == torch.Size([5])


def test_exported_module_with_tensordict_params_keeps_its_parameters() -> None:
    class Stacked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            net = torch.nn.Sequential(torch.nn.Linear(3, 4))
            self.params = TensorDictParams(TensorDict.from_module(net).data.expand(2).clone())
            self.net = torch.nn.Sequential(torch.nn.Linear(3, 4, device="meta"))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            outs = []
            for p in self.params.unbind(0):
                with p.to_module(self.net, preserve_module_state=False):
                    outs.append(self.net(x))
            return torch.stack(outs)

    m = Stacked()
    x = torch.randn(3)
    ep = torch.export.export(m, (), {"x": x}, strict=False)
    assert all(type(p) is torch.nn.Parameter for p in m.params.values(True, True))
    torch.testing.assert_close(ep.module()(x=x), m(x))
