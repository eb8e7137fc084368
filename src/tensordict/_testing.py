"""``tensordict._testing``: tensorclasses that distributed tests send between processes.

They live in the package so that every process (``spawn`` included) imports them by name, as
``from_remote_init`` and ``broadcast`` rebuild a tensorclass from its ``module.QualName``.
"""

from __future__ import annotations

import torch

from tensordict.tensorclass import tensorclass

__all__ = ["MyDistData"]


@tensorclass
class MyDistData:
    """Two tensor fields, to check that a tensorclass arrives as itself.

    Examples:
        >>> data = MyDistData(a=torch.zeros(3), b=torch.ones(3, 2), batch_size=[3])
        >>> data.b.shape
        torch.Size([3, 2])
    """

    a: torch.Tensor
    b: torch.Tensor
