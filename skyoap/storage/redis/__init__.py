"""The production global lock and sequence allocator, on Redis."""
