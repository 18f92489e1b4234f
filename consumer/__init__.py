"""Consumers of the topics L2 persists: the consumer-group coordinator and the
consumer client (``consumer/group.py``, ``consumer/client.py``)."""
