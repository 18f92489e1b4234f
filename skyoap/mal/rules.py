"""Rule files in SkyWalking's form (``otel-rules/*.yaml``,
``meter-analyzer-config/*.yaml``), read unchanged:

    filter: "{ tags -> tags.job_name == 'vm-monitoring' }"
    expPrefix: ...           # applied to every family a rule names
    expSuffix: service(['node_identifier_host_name'], Layer.OS_LINUX)
    metricPrefix: meter_vm
    metricsRules:
      - name: cpu_load1      # stored as meter_vm_cpu_load1
        exp: node_load1 * 100

A rule's expression is ``(exp).expSuffix``, with every family ``m`` it
names read as ``(m.expPrefix)``. A file that is not such a file, or a rule
that is not MAL this node evaluates, refuses the start with the file, the
rule and what is wrong."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from skyoap.mal import closures
from skyoap.mal import families as f
from skyoap.mal import syntax as s
from skyoap.mal.evaluation import Batch, Compiled, Context, compile_rule
from skyoap.mal.parser import MALError, parse

_PLACEHOLDER = "__family__"


class RuleError(ValueError):
    """A rule file this node does not take: the message names the file, the
    rule and what is wrong."""


@dataclass(frozen=True)
class RuleFile:
    """The rules of one file, with the filter that comes before them all."""

    path: str
    filter: s.Closure | None
    rules: tuple[Compiled, ...]

    @functools.cached_property
    def families(self) -> frozenset[str]:
        """The families its rules read."""
        return frozenset(name for rule in self.rules for name in rule.families)

    def keep(self, batch: Batch) -> Batch:
        """The batch's families its rules read, with the samples its filter keeps."""
        read = {name: family for name, family in batch.families.items() if name in self.families}
        if self.filter is None:
            return replace(batch, families=read)
        test = self.filter

        def passes(tags: dict[str, str]) -> bool:
            return bool(closures.run(test, tags))

        kept = {name: f.keep(family, passes) for name, family in read.items()}
        return replace(batch, families={name: family for name, family in kept.items() if family})


def read_rule_file(path: Path, text: str | None = None) -> RuleFile:
    """The rules of the file at ``path`` (of ``text`` if given); RuleError
    saying which rule is wrong and how."""
    where = str(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8") if text is None else text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise RuleError(f"{where}: not a YAML rule file: {e}") from None
    if not isinstance(document, Mapping):
        raise RuleError(f"{where}: a rule file is a mapping with metricPrefix and metricsRules")
    prefix = _text(document, "metricPrefix", where, required=True)
    exp_prefix = _text(document, "expPrefix", where)
    exp_suffix = _text(document, "expSuffix", where)
    test = _filter(_text(document, "filter", where), where)
    rules = document.get("metricsRules") or []
    if not isinstance(rules, list):
        raise RuleError(f"{where}: metricsRules is a list of rules, each with a name and an exp")
    compiled = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, Mapping) or not isinstance(rule.get("name"), str) or not rule.get("exp"):
            raise RuleError(f"{where}: rule {i + 1} of metricsRules has no name and exp")
        metric = f"{prefix}_{rule['name']}"
        try:
            compiled.append(compile_rule(metric, _expression(str(rule["exp"]), exp_prefix, exp_suffix)))
        except MALError as e:
            raise RuleError(f"{where}: rule {rule['name']} ({metric}): {e}") from None
    return RuleFile(where, test, tuple(compiled))


def _text(document: Mapping[str, Any], key: str, where: str, required: bool = False) -> str:
    value = document.get(key)
    if value is None or value == "":
        if required:
            raise RuleError(f"{where}: {key} is missing: every rule's metric is named {key}_<name>")
        return ""
    if not isinstance(value, str):
        raise RuleError(f"{where}: {key} is {type(value).__name__}, not text")
    return value.strip()


def _filter(text: str, where: str) -> s.Closure | None:
    if not text:
        return None
    try:
        found = parse(f"{_PLACEHOLDER}.filter({text})")
        assert isinstance(found, s.Method)
        (closure,) = found.args
        if not isinstance(closure, s.Closure) or len(closure.params) != 1:
            raise MALError("a file's filter is a closure of the tags: { tags -> tags.job_name == 'x' }")
        closures.check(closure)
    except (MALError, ValueError) as e:
        raise RuleError(f"{where}: filter: {e}") from None
    return closure


def _expression(exp: str, exp_prefix: str, exp_suffix: str) -> s.Expression:
    tree = parse(f"({exp}).{exp_suffix}" if exp_suffix else exp)
    if not exp_prefix:
        return tree
    prefix = parse(f"{_PLACEHOLDER}.{exp_prefix}")
    return _prefixed(tree, prefix)


def _prefixed(node: Any, prefix: s.Expression) -> Any:
    """``node`` with each family ``m`` read as ``m.<prefix>``."""
    if isinstance(node, s.Family):
        return _substituted(prefix, node)
    if isinstance(node, s.Binary):
        return replace(node, left=_prefixed(node.left, prefix), right=_prefixed(node.right, prefix))
    if isinstance(node, s.Negate):
        return replace(node, operand=_prefixed(node.operand, prefix))
    if isinstance(node, s.Method):
        args = tuple(
            _prefixed(a, prefix) if isinstance(a, s.Binary | s.Method | s.Family) else a for a in node.args
        )
        if node.name == "downsampling":
            args = node.args  # its argument names a kind, not a family
        return replace(node, target=_prefixed(node.target, prefix), args=args)
    return node


def _substituted(chain: s.Expression, family: s.Family) -> s.Expression:
    if isinstance(chain, s.Family) and chain.name == _PLACEHOLDER:
        return family
    assert isinstance(chain, s.Method)
    return replace(chain, target=_substituted(chain.target, family))


def read_rules(paths: Iterable[Path]) -> list[RuleFile]:
    """The rule files of ``paths`` (files, or directories read with their
    subdirectories for ``*.yaml`` and ``*.yml``), in order; RuleError at the
    first that is wrong, or for two rules that store one metric."""
    files = [read_rule_file(p) for p in _rule_paths(paths)]
    seen: dict[str, str] = {}
    for file in files:
        for rule in file.rules:
            if rule.metric in seen:
                raise RuleError(f"{file.path}: {rule.metric} is stored by a rule of {seen[rule.metric]} too")
            seen[rule.metric] = file.path
    return files


def _rule_paths(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        elif path.is_file():
            yield path
        else:
            raise RuleError(f"{path}: no such file or directory of rules")


Failed = Callable[[str, str, Exception], None]
"""Told of a file (its filter) or a rule that failed on a batch: the file,
the metric (or '' for the filter) and the error."""


def evaluate_files(
    files: Sequence[RuleFile], batch: Batch, context: Context, failed: Failed
) -> Iterator[tuple[Compiled, f.Scoped]]:
    """What every rule of ``files`` stores of ``batch``. A rule that fails on
    it (a closure asking what a value does not have) is told to ``failed``
    and the others go on."""
    for file in files:
        try:
            kept = file.keep(batch)
        except MALError as e:
            failed(file.path, "", e)
            continue
        if not kept.families:
            continue
        for rule in file.rules:
            try:
                found = rule.evaluate(kept, context)
            except MALError as e:
                failed(file.path, rule.metric, e)
                continue
            if found is not None:
                yield rule, found
