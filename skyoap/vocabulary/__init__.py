"""What the query protocol, the metrics languages (MQE, PromQL), the alarm
rules and the command line all speak of: the catalogue of metrics by
SkyWalking's names and each model's entity columns (``catalogue.py``),
durations and steps (``duration.py``), entities and scopes (``entity.py``),
the protocol's ids, profiling tasks' among them (``ids.py``), and what
names an alarm (``alarm_identity.py``)."""
