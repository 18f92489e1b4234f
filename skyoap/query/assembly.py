"""The query endpoint, built from the query section: SkyWalking's query
protocol and PromQL over what storage holds, with the status pages the
node adds."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from skyoap.edge.admin import MOST_CONNECTIONS
from skyoap.edge.auth import HttpAuth
from skyoap.edge.http import ConnectionLimits
from skyoap.edge.tls import HttpsTls
from skyoap.query.config import QueryConfig
from skyoap.query.context import QueryContext
from skyoap.query.execution import Execution
from skyoap.query.promql.api import PromQLApi
from skyoap.query.resolvers import resolvers
from skyoap.query.server import QueryServer
from skyoap.query.status import StatusPage, ttl_page
from skyoap.runtime import descriptors
from skyoap.runtime.admission import Admission
from skyoap.runtime.instruments import Instruments
from skyoap.storage.select import OpenStorage
from skyoap.vocabulary.ttl import TimesToLive

log = logging.getLogger(__name__)


def query_endpoint(
    config: QueryConfig,
    storage: OpenStorage,
    ttl: TimesToLive,
    instruments: Instruments,
    pages: Mapping[str, StatusPage],
) -> QueryServer:
    """The endpoint, serving ``pages`` beside its own (``/status/config/ttl``)."""
    q = config
    # What a query reads, it reads within the query's deadline.
    context = QueryContext(
        storage.inventory_within(q.deadline_s), storage.metrics, storage.records, ttl, storage.state
    )
    execution = Execution(
        resolvers(),
        context,
        q.deadline_s,
        q.max_depth,
        max_fields=q.max_fields,
        max_tokens=q.max_tokens,
        max_answer_bytes=q.max_answer_bytes,
    )
    tls = HttpsTls(q.tls_cert, q.tls_key) if q.tls_cert else None
    auth = HttpAuth(q.username, q.password, q.token) if q.username or q.token else None
    return QueryServer(
        q.host,
        q.port,
        Admission(q.threads, q.max_waiting, q.deadline_s),
        execution,
        instruments,
        q.max_body_bytes,
        tls,
        auth,
        {"/status/config/ttl": ttl_page(ttl), **pages},
        ConnectionLimits(_connections(q.max_connections), q.max_connections_per_peer, q.header_timeout_s),
        q.idle_timeout_s,
        (q.promql_port, PromQLApi(context, q.max_answer_bytes)) if q.promql_port >= 0 else None,
    )


def _connections(wanted: int) -> int:
    """``--query-max-connections``, or fewer when the descriptors free
    now would not leave as many again for agents, storage and the cluster."""
    held = descriptors.share(wanted, reserved=MOST_CONNECTIONS)
    if held < wanted:
        log.warning(
            "the query port holds at most %d connections, not %d (--query-max-connections): the "
            "process may open %d descriptors (ulimit -n); raise it to hold more",
            held, wanted, descriptors.limit(),
        )  # fmt: skip
    return held
