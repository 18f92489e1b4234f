"""Consumers of the topics L2 persists: the consumer-group coordinator
(``consumer/group.py``) and the consumer client (``consumer/client.py``, the
face users call), whose work is split the way aiokafka splits its consumer:
the shared subscription state (``consumer/subscription.py``), the fetcher
(``consumer/fetcher.py``) and the group membership (``consumer/membership.py``)."""
