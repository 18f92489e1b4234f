"""The data model: stream data types (inventory, metrics, records), their
columns and ids, metrics math, and topic records. Imports nothing of ours."""
