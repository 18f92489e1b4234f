"""The metrics language: MQE, SkyWalking's Metrics Query Expression language
(its grammar, the syntax tree it is read into, its evaluation over a
``MetricReader`` and its operations, its results), and ``StoredMetrics``
(``stored.py``), the reader over a node's metrics storage. The query
endpoint and the alarm rules both evaluate through it; the names it speaks
of are ``skyoap.vocabulary``'s."""
