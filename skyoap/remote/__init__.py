"""What crosses between nodes: cluster membership, the remote client set and its
selectors, the remote worker that routes L1 results to their owner node."""
