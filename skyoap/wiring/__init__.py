"""The wiring of a node: its configuration, the worker chains each role runs,
and the node that starts and closes them in order."""
