"""SkyWalking's ``ConfigurationDiscoveryService``."""

from __future__ import annotations

import grpc

from skyoap.proto.skywalking import common_pb2, configuration_pb2
from skyoap.receiver.skywalking.streams import NO_COMMANDS


class ConfigurationDiscoveryService:
    """No dynamic configuration is pushed: agents poll and get none."""

    def fetchConfigurations(
        self, request: configuration_pb2.ConfigurationSyncRequest, context: grpc.ServicerContext
    ) -> common_pb2.Commands:
        return NO_COMMANDS
