"""SkyWalking's ``ProfileTask`` service: tasks served to agents, their dumps taken."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc

from skyoap.edge.errors import InvalidRequest
from skyoap.model.checks import Reason, Refused
from skyoap.model.metrics import minute_bucket
from skyoap.model.profiling import MAX_FRAMES, MAX_STACK_BYTES, Operation, ProfileTask
from skyoap.model.records import ProfileSnapshotRecord
from skyoap.model.stream import Text
from skyoap.proto.skywalking import common_pb2, profile_pb2
from skyoap.receiver.intake import Intake
from skyoap.receiver.profiling import ProfileTasks
from skyoap.receiver.skywalking.streams import NO_COMMANDS, RecordReportService
from skyoap.runtime import clock


class ProfileTaskService(RecordReportService):
    """SkyWalking's trace profiling, on the agents' side: each agent that polls
    is given its service's profiling tasks (``receiver/profiling.py``) that
    have not ended and that it does not have yet (created after the last it
    says it has), and each instance is logged NOTIFIED once per task; the
    thread dumps agents send are stored with their task (a dump of a task
    there is none of, numbered past what the task can take, or of a stack
    too deep or too large is refused); the end an agent reports is logged
    EXECUTION_FINISHED."""

    KIND = "profiles"

    def __init__(self, intake: Intake, tasks: ProfileTasks) -> None:
        super().__init__(intake)
        self._tasks = tasks

    def getProfileTaskCommands(
        self, request: profile_pb2.ProfileTaskCommandQuery, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        service, instance = self._source(request.service, request.serviceInstance)
        now = clock.now_ms()
        commands = []
        for task in self._tasks.of(service):
            if task.create_time > request.lastCommandTime and now < task.end_time:
                if not task.logged(instance, Operation.NOTIFIED):
                    self._tasks.log(task, instance, Operation.NOTIFIED)
                commands.append(_profile_command(task))
        return common_pb2.Commands(commands=commands)

    def _source(self, service: str, instance: str) -> tuple[str, str]:
        try:
            return self._limits.name("service", service), self._limits.name("serviceInstance", instance)
        except Refused as e:
            raise InvalidRequest(str(e)) from None

    def _record(self, pb: profile_pb2.ThreadSnapshot, now_ms: int) -> ProfileSnapshotRecord:
        lim = self._limits
        task = self._tasks.task(pb.taskId)
        if task is None:
            raise Refused(Reason.UNKNOWN_TASK, f"there is no profiling task {pb.taskId[:100]!r}")
        segment_id = lim.name("traceSegmentId", pb.traceSegmentId)
        dump_time = lim.time("time", pb.time, now_ms)
        if not 0 <= pb.sequence < task.max_dumps:
            raise Refused(
                Reason.OVER_LIMIT,
                f"dump {pb.sequence} of segment {segment_id[:100]}: task {task.id} dumps a request at "
                f"most {task.max_dumps} times, numbered from 0",
            )
        frames = pb.stack.codeSignatures
        lim.at_most("frames of a thread dump", len(frames), MAX_FRAMES, "skyoap's bound")
        lim.at_most("bytes of a thread dump", pb.stack.ByteSize(), MAX_STACK_BYTES, "skyoap's bound")
        return ProfileSnapshotRecord(
            time_bucket=minute_bucket(dump_time),
            snapshot_id=f"{segment_id}/{pb.sequence}",
            task_id=task.id,
            segment_id=segment_id,
            service=task.service,
            dump_time=dump_time,
            sequence=pb.sequence,
            stack=Text(json.dumps(list(frames))),
        )

    def collectSnapshot(
        self, requests: Iterator[profile_pb2.ThreadSnapshot], context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        return self.collect(requests, context)

    def reportTaskFinish(
        self, request: profile_pb2.ProfileTaskFinishReport, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        _, instance = self._source(request.service, request.serviceInstance)
        task = self._tasks.task(request.taskId)
        if task is not None and not task.logged(instance, Operation.EXECUTION_FINISHED):
            self._tasks.log(task, instance, Operation.EXECUTION_FINISHED)
        return NO_COMMANDS


def _profile_command(task: ProfileTask) -> common_pb2.Command:
    """The ``ProfileTaskQuery`` command SkyWalking's agents run a task by;
    its serial number is the task's, so that an agent given it twice runs it once."""
    args = {
        "SerialNumber": task.id,
        "TaskId": task.id,
        "EndpointName": task.endpoint,
        "Duration": task.minutes,
        "MinDurationThreshold": task.min_duration_ms,
        "DumpPeriod": task.dump_period_ms,
        "MaxSamplingCount": task.max_sampling_count,
        "StartTime": task.start_time,
        "CreateTime": task.create_time,
    }
    return common_pb2.Command(
        command="ProfileTaskQuery",
        args=[common_pb2.KeyStringValuePair(key=k, value=str(v)) for k, v in args.items()],
    )
