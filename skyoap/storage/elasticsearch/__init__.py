"""The production storage: a real Elasticsearch server, one index per model."""
