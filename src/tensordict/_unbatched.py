"""``tensordict._unbatched``: upstream's path of ``UnbatchedTensor``; re-exports only."""

from tensordict.tensorclass.coming import UnbatchedTensor

__all__ = ["UnbatchedTensor"]
