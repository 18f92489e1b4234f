"""What every node role shares: buffer queues, consumer pools, the worker base,
stream data and the stream-processor wiring, and the node's configuration."""
