"""skyoap: a SkyWalking-style telemetry pipeline.

What users import is here, loaded when first used (a node never loads Spark)::

    from skyoap import Consumer, StorageConfig, StorageKind, TopicPartition
    from skyoap import spark_session  # needs the extra: pip install 'skyoap[spark]'

The rest lives by its role in the pipeline: ``receiver``, ``remote``,
``aggregator``, ``storage``, ``consumer``, ``analytics``, … (docs/architecture.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skyoap.analytics.spark import session as spark_session
    from skyoap.consumer.client import Consumer, TopicPartition
    from skyoap.storage.config import StorageConfig, StorageKind

_PUBLIC = {
    "Consumer": ("skyoap.consumer.client", "Consumer"),
    "TopicPartition": ("skyoap.consumer.client", "TopicPartition"),
    "StorageConfig": ("skyoap.storage.config", "StorageConfig"),
    "StorageKind": ("skyoap.storage.config", "StorageKind"),
    "spark_session": ("skyoap.analytics.spark", "session"),
}
__all__ = ["Consumer", "StorageConfig", "StorageKind", "TopicPartition", "spark_session"]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'skyoap' has no attribute {name!r}")
    module, attribute = _PUBLIC[name]
    return getattr(importlib.import_module(module), attribute)
