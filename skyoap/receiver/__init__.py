"""What takes agent traffic: the gRPC services agents call, their validation,
the inventory cache in front of storage, and the L1 workers."""
