"""The metrics language: MQE, SkyWalking's Metrics Query Expression language
(its grammar, the syntax tree it is read into, its evaluation over a
``MetricReader`` and its operations), and the vocabulary it shares with the
query protocol: the catalogue of metric names (``catalogue.py``), durations
and steps (``duration.py``), entities and scopes (``entity.py``), the
protocol's ids (``ids.py``), and ``StoredMetrics`` (``stored.py``), the
reader over a node's metrics storage. The query endpoint and the alarm rules
both evaluate through it."""
