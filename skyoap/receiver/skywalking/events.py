"""SkyWalking's ``EventService``."""

from __future__ import annotations

from skyoap.model.checks import Reason, Refused
from skyoap.model.layers import LAYERS
from skyoap.model.metrics import minute_bucket
from skyoap.model.records import EventRecord
from skyoap.model.stream import Text
from skyoap.proto.skywalking import event_pb2
from skyoap.receiver.skywalking.streams import RecordReportService


class EventService(RecordReportService):
    """Takes events: each report (of an event's start, its end, or both) is
    stored as a record of its own; the reports of one event share its uuid
    and are merged when read. The names an event carries are not registered:
    an event says something happened to a service, not that it reports."""

    KIND = "events"

    def _record(self, pb: event_pb2.Event, now_ms: int) -> EventRecord:
        lim = self._limits
        start = lim.time("startTime", pb.startTime, now_ms) if pb.startTime else 0
        end = lim.time("endTime", pb.endTime, now_ms) if pb.endTime else 0
        if not start and not end:
            raise Refused(Reason.MISSING_TIME, "an event has neither a startTime nor an endTime")
        if start and end and end < start:
            raise Refused(Reason.END_BEFORE_START, f"an event ends ({end}) before it starts ({start})")
        if not pb.layer:
            raise Refused(
                Reason.MISSING_NAME, "an event's layer is empty: events name their layer (GENERAL, ...)"
            )
        if pb.layer not in LAYERS:
            raise Refused(Reason.UNKNOWN_ENUM, f"layer {pb.layer[:100]!r} is none of SkyWalking's layers")
        if pb.type not in event_pb2.Type.values():
            raise Refused(Reason.UNKNOWN_ENUM, f"event type {pb.type} is not Normal (0) or Error (1)")
        message = pb.message.encode()
        lim.at_most(
            "bytes of an event's message", len(message), lim.max_log_body_bytes, "--max-log-body-bytes"
        )
        lim.at_most(
            "parameters of an event", len(pb.parameters), lim.max_tags_per_item, "--max-tags-per-item"
        )
        source = pb.source
        uuid_ = lim.name("uuid", pb.uuid)
        service = lim.name("service", source.service)
        instance = lim.name("serviceInstance", source.serviceInstance, required=False)
        endpoint = lim.name("endpoint", source.endpoint, required=False)
        service, instance = self._cardinality.source(service, instance)
        return EventRecord(
            time_bucket=minute_bucket(start or end),
            event_id=f"{uuid_}/{start}/{end}",
            uuid=uuid_,
            service=service,
            instance=instance,
            endpoint=self._cardinality.endpoint(service, endpoint) if endpoint else "",
            name=lim.name("name", pb.name),
            type=event_pb2.Type.Name(pb.type),
            message=Text(pb.message),
            parameters=dict(pb.parameters),
            start_time=start,
            end_time=end,
            timestamp=start or end,
            layer=pb.layer,
        )
