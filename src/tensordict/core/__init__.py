"""The in-memory data model: TensorDict, lazy stacks, non-tensor data."""
