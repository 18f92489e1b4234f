"""SkyWalking's ``LogReportService``."""

from __future__ import annotations

from skyoap.model.records import LogRecord
from skyoap.proto.skywalking import logging_pb2
from skyoap.receiver.intake import log_record
from skyoap.receiver.skywalking.streams import RecordReportService


class LogReportService(RecordReportService):
    """Takes log lines: registers the service, instance and endpoint they name
    and stores each as a record."""

    KIND = "logs"

    def _record(self, pb: logging_pb2.LogData, now_ms: int) -> LogRecord:
        lim = self._limits
        timestamp = lim.time("timestamp", pb.timestamp, now_ms) if pb.timestamp else now_ms
        lim.at_most("bytes of a log body", pb.body.ByteSize(), lim.max_log_body_bytes, "--max-log-body-bytes")
        lim.at_most("tags of a log line", len(pb.tags.data), lim.max_tags_per_item, "--max-tags-per-item")
        kind = pb.body.WhichOneof("content") or "text"
        body = getattr(pb.body, kind)
        ctx = pb.traceContext
        service = lim.name("service", pb.service)
        instance = lim.name("serviceInstance", pb.serviceInstance, required=False)
        endpoint = lim.name("endpoint", pb.endpoint, required=False)
        trace_id = lim.name("traceId", ctx.traceId, required=False)
        segment_id = lim.name("traceSegmentId", ctx.traceSegmentId, required=False)
        return log_record(
            self._cardinality,
            self._log_tags,
            timestamp=timestamp,
            service=service,
            instance=instance,
            tags=[(kv.key, kv.value) for kv in pb.tags.data],
            content_type=kind,
            content=getattr(body, kind),
            endpoint=endpoint,
            trace_id=trace_id,
            segment_id=segment_id,
            span_id=ctx.spanId,
        )

    def _register(self, records: list[LogRecord]) -> None:
        for record in records:
            if record.instance:
                self._names.seen(record.service, record.instance)
            if record.endpoint:
                self._names.endpoints(record.service, [record.endpoint])
