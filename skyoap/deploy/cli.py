"""The ``skyoap`` command."""

from __future__ import annotations

import argparse
import datetime
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from skyoap.deploy.options import add_options, config_from
from skyoap.deploy.servers import ServerError
from skyoap.remote.cluster import Role
from skyoap.runtime.process import Serving, prepare
from skyoap.storage.api import StorageError
from skyoap.storage.config import StorageConfig
from skyoap.wiring.config import NodeConfig

if TYPE_CHECKING:
    from skyoap.deploy.cluster import NodeProcess


def _node(args: argparse.Namespace) -> int:
    from skyoap.wiring.node import Node

    config = config_from(args, NodeConfig)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    node: Serving
    if config.server.processes > 1:
        from skyoap.deploy.supervisor import Supervisor

        node = Supervisor(config, args.log_level, stop).start()
    else:
        node = Node(config).start()
    # One line on stdout that scripts can wait for (the ports are real even when 0 was asked for).
    admin = f"{config.server.advertised_host}:{node.admin_port}" if node.admin_port else "-"
    internal = node.internal_address or "-"
    query = node.query_url or "-"
    print(
        f"skyoap node listening on {node.address} admin {admin} internal {internal} query {query}", flush=True
    )
    try:
        stop.wait()
    finally:
        node.close()
    return 0


def _demo(args: argparse.Namespace) -> int:
    from skyoap.deploy.demo import run_demo

    config = config_from(args, NodeConfig)
    if config.server.processes != 1:
        raise ValueError("skyoap demo runs its node in one process: --workers is for skyoap node")
    return run_demo(
        config,
        args.services,
        args.instances,
        args.heartbeat_s,
        args.duration_s,
        args.traces,
        args.serve,
    )


def _inventory(args: argparse.Namespace) -> int:
    from skyoap.deploy.inventory_table import print_inventory
    from skyoap.storage.select import open_storage

    config = config_from(args, StorageConfig)
    if _said_nothing_stored(config):
        return 0
    storage = open_storage(config)
    try:
        print_inventory(storage.inventory, sys.stdout, args.limit)
    finally:
        storage.close()
    return 0


def _query(args: argparse.Namespace) -> int:
    from skyoap.deploy.query import print_query
    from skyoap.storage.select import open_storage

    for name in ("minutes", "limit"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be 1 or more, not {getattr(args, name)}")
    config = config_from(args, StorageConfig)
    if _said_nothing_stored(config):
        return 0
    storage = open_storage(config)
    try:
        print_query(storage, args.what, args.service, args.minutes, args.limit, sys.stdout)
    finally:
        storage.close()
    return 0


def _said_nothing_stored(config: StorageConfig) -> bool:
    """Read-only commands create nothing: on a storage no node has installed,
    they say so and stop."""
    from skyoap.storage.select import nothing_stored

    missing = nothing_stored(config)
    if missing is not None:
        print(missing)
    return missing is not None


def _consumer(args: argparse.Namespace) -> int:
    from skyoap.deploy.consumer_table import print_consumers
    from skyoap.storage.select import topics_of

    config = config_from(args, StorageConfig)
    if _said_nothing_stored(config):
        return 0
    with topics_of(config) as (topics, state):
        print_consumers(topics, state, args.group, sys.stdout)
    return 0


SPARK_EXTRA = "skyoap spark needs Spark, which a node does not: pip install 'skyoap[spark]' (Java 17+ too)"


def _spark(args: argparse.Namespace) -> int:
    try:
        from pyspark.errors import PySparkException
    except ImportError:
        print(SPARK_EXTRA, file=sys.stderr)
        return 2

    from skyoap.analytics import jobs
    from skyoap.analytics.source import options_of
    from skyoap.analytics.spark import session
    from skyoap.deploy.tables import table

    storage = options_of(config_from(args, StorageConfig))
    spark = session(args.master, f"skyoap {args.job}")
    try:
        if args.job == "slowest-endpoints":
            rows = jobs.slowest_endpoints(spark, storage, args.minutes, args.top)
            print(table(
                ["service", "rank", "endpoint", "calls", "errors", "avg (ms)", "p99 (ms)"],
                [(r.service, r.rank, r.endpoint, r.calls, r.errors, f"{r.latency_avg_ms:.1f}", r.p99_ms)
                 for r in rows],
            ))  # fmt: skip
        elif args.job == "dependencies":
            edges = jobs.dependencies(spark, storage, args.minutes)
            print(table(
                ["caller", "callee", "calls", "errors", "error rate"],
                [(e.source, e.dest, e.calls, e.errors, f"{e.error_rate:.2%}") for e in edges],
            ))  # fmt: skip
        else:

            def report(s: jobs.Spike) -> None:
                print(f"spike: {s.service} at minute {s.minute}: {s.errors}/{s.calls} calls failed "
                      f"({s.error_rate:.1%}; the {s.baseline:.1%} before)", flush=True)  # fmt: skip

            detector = jobs.SpikeDetector(report, args.threshold, args.factor, args.min_calls)
            query = jobs.error_spikes(
                spark, storage, detector, args.checkpoint, "earliest" if args.from_beginning else "latest",
                args.available_now,
            )  # fmt: skip
            try:
                query.awaitTermination()
            except KeyboardInterrupt:
                query.stop()
    except PySparkException as e:
        # What went wrong is the Python error the job raised, deep in Spark's report.
        raise ValueError(python_error(str(e))) from e
    finally:
        spark.stop()
    return 0


def python_error(report: str) -> str:
    """The last ``SomeError: message`` line of a Spark error report (the whole
    first line when it has none)."""
    errors = re.findall(r"^(?:\w+\.)*(\w*(?:Error|Exception|Refused|OutOfRange): .+)$", report, re.MULTILINE)
    return errors[-1] if errors else report.splitlines()[0]


def _cluster_status(args: argparse.Namespace) -> int:
    from skyoap.deploy.cluster import LocalCluster
    from skyoap.deploy.tables import table
    from skyoap.remote.cluster import RedisCluster

    url, prefix = args.redis_url, args.redis_key_prefix
    if url is None:
        local = LocalCluster.load(Path(args.dir))
        url, prefix = local.state.redis_url, local.state.prefix
    members = RedisCluster(url, prefix or "skyoap", ca=args.redis_ca or "").members()
    rows = [
        (m.name, m.role, m.address, m.internal or "-", m.identity or "-", _utc(m.started_at), m.admin or "-")
        for m in members
    ]
    print(table(["name", "role", "address", "internal", "identity", "started (UTC)", "admin"], rows))
    targets = [m.internal or m.address for m in members if m.role != "receiver"]
    print(f"\n{len(members)} nodes; L1 results go to: {', '.join(targets) or 'nobody'}")
    return 0


def _utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _say_started(node: NodeProcess) -> None:
    print(
        f"started {node.name} (pid {node.pid}, admin http://{node.admin}/metrics, queries {node.query}, "
        f"log {node.log})"
    )


def _cluster_up(args: argparse.Namespace) -> int:
    from skyoap.deploy.cluster import LocalCluster

    cluster = LocalCluster.up(Path(args.dir), args.node_option)
    print(f"redis {cluster.state.redis_url}, elasticsearch {cluster.state.es_hosts}")
    for role, count in (
        ("aggregator", args.aggregators),
        ("mixed", args.mixed),
        ("receiver", args.receivers),
    ):
        for _ in range(count):
            node = cluster.add(role)
            _say_started(node)
    return 0


def _cluster_add(args: argparse.Namespace) -> int:
    from skyoap.deploy.cluster import LocalCluster

    node = LocalCluster.load(Path(args.dir)).add(args.role)
    _say_started(node)
    return 0


def _cluster_remove(args: argparse.Namespace) -> int:
    from skyoap.deploy.cluster import LocalCluster

    cluster = LocalCluster.load(Path(args.dir))
    matching = [n for n in cluster.nodes() if args.node in (n.role, n.name)]
    if not matching:
        names = ", ".join(n.name for n in cluster.nodes()) or "none"
        raise ValueError(f"no node {args.node!r} in this cluster (its nodes: {names})")
    node = matching[-1]
    cluster.remove(node, kill=args.kill)
    print(f"{'killed' if args.kill else 'stopped'} {node.name}")
    return 0


def _cluster_down(args: argparse.Namespace) -> int:
    from skyoap.deploy.cluster import LocalCluster

    LocalCluster.load(Path(args.dir)).down()
    print("cluster stopped")
    return 0


LOGGING = argparse.ArgumentParser(add_help=False)
LOGGING.add_argument(
    "--log-level",
    default=os.environ.get("SKYOAP_LOG_LEVEL", "INFO"),
    help="DEBUG, INFO, WARNING or ERROR [$SKYOAP_LOG_LEVEL, default: INFO]",
)


def _add_cluster_commands(sub: argparse._SubParsersAction) -> None:
    cluster = sub.add_parser(
        "cluster",
        parents=[LOGGING],
        help="run a local cluster, scale its roles, or show any cluster's members",
        description="Run a local cluster (Redis, Elasticsearch and nodes, each its own process), add or "
        "remove nodes of any role while it runs, stop it; or list the live members of any cluster.",
    )
    csub = cluster.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--dir", default="skyoap-cluster", help="where a local cluster keeps its state and logs"
    )

    status = csub.add_parser(
        "status", parents=[where], help="the live nodes: name, role, address, start time"
    )
    status.add_argument(
        "--redis-url",
        default=os.environ.get("SKYOAP_REDIS_URL"),
        help="the cluster's Redis (better given as $SKYOAP_REDIS_URL when it holds a password; "
        "default: the local cluster's in --dir)",
    )
    status.add_argument("--redis-key-prefix", help="its key prefix [default: skyoap]")
    status.add_argument("--redis-ca", help="CA certificate of a rediss:// Redis")
    status.set_defaults(run=_cluster_status)

    up = csub.add_parser("up", parents=[where], help="start Redis, Elasticsearch and the nodes")
    up.add_argument("--receivers", type=int, default=2, help="receiver nodes [default: 2]")
    up.add_argument("--aggregators", type=int, default=2, help="aggregator nodes [default: 2]")
    up.add_argument("--mixed", type=int, default=0, help="mixed nodes [default: 0]")
    up.add_argument(
        "--node-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="passed to every node, e.g. --node-option=--inventory-selector=hash (repeatable)",
    )
    up.set_defaults(run=_cluster_up)

    add = csub.add_parser("add", parents=[where], help="start one more node of a role")
    add.add_argument("role", choices=[r.value for r in Role])
    add.set_defaults(run=_cluster_add)

    remove = csub.add_parser(
        "remove", parents=[where], help="stop a node: the newest of a role, or one by name"
    )
    remove.add_argument("node", help="a role (the newest node of it goes) or a node name")
    remove.add_argument("--kill", action="store_true", help="SIGKILL instead of a graceful SIGTERM")
    remove.set_defaults(run=_cluster_remove)

    down = csub.add_parser("down", parents=[where], help="stop every node and the servers")
    down.set_defaults(run=_cluster_down)


def _add_node_commands(sub: argparse._SubParsersAction) -> None:
    """``node`` and ``demo``: the commands that run a node."""
    node = sub.add_parser(
        "node", parents=[LOGGING], help="run a node until SIGINT or SIGTERM", description="Run a node."
    )
    add_options(node, NodeConfig)
    node.set_defaults(run=_node)

    demo = sub.add_parser(
        "demo",
        parents=[LOGGING],
        help="run a mixed node and simulated agents, then print the inventory and metrics",
        description="Run a mixed node (a temporary embedded storage unless told otherwise) and simulated "
        "agents that register, heart-beat and report traces; print the registered inventory and the "
        "services' metrics at the end.",
    )
    demo.add_argument("--services", type=int, default=10, help="services to simulate [default: 10]")
    demo.add_argument("--instances", type=int, default=4, help="instances (agents) per service [default: 4]")
    demo.add_argument("--heartbeat-s", type=float, default=1.0, help="heartbeat interval [default: 1]")
    demo.add_argument("--traces", type=int, default=2000, help="traces to report [default: 2000]")
    demo.add_argument("--duration-s", type=float, default=3.0, help="how long agents heart-beat [default: 3]")
    demo.add_argument(
        "--serve",
        action="store_true",
        help="keep the node up, its services reporting, until Ctrl-C, its web UI at the query port "
        "(12800 unless --query-port says otherwise)",
    )
    add_options(demo, NodeConfig)
    demo.set_defaults(run=_demo)


def _add_read_commands(sub: argparse._SubParsersAction) -> None:
    """``inventory``, ``query`` and ``consumer``: what a storage holds, printed."""
    inventory = sub.add_parser(
        "inventory",
        parents=[LOGGING],
        help="print the registered services, instances, endpoints and addresses",
        description="Print the inventory a storage holds (the storage options say which).",
    )
    inventory.add_argument("--limit", type=int, default=10_000, help="rows per table [default: 10000]")
    add_options(inventory, StorageConfig)
    inventory.set_defaults(run=_inventory)

    query = sub.add_parser(
        "query",
        parents=[LOGGING],
        help="print services, instances, endpoints, their relations or recent segments with their metrics",
        description="Print what agents reported over the last minutes, as a table: calls, calls per "
        "minute (cpm), errors, the share of calls that succeeded (sla), their mean time (resp_time) and "
        "percentiles per entity, and each service's apdex, busiest first; or the newest trace segments. "
        "Relations are between services (both sides), their instances and their endpoints (as the "
        "callee saw them). The storage options say which storage to read.",
    )
    query.add_argument(
        "what",
        choices=[
            "services", "instances", "endpoints", "relations", "instance-relations", "endpoint-relations",
            "segments",
        ],
    )  # fmt: skip
    query.add_argument("--service", help="only this service (for relations: calls it made)")
    query.add_argument("--minutes", type=int, default=15, help="how far back to look [default: 15]")
    query.add_argument("--limit", type=int, default=50, help="rows at most [default: 50]")
    add_options(query, StorageConfig)
    query.set_defaults(run=_query)

    consumer = sub.add_parser(
        "consumer",
        parents=[LOGGING],
        help="print the topics and the consumer groups: members, assignments, committed offsets, lag",
        description="Print each topic's partitions (start and end offsets) and each consumer group's "
        "members, which partitions they hold, and per partition its state, committed offset and lag. "
        "The storage options say which storage to read.",
    )
    consumer.add_argument("--group", help="only this consumer group")
    add_options(consumer, StorageConfig)
    consumer.set_defaults(run=_consumer)


def _add_dashboards_command(sub: argparse._SubParsersAction) -> None:
    dashboards = sub.add_parser(
        "dashboards",
        parents=[LOGGING],
        help="list the dashboards users changed in SkyWalking's UI, or reset them to skyoap's",
        description="List the dashboards users added, changed or disabled through SkyWalking's UI "
        "(kept in the storage, which the storage options name), or reset them: a dashboard of skyoap's "
        "is shipped again, one a user added is removed.",
    )
    dashboards.add_argument("action", choices=["list", "reset"])
    dashboards.add_argument("ids", nargs="*", help="reset only these (every changed one if none)")
    add_options(dashboards, StorageConfig)
    dashboards.set_defaults(run=_dashboards)


def _dashboards(args: argparse.Namespace) -> int:
    from skyoap.query.ui import templates as ui_templates
    from skyoap.storage.select import topics_of

    config = config_from(args, StorageConfig)
    if _said_nothing_stored(config):
        return 0
    with topics_of(config) as (_, state):
        if args.action == "reset":
            for id_ in ui_templates.reset(state, args.ids or None):
                print(f"reset {id_}")
            return 0
        for t in ui_templates.templates(state).values():
            if t.changed:
                layer, entity, name = t.key()
                what = "disabled" if t.disabled else "changed" if t.shipped else "added"
                print(f"{t.id}\t{what}\t{layer}\t{entity}\t{name}")
    return 0


def _add_profile_command(sub: argparse._SubParsersAction) -> None:
    profile = sub.add_parser(
        "profile",
        parents=[LOGGING],
        help="create a trace profiling task, list the tasks, or print a task's analysis",
        description="Trace profiling with SkyWalking's agents: 'create' asks the agents of a service to "
        "dump the thread stack of its endpoint's slow requests from now on; 'list' prints the tasks "
        "with what each instance logged; 'analyze TASK' prints, for each segment the task profiled, "
        "its stack tree with each frame's time, time without its children and dumps. The storage "
        "options name the storage, shared with the nodes.",
    )
    profile.add_argument("action", choices=["create", "list", "analyze"])
    profile.add_argument("task", nargs="?", help="the task to analyze")
    profile.add_argument("--service", help="the service (of create; list: only its tasks)")
    profile.add_argument("--endpoint", help="the endpoint whose requests to profile (of create)")
    for flag, default, what in (
        ("--minutes", 5, "how long the task runs, 1 to 15"),
        ("--min-duration-ms", 0, "how long a request runs before its thread is dumped"),
        ("--dump-period-ms", 10, "time between two dumps, at least 10"),
        ("--max-sampling-count", 5, "requests each instance profiles, 1 to 9"),
    ):
        profile.add_argument(flag, type=int, default=default, help=f"{what} [default: {default}]")
    add_options(profile, StorageConfig)
    profile.set_defaults(run=_profile)


def _profile(args: argparse.Namespace) -> int:
    from skyoap.aggregator.config import TtlConfig
    from skyoap.deploy import profiling
    from skyoap.query.context import QueryContext
    from skyoap.query.profiling import TaskSettings
    from skyoap.storage.select import open_storage

    if args.action == "create" and not (args.service and args.endpoint):
        raise ValueError("profile create needs --service and --endpoint")
    if args.action == "analyze" and not args.task:
        raise ValueError("profile analyze needs the task's id (profile list shows them)")
    config = config_from(args, StorageConfig)
    if args.action != "create" and _said_nothing_stored(config):
        return 0
    storage = open_storage(config)
    try:
        if args.action == "create":
            settings = TaskSettings(
                args.minutes, args.min_duration_ms, args.dump_period_ms, args.max_sampling_count
            )
            records_days = TtlConfig().records_days
            return profiling.create(storage, records_days, args.service, args.endpoint, settings, sys.stdout)
        if args.action == "list":
            profiling.print_tasks(storage, args.service, sys.stdout)
        else:
            context = QueryContext(
                storage.inventory, storage.metrics, storage.records, TtlConfig().ttl(), storage.state
            )
            profiling.print_analysis(context, args.task, sys.stdout)
    finally:
        storage.close()
    return 0


def _add_spark_command(sub: argparse._SubParsersAction) -> None:
    spark = sub.add_parser(
        "spark",
        parents=[LOGGING],
        help="run an analyst's Spark job: slowest-endpoints, dependencies or error-spikes",
        description="Run a Spark job over what the pipeline persisted, locally by default or on a "
        "cluster by its master URL. slowest-endpoints and dependencies print a table of the last "
        "--minutes; error-spikes follows the metrics topic and prints each spike until stopped "
        "(or, with --available-now, until it has read what is there).",
    )
    spark.add_argument("job", choices=["slowest-endpoints", "dependencies", "error-spikes"])
    spark.add_argument("--master", default="local[2]", help="Spark master URL [default: local[2]]")
    spark.add_argument("--minutes", type=int, default=60, help="the window, in minutes [default: 60]")
    spark.add_argument("--top", type=int, default=5, help="endpoints per service [default: 5]")
    spark.add_argument("--threshold", type=float, default=0.2, help="error rate of a spike [default: 0.2]")
    spark.add_argument("--factor", type=float, default=3.0, help="times the baseline [default: 3]")
    spark.add_argument("--min-calls", type=int, default=10, help="calls a spike's minute has [default: 10]")
    spark.add_argument(
        "--checkpoint", default="skyoap-data/spark/error-spikes", help="error-spikes' checkpoint directory"
    )
    spark.add_argument("--from-beginning", action="store_true", help="error-spikes starts at the earliest")
    spark.add_argument("--available-now", action="store_true", help="error-spikes stops when caught up")
    add_options(spark, StorageConfig)
    spark.set_defaults(run=_spark)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skyoap",
        description="A SkyWalking-style telemetry ingestion pipeline. Every option can also be set "
        "in the environment as SKYOAP_<OPTION> (e.g. SKYOAP_STORAGE=elasticsearch).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _add_node_commands(sub)
    _add_read_commands(sub)
    _add_dashboards_command(sub)
    _add_profile_command(sub)
    _add_spark_command(sub)
    _add_cluster_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    prepare(str(args.log_level))
    try:
        return int(args.run(args))
    except (ValueError, OSError, StorageError, ServerError) as e:
        print(f"skyoap {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
