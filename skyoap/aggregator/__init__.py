"""What merges and persists: the L2 workers and the housekeeping of stored rows."""
