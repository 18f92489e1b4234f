"""What the query protocol, the metrics languages (MQE, PromQL), the alarm
rules and the command line all speak of: what a metric of the catalogue
is (each layer lists its own: ``skyoap.layers``) and each model's entity
columns (``catalogue.py``),
durations and steps (``duration.py``), entities and scopes (``entity.py``),
the protocol's ids, profiling tasks' among them (``ids.py``), what names
an alarm (``alarm_identity.py``), and how long data is kept (``ttl.py``)."""
