"""What every stage runs on: buffer queues, the drain pools that empty them,
the worker base, periodic tasks, retry, self-metrics and rate-limited logs."""
