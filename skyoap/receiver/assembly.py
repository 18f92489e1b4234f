"""A receiver, built from its sections (limits and analysis) and what the
node hands it: registration, SkyWalking's v3 services and OTLP on the
agents' server, over one intake."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from skyoap.edge.server import GrpcServer
from skyoap.mal.evaluation import Batch
from skyoap.model.inventory import EndpointInventory, Inventory, ServiceInstanceInventory, ServiceInventory
from skyoap.receiver import sampling
from skyoap.receiver.aliases import AliasCache
from skyoap.receiver.cache import InventoryCache
from skyoap.receiver.cardinality import Cardinality, GroupingRules, NameBound, seed_from, services_from
from skyoap.receiver.config import AnalysisConfig, LimitsConfig
from skyoap.receiver.intake import Intake, Sinks
from skyoap.receiver.meter_analysis import MeterAnalyzer
from skyoap.receiver.otlp import add_otlp_services
from skyoap.receiver.profiling import ProfileTasks
from skyoap.receiver.prometheus import Scraper, Shares
from skyoap.receiver.registration import Limits, NamesByService, Registrar
from skyoap.receiver.services import add_agent_services
from skyoap.receiver.skywalking import add_skywalking_services
from skyoap.runtime import clock
from skyoap.runtime.budget import Overloaded
from skyoap.runtime.instruments import Instruments
from skyoap.runtime.lifecycle import Component
from skyoap.runtime.watched import WatchedFile
from skyoap.runtime.worker import Worker
from skyoap.storage.api import InventoryDAO
from skyoap.storage.select import OpenStorage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Handed:
    """What the node hands its receiver."""

    server: GrpcServer
    """The agents' server, where the services go."""
    storage: OpenStorage
    cache: InventoryCache
    """The ids of the names agents report."""
    reads: InventoryDAO
    """The inventory as an agent's call reads it, within the call's deadline."""
    register: Callable[[type[Inventory]], Worker[Inventory]]
    """The first worker of each inventory chain: where new names go."""
    sinks: Sinks
    instruments: Instruments
    resend_after_s: float
    """How long a name without an id waits before it is handed to L1 again."""
    me: str
    """This node's name in its cluster."""
    scrapers: Callable[[], list[str]]
    """The names of the cluster's live nodes that take agents, which share
    the scrape targets."""


def receiver(limits: LimitsConfig, analysis: AnalysisConfig, handed: Handed) -> Iterator[Component]:
    """The receiver's components in start order (the services are on
    ``handed.server`` from the start; the server starts after these)."""
    h = handed
    cardinality = _cardinality(limits, h.cache, h.reads, h.instruments)
    registrar = Registrar(h.cache, h.register, _registration(limits, h.resend_after_s), cardinality)
    add_agent_services(h.server, registrar)
    names = NamesByService(registrar)
    meters = MeterAnalyzer(analysis.rule_files(), limits.items(), cardinality, h.instruments)
    intake = Intake(names, h.sinks, limits.items(), cardinality, h.instruments, meters, analysis.log_tags())
    aliases = AliasCache(
        h.storage.metrics, limits.max_network_addresses, analysis.alias_refresh_s, h.instruments
    )
    tasks = ProfileTasks(h.storage.state)
    sampler = None
    if analysis.trace_sampling_settings:
        policies = WatchedFile(
            Path(analysis.trace_sampling_settings),
            sampling.load,
            h.instruments,
            analysis.trace_sampling_reload_s,
            ("skyoap_trace_sampling_settings_errors_total", "sampling settings refused when read again"),
            sampling.Policies.describe,
        )
        sampler = sampling.Sampler(policies, h.instruments, tasks.of)
        yield policies
    segments = add_skywalking_services(
        h.server,
        intake,
        tasks,
        aliases,
        analysis.apdex(),
        analysis.searchable_tags(),
        analysis.slow(),
        sampler,
    )
    yield aliases  # read from storage before the first call: aliases survive restarts
    yield names
    yield add_otlp_services(h.server, segments, intake, analysis.otlp_caller_wait_s)
    targets = analysis.scrape_targets()
    if targets:
        shares = Shares(h.me, h.scrapers)
        yield Scraper(targets, functools.partial(_scraped, meters, h.sinks), h.instruments, shares)


def _scraped(meters: MeterAnalyzer, sinks: Sinks, batch: Batch) -> None:
    """Hands on what the meter rules make of a scrape; a scrape the node has
    no room for is left out (its counters carry on at the next)."""
    made = meters.analyze(batch, clock.now_ms())
    if made:
        try:
            sinks.take((), made)
        except Overloaded as e:
            log.warning("a scrape's %d meter values left out: %s", len(made), e)


def _registration(limits: LimitsConfig, resend_after_s: float) -> Limits:
    return Limits(limits.max_name_length, limits.max_batch_items, limits.max_properties_chars, resend_after_s)


def _cardinality(
    limits: LimitsConfig, cache: InventoryCache, reads: InventoryDAO, instruments: Instruments
) -> Cardinality:
    """The bounds on names, each seeded with what storage holds."""

    def service_id(name: str) -> int | None:
        return cache.ids(ServiceInventory, [name]).get(name)

    def per_service(kind: str, most: int, model: type[Inventory]) -> NameBound:
        seed = seed_from(reads.names_of_service, service_id, model, most)
        return NameBound(kind, most, f"--max-{kind}s-per-service", instruments, seed)

    groups = GroupingRules.load(limits.endpoint_groups) if limits.endpoint_groups else GroupingRules()
    return Cardinality(
        groups,
        per_service("endpoint", limits.max_endpoints_per_service, EndpointInventory),
        per_service("instance", limits.max_instances_per_service, ServiceInstanceInventory),
        NameBound("network address", limits.max_network_addresses, "--max-network-addresses", instruments),
        NameBound(
            "service",
            limits.max_services,
            "--max-services",
            instruments,
            services_from(reads.list, limits.max_services),
        ),
    )
