from typing import Any

from skyoap.model.spans import Span

def scan(
    data: bytes, rules: tuple[Any, ...], now_ms: int, /
) -> tuple[str, str, str, str, tuple[Span, ...], tuple[str, ...]] | None: ...
def bind(span: type, ref: type, constants: tuple[int, int, int, int], /) -> None: ...
