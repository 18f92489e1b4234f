"""Alarm rules and hooks in SkyWalking 10.x's ``alarm-settings.yml``, read as
is: each rule an MQE expression over the last ``period`` minutes whose root
is a comparison, or the older form (``metrics-name``, ``op``, ``threshold``,
``count``) that many files still use, turned into the expression it means;
hooks by kind and name, some ``is-default``.

A file with an error is refused whole, with the line and the reason
(``SettingsError``); nothing of it is used.

The ``-regex`` name filters run on RE2 (``NameRegex``), whose time is linear
in the name: a name is an agent's choice, and a backtracking engine takes
exponential time over some patterns (``(a|aa)+`` against ``a!a!a!…``).
SkyWalking reads them as Java regexes; RE2 reads the same syntax but for what
only backtracking can do (backreferences, lookarounds, possessive
quantifiers, atomic groups) and Java's class intersection (``[a-z&&[^c]]``),
which a file is refused for, naming the rule and the construct."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import re2
import yaml

from skyoap.alarm.hooks import KINDS, UNSENT_KINDS, Hook, SettingsReader
from skyoap.mqe import syntax
from skyoap.mqe.parser import MQEError, parse

_RULE_KEYS = {
    "expression", "period", "silence-period", "recovery-observation-period", "message", "include-names",
    "exclude-names", "include-names-regex", "exclude-names-regex", "tags", "hooks", "metrics-name", "op",
    "threshold", "count", "only-as-condition", "include-labels", "exclude-labels", "include-labels-regex",
    "exclude-labels-regex",
}  # fmt: skip
_LEGACY_OPS = {">": ">", ">=": ">=", "<": "<", "<=": "<=", "==": "==", "=": "=="}
_NAME = re.compile(r"[A-Za-z0-9_]+_rule")
_PERCENTILES = ("50", "75", "90", "95", "99")


class SettingsError(ValueError):
    """An alarm settings file skyoap refuses: where, and why."""


class NameRegex(Protocol):
    """A compiled ``-regex`` name filter (RE2's)."""

    def fullmatch(self, text: str) -> object | None: ...


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a pattern it cannot read is reported in the SettingsError
_CLASS_INTERSECTION = re.compile(r"(?<!\\)\[(?:\\.|[^\]\\])*&&")
"""``&&`` inside a character class: Java's intersection, which RE2 reads as two
ampersands."""


_BACKTRACKING = (
    (re.compile(r"invalid escape sequence: \\[1-9]"), "a backreference"),
    (re.compile(r"invalid perl operator: \(\?[=!]"), "a lookahead"),
    (re.compile(r"invalid perl operator: \(\?<[=!]"), "a lookbehind"),
    (re.compile(r"invalid perl operator: \(\?>"), "an atomic group"),
    (re.compile(r"bad repetition operator: (?:[*+?]|\{[\d,]+\})\+"), "a possessive quantifier"),
)
"""What RE2 refuses because only a backtracking engine can do it, by its error."""


def name_regex(text: str) -> NameRegex:
    """``text`` compiled by RE2; ValueError naming the construct for a pattern
    that needs backtracking, or Java's class intersection."""
    if _CLASS_INTERSECTION.search(text):
        raise ValueError("it has && in a character class (Java's intersection), which RE2 reads as "
                         "two ampersands: list the class's characters instead")  # fmt: skip
    try:
        return re2.compile(text, _RE2_OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
    for error, construct in _BACKTRACKING:
        if found := error.match(reason):
            raise ValueError(
                f"it has {construct} ({found[0].rpartition(' ')[2]}), which needs backtracking: name "
                "filters run on RE2, in time linear in the name; write it without"
            )
    raise ValueError(f"RE2 does not read it as a regular expression: {reason}")


@dataclass(frozen=True)
class Rule:
    name: str
    expression: str
    """MQE whose root is a comparison, true (1) when the alarm should fire."""
    period: int
    """Minutes the expression reads, up to the minute being evaluated."""
    silence_period: int
    """Minutes after a firing in which the same alarm does not fire again."""
    recovery_observation_period: int
    """Minutes the expression must stay false before a recovery is notified."""
    message: str
    """The text of the alarm; ``{name}`` is the entity's name."""
    include_names: tuple[str, ...] = ()
    exclude_names: tuple[str, ...] = ()
    include_names_regex: NameRegex | None = None
    exclude_names_regex: NameRegex | None = None
    tags: tuple[tuple[str, str], ...] = ()
    hooks: tuple[str, ...] = ()
    """``kind.name`` of each hook; none: the default hooks."""
    line: int = 0

    def covers(self, name: str) -> bool:
        """Whether the entity ``name`` is one this rule watches."""
        if self.include_names and name not in self.include_names:
            return False
        if self.include_names_regex and not self.include_names_regex.fullmatch(name):
            return False
        if name in self.exclude_names:
            return False
        return not (self.exclude_names_regex and self.exclude_names_regex.fullmatch(name))

    def text(self, name: str) -> str:
        return self.message.replace("{name}", name)


@dataclass(frozen=True)
class AlarmSettings:
    rules: tuple[Rule, ...] = ()
    hooks: Mapping[str, Hook] = field(default_factory=dict)
    """By ``kind.name``."""

    def hooks_of(self, rule: Rule) -> list[Hook]:
        """The hooks a rule's alarms go to: those it names, else the defaults."""
        if rule.hooks:
            return [self.hooks[h] for h in rule.hooks]
        return [h for h in self.hooks.values() if h.is_default]


def load(path: Path) -> AlarmSettings:
    """The settings of the file at ``path``; SettingsError naming the line and
    the reason for a file skyoap cannot use."""
    try:
        text = path.read_text()
    except OSError as e:
        raise SettingsError(f"{path}: cannot be read: {e.strerror or e}") from e
    return parse_settings(text, str(path))


def parse_settings(text: str, where: str = "alarm-settings.yml") -> AlarmSettings:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise SettingsError(f"{where}{line}: not YAML: {getattr(e, 'problem', None) or e}") from None
    return _Reader(where).settings(root) if root is not None else AlarmSettings()


def _decides(tree: syntax.Expression) -> bool:
    """Whether an expression is true or false: a comparison, or comparisons
    joined by && and ||."""
    if isinstance(tree, syntax.BoolOp):
        return _decides(tree.left) and _decides(tree.right)
    return isinstance(tree, syntax.Compare)


class _Reader:
    """Reads the file's nodes; each error names the file and the node's line."""

    def __init__(self, where: str) -> None:
        self.where = where

    def error(self, node: yaml.Node, message: str) -> SettingsError:
        return SettingsError(f"{self.where} line {node.start_mark.line + 1}: {message}")

    def mapping(self, node: yaml.Node, what: str) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, f"{what} must be a mapping of keys to values")
        return {self.scalar(k, "a key"): v for k, v in node.value}

    def scalar(self, node: yaml.Node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, f"{what} must be a single value")
        return str(node.value)

    def strings(self, node: yaml.Node, what: str) -> tuple[str, ...]:
        """A list, or one value of comma-separated ones."""
        if isinstance(node, yaml.ScalarNode):
            return tuple(s.strip() for s in str(node.value).split(",") if s.strip())
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(node, f"{what} must be a list")
        return tuple(self.scalar(n, f"each of {what}") for n in node.value)

    def minutes(self, node: yaml.Node, what: str, least: int) -> int:
        text = self.scalar(node, what)
        if not re.fullmatch(r"\d+", text) or int(text) < least:
            raise self.error(node, f"{what} must be a whole number, at least {least}, not {text!r}")
        return int(text)

    def regex(self, rule: str, key: str, node: yaml.Node | None) -> NameRegex | None:
        if node is None:
            return None
        text = self.scalar(node, key)
        try:
            return name_regex(text)
        except ValueError as e:
            raise self.error(node, f"rule {rule}: {key} {text!r} cannot be used: {e}") from None

    def settings(self, root: yaml.Node) -> AlarmSettings:
        top = self.mapping(root, "the file")
        for key, node in top.items():
            if key == "composite-rules":
                raise self.error(node, "composite-rules are SkyWalking 9's: write one rule whose expression "
                                       "joins the conditions with && or ||")  # fmt: skip
            if key not in ("rules", "hooks"):
                raise self.error(node, f"unknown section {key!r}: the sections are rules and hooks")
        hooks = self.hooks(top["hooks"]) if "hooks" in top else {}
        rules = tuple(
            self.rule(name, body, hooks) for name, body in self.mapping(top["rules"], "rules").items()
        ) if "rules" in top else ()  # fmt: skip
        return AlarmSettings(rules, hooks)

    def rule(self, name: str, body: yaml.Node, hooks: Mapping[str, Hook]) -> Rule:
        if not _NAME.fullmatch(name):
            raise self.error(body, f"rule {name}: a rule's name is letters, digits and _, ending with _rule")
        keys = self.mapping(body, f"rule {name}")
        for key, node in keys.items():
            if key not in _RULE_KEYS:
                raise self.error(node, f"rule {name}: unknown key {key!r}")
            if "labels" in key:
                raise self.error(
                    node, f"rule {name}: {key} is not supported: skyoap stores no labelled meters"
                )
        if "period" not in keys:
            raise self.error(body, f"rule {name}: a rule needs a period (minutes)")
        period = self.minutes(keys["period"], f"rule {name}'s period", 1)
        named = self.strings(keys["hooks"], f"rule {name}'s hooks") if "hooks" in keys else ()
        for hook in named:
            if hook not in hooks:
                raise self.error(
                    keys["hooks"],
                    f"rule {name}: no hook {hook!r} (hooks: {', '.join(sorted(hooks)) or 'none'})",
                )

        def optional(key: str, read: Callable[[yaml.Node], Any], otherwise: Any) -> Any:
            return read(keys[key]) if key in keys else otherwise

        return Rule(
            name=name,
            expression=self.expression(name, body, keys),
            period=period,
            silence_period=optional("silence-period", lambda n: self.minutes(n, "silence-period", 0), period),
            recovery_observation_period=optional(
                "recovery-observation-period", lambda n: self.minutes(n, "recovery-observation-period", 0), 0
            ),
            message=optional("message", lambda n: self.scalar(n, "message"), f"Alarm caused by Rule {name}"),
            include_names=optional("include-names", lambda n: self.strings(n, "include-names"), ()),
            exclude_names=optional("exclude-names", lambda n: self.strings(n, "exclude-names"), ()),
            include_names_regex=self.regex(name, "include-names-regex", keys.get("include-names-regex")),
            exclude_names_regex=self.regex(name, "exclude-names-regex", keys.get("exclude-names-regex")),
            tags=optional(
                "tags",
                lambda n: tuple((k, self.scalar(v, f"tag {k}")) for k, v in self.mapping(n, "tags").items()),
                (),
            ),
            hooks=named,
            line=body.start_mark.line + 1,
        )

    def expression(self, name: str, body: yaml.Node, keys: Mapping[str, yaml.Node]) -> str:
        """The rule's MQE: its own, or the one its older keys mean."""
        legacy = [k for k in ("metrics-name", "op", "threshold", "count") if k in keys]
        if "expression" in keys:
            if legacy:
                raise self.error(
                    keys[legacy[0]], f"rule {name}: expression and {legacy[0]} do not go together"
                )
            node = keys["expression"]
            text = self.scalar(node, "expression")
        elif all(k in keys for k in ("metrics-name", "op", "threshold")):
            node = keys["metrics-name"]
            text = self.legacy(name, keys)
        else:
            raise self.error(
                body, f"rule {name}: a rule needs an expression (or metrics-name, op and threshold)"
            )
        try:
            tree = parse(text)
        except MQEError as e:
            raise self.error(node, f"rule {name}: {e}") from None
        if not _decides(tree):
            raise self.error(node, f"rule {name}: the expression must be true or false: a comparison "
                                   f"(such as sum(service_sla < 8000) >= 2), or such joined by && or ||, "
                                   f"not {tree}")  # fmt: skip
        return text

    def legacy(self, name: str, keys: Mapping[str, yaml.Node]) -> str:
        """``sum(metric op threshold) >= count``; for percentiles, one such
        per threshold given (``-`` gives none), any of them: each with its
        label dropped (``aggregate_labels``), since ``||`` pairs labelled
        values by their labels and ``p='90'`` has no partner in ``p='95'``."""
        metric = self.scalar(keys["metrics-name"], "metrics-name")
        op = _LEGACY_OPS.get(self.scalar(keys["op"], "op"))
        if op is None:
            raise self.error(keys["op"], f"rule {name}: op must be one of {', '.join(_LEGACY_OPS)}")
        count = self.minutes(keys["count"], f"rule {name}'s count", 1) if "count" in keys else 1
        thresholds = [t.strip() for t in self.scalar(keys["threshold"], "threshold").split(",")]
        if len(thresholds) == 1:
            return f"sum({metric} {op} {thresholds[0]}) >= {count}"
        if len(thresholds) > len(_PERCENTILES):
            raise self.error(keys["threshold"], f"rule {name}: at most 5 thresholds, one per percentile")
        return " || ".join(
            f"aggregate_labels(sum({metric}{{p='{p}'}} {op} {t}), max) >= {count}"
            for p, t in zip(_PERCENTILES, thresholds, strict=False)
            if t != "-"
        )

    def hooks(self, node: yaml.Node) -> dict[str, Hook]:
        hooks: dict[str, Hook] = {}
        kinds = ", ".join(KINDS)
        for kind, named in self.mapping(node, "hooks").items():
            if kind in UNSENT_KINDS:
                raise self.error(
                    named, f"{UNSENT_KINDS[kind]} hooks are not sent by skyoap; its hooks are {kinds}"
                )
            if kind not in KINDS:
                raise self.error(named, f"unknown hook kind {kind!r}: the kinds are {kinds}")
            for name, body in self.mapping(named, f"{kind} hooks").items():
                hooks[f"{kind}.{name}"] = self.hook(kind, name, body)
        return hooks

    def hook(self, kind: str, name: str, body: yaml.Node) -> Hook:
        keys = self.mapping(body, f"hook {kind}.{name}")
        plain = {k: yaml.safe_load(yaml.serialize(v)) for k, v in keys.items()}

        def targets(key: str) -> tuple[Mapping[str, Any], ...]:
            found = plain.get(key) or []
            if not isinstance(found, list):
                raise self.error(keys[key], f"hook {kind}.{name}: {key} must be a list")
            out = []
            for t in found:
                target = {"url": t} if isinstance(t, str) else t
                if not isinstance(target, dict) or not target.get("url"):
                    raise self.error(keys[key], f"hook {kind}.{name}: each of {key} needs a url")
                out.append({**target, "headers": plain.get("headers") or {}})
            return tuple(out)

        def strings(key: str) -> tuple[str, ...]:
            return self.strings(keys[key], key) if key in keys else ()

        sent, recovered = KINDS[kind].targets(SettingsReader(targets, strings))
        if not sent:
            raise self.error(
                body, f"hook {kind}.{name}: it names nowhere to send (urls, webhooks or integration-keys)"
            )
        return Hook(
            kind=kind,
            name=name,
            is_default=str(plain.get("is-default", False)).lower() == "true",
            targets=sent,
            recovery_targets=recovered,
            text_template=str(plain.get("text-template") or ""),
            recovery_text_template=str(plain.get("recovery-text-template") or ""),
        )
