"""Which options may hold a credential, and how they leave a command line."""

from __future__ import annotations

import dataclasses

from skyoap.deploy.options import is_secret, split_secrets
from skyoap.runtime.config import option_name
from skyoap.wiring.config import NodeConfig


def test_every_option_that_may_hold_a_credential_is_known_as_one() -> None:
    names = {
        option_name(f)
        for section in dataclasses.fields(NodeConfig)
        for f in dataclasses.fields(getattr(NodeConfig(), section.name))
    }
    assert {n for n in names if is_secret(n)} >= {
        "auth_token", "es_password", "es_api_key", "redis_url", "es_hosts", "query_password", "query_token",
    }  # fmt: skip
    # Paths of keys are not themselves secret.
    assert not any(
        is_secret(n)
        for n in ("tls_key", "cluster_key", "es_username", "spill_dir", "query_tls_key", "query_username")
    )


def test_credentials_move_from_the_command_line_to_the_environment() -> None:
    argv = [
        "--port",
        "0",
        "--auth-token=t0k",
        "--redis-url",
        "redis://:pw@h:1/0",
        "--cluster-secret",
        "s",
        "-v",
    ]
    kept, env = split_secrets(argv)
    assert kept == ["--port", "0", "-v"]
    assert env == {
        "SKYOAP_AUTH_TOKEN": "t0k", "SKYOAP_REDIS_URL": "redis://:pw@h:1/0", "SKYOAP_CLUSTER_SECRET": "s",
    }  # fmt: skip
