"""MQE, SkyWalking's Metrics Query Expression language: its grammar, the
syntax tree it is read into, and its evaluation over a ``MetricReader``."""
