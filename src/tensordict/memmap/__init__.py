"""Memory-mapped storage: MemoryMappedTensor, the on-disk format, and memmap_/load_memmap."""
