"""An aggregator's alarms, built from the alarm section: the rules file,
watched for changes, evaluated over the entities this aggregator owns, and
the delivery of their notices."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from skyoap.aggregator.topics import Topics
from skyoap.alarm.config import AlarmConfig
from skyoap.alarm.delivery import Delivery
from skyoap.alarm.reload import SettingsFile
from skyoap.alarm.rounds import Alarms, AlarmStorage, Membership
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.lifecycle import Component
from skyoap.storage.select import OpenStorage


def alarms(
    config: AlarmConfig,
    storage: OpenStorage,
    topics: Topics | None,
    address: str,
    nodes: Callable[[], list[str]],
    instruments: Instruments,
) -> Iterator[Component]:
    """The alarms' components in start order (none without ``--alarm-settings``);
    ``address`` is this node's among the ``nodes`` of its cluster."""
    if not config.settings:
        return
    settings = SettingsFile(Path(config.settings), instruments, config.reload_s)
    yield settings
    delivery = Delivery(instruments, config.max_queued, config.hook_timeout_s)
    yield delivery  # closes after the evaluation: the last notices are sent
    yield Alarms(
        settings,
        AlarmStorage(storage.metrics, storage.state, storage.records, topics),
        Membership(address, nodes),
        delivery,
        instruments,
        config.settle_s,
    )
