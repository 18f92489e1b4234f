"""Alarms: SkyWalking's alarm rules evaluated over the minute metrics, on the
aggregator that owns each entity, and their notices sent to hooks."""
