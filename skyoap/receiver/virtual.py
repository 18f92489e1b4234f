"""Virtual services: the databases, caches and message queues spans called,
which nobody reports from, measured from their callers' spans by the layer
each span's layer belongs to (``layers/virtual_*.py``), and their slow
statements and commands sampled as records."""

from __future__ import annotations

from collections.abc import Iterable

from skyoap.layers import LAYERS
from skyoap.layers.spans import Measure, SlowThresholds, Sums
from skyoap.model.records import SampledRecord
from skyoap.model.spans import Segment, Span

_BY_LAYER: dict[int, Measure] = {
    layer.span_layer: layer.measure for layer in LAYERS if layer.span_layer is not None and layer.measure
}

SPAN_LAYERS = frozenset(_BY_LAYER)
"""The span layers of the calls measured here."""


def measure(called: Iterable[tuple[Segment, Span]], slow: SlowThresholds) -> tuple[Sums, list[SampledRecord]]:
    """What the spans of ``called`` (of ``SPAN_LAYERS``, with their segments)
    count for, summed by metric, and their slow calls sampled."""
    sums: Sums = {}
    samples: list[SampledRecord] = []
    for segment, span in called:
        _BY_LAYER[span.layer](sums, samples, segment, span, dict(span.details), slow)
    return sums, samples
