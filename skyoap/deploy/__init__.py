"""How skyoap runs: the command line, node assembly by role, and the scripts that
fetch and start Elasticsearch and Redis for development, tests and benchmarks."""
