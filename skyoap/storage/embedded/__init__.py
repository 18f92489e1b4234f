"""The embedded storage, the default: one SQLite file, no server, one node."""
