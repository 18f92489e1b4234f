"""What touches a storage server: the DAO interfaces the workers call, and their
implementations (Elasticsearch with a Redis sequence allocator in production,
an embedded SQLite file by default)."""
