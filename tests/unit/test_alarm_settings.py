"""SkyWalking's alarm-settings.yml as skyoap reads it: the 10.x form, the
older one, hooks by kind and name, and a clear refusal, with its line, of
a file it cannot use."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

import pytest

from skyoap.alarm.hooks.pagerduty import PAGERDUTY
from skyoap.alarm.settings import AlarmSettings, SettingsError, parse_settings

SETTINGS = textwrap.dedent("""\
    rules:
      service_resp_time_rule:
        expression: sum(service_resp_time > 1000) >= 3
        period: 10
        silence-period: 5
        recovery-observation-period: 2
        message: Response time of service {name} is more than 1000ms in 3 minutes of last 10 minutes.
        include-names: [shop, stock]
        exclude-names-regex: "test-.*"
        tags:
          level: WARNING
        hooks:
          - webhook.custom1
          - slack.default
      service_sla_rule:
        expression: sum((service_sla / 100) < 80) >= 2
        period: 10
    hooks:
      webhook:
        default:
          is-default: true
          urls:
            - http://127.0.0.1:9000/notify
        custom1:
          urls: [http://127.0.0.1:9000/custom1]
          recovery-urls: [http://127.0.0.1:9000/recovered]
          headers:
            Authorization: Bearer token
      slack:
        default:
          text-template: '{"type": "section", "text": {"type": "mrkdwn", "text": "%s"}}'
          webhooks:
            - https://hooks.slack.com/services/x/y/z
      pagerduty:
        default:
          is-default: true
          integration-keys: [key1]
""")


def test_the_10x_form_is_read_as_is() -> None:
    settings = parse_settings(SETTINGS)
    first, second = settings.rules
    assert (first.name, first.expression, first.period, first.silence_period) == (
        "service_resp_time_rule", "sum(service_resp_time > 1000) >= 3", 10, 5,
    )  # fmt: skip
    assert (first.recovery_observation_period, first.tags, first.line) == (2, (("level", "WARNING"),), 3)
    assert first.text("shop") == (
        "Response time of service shop is more than 1000ms in 3 minutes of last 10 minutes."
    )
    assert [first.covers(n) for n in ("shop", "stock", "other")] == [True, True, False]
    assert [h.id for h in settings.hooks_of(first)] == ["webhook.custom1", "slack.default"]
    # No hooks of its own: the default ones, silence as long as the period, recovery at once.
    assert (second.silence_period, second.recovery_observation_period, second.message) == (
        10, 0, "Alarm caused by Rule service_sla_rule",
    )  # fmt: skip
    assert [h.id for h in settings.hooks_of(second)] == ["webhook.default", "pagerduty.default"]
    custom = settings.hooks["webhook.custom1"]
    assert custom.targets == (
        {"url": "http://127.0.0.1:9000/custom1", "headers": {"Authorization": "Bearer token"}},
    )
    assert [t["url"] for t in custom.recovery_targets] == ["http://127.0.0.1:9000/recovered"]
    assert settings.hooks["pagerduty.default"].targets == ({"url": PAGERDUTY, "integration-key": "key1"},)
    assert settings.hooks["slack.default"].text_template.startswith('{"type": "section"')


def test_exclusions_win_over_inclusions() -> None:
    (rule,) = parse_settings(
        textwrap.dedent("""\
        rules:
          endpoint_rule:
            expression: sum(endpoint_resp_time > 1000) >= 1
            period: 3
            include-names-regex: "GET:.*"
            exclude-names: ["GET:/health"]
    """)
    ).rules
    assert [rule.covers(n) for n in ("GET:/buy", "GET:/health", "POST:/buy")] == [True, False, False]


@pytest.mark.parametrize(
    ("older", "expression"),
    [
        ("metrics-name: service_sla\n    op: <\n    threshold: 8000\n    count: 2",
         "sum(service_sla < 8000) >= 2"),
        ("metrics-name: service_resp_time\n    op: '='\n    threshold: 5",
         "sum(service_resp_time == 5) >= 1"),
        ("metrics-name: service_percentile\n    op: '>'\n    threshold: -,-,1000,1000,2000\n"
         "    count: 3",
         "aggregate_labels(sum(service_percentile{p='90'} > 1000), max) >= 3 "
         "|| aggregate_labels(sum(service_percentile{p='95'} > 1000), max) >= 3 "
         "|| aggregate_labels(sum(service_percentile{p='99'} > 2000), max) >= 3"),
    ],
)  # fmt: skip
def test_the_older_form_means_the_expression_it_always_meant(older: str, expression: str) -> None:
    (rule,) = parse_settings(f"rules:\n  old_rule:\n    {older}\n    period: 10\n").rules
    assert rule.expression == expression


RULE = "rules:\n  a_rule:\n    expression: sum(service_sla < 1) >= 1\n    period: 10\n"
"""A good rule; the cases below add a line to it, or write another."""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules: [", "alarm-settings.yml line 1: not YAML: expected the node content"),
        (RULE + "    colour: red\n",
         "alarm-settings.yml line 5: rule a_rule: unknown key 'colour'"),
        ("rules:\n  a_rule:\n    expression: sum(service_sla < 1) >= 1\n",
         "alarm-settings.yml line 3: rule a_rule: a rule needs a period \\(minutes\\)"),
        ("rules:\n  a_rule:\n    expression: sum(service_sla < 1) >= 1\n    period: 0\n",
         "alarm-settings.yml line 4: rule a_rule's period must be a whole number, at least 1, not '0'"),
        ("rules:\n  a_rule:\n    expression: avg(service_sla)\n    period: 10\n",
         "alarm-settings.yml line 3: rule a_rule: the expression must be true or false: a comparison"),
        ("rules:\n  a_rule:\n    expression: sum(service_sla < ) >= 1\n    period: 10\n",
         "alarm-settings.yml line 3: rule a_rule: "),
        ("rules:\n  a_rule:\n    expression: " + " + ".join(["service_sla"] * 33) + " > 1\n    period: 10\n",
         "alarm-settings.yml line 3: rule a_rule: the expression names more than 32 metrics, more than this "
         "node reads"),
        (RULE + "    hooks: [slack.x]\n",
         "alarm-settings.yml line 5: rule a_rule: no hook 'slack.x' \\(hooks: none\\)"),
        ("rules:\n  bad:\n    expression: sum(service_sla < 1) >= 1\n    period: 10\n",
         "alarm-settings.yml line 3: rule bad: a rule's name is letters, digits and _, ending with _rule"),
        (RULE + "    include-names-regex: '(('\n",
         "alarm-settings.yml line 5: rule a_rule: include-names-regex '\\(\\(' cannot be used: RE2 does not "
         "read it as a regular expression: missing \\): \\(\\($"),
        ("composite-rules:\n  c_rule:\n    expression: a_rule && b_rule\n",
         "alarm-settings.yml line 2: composite-rules are SkyWalking 9's"),
        ("hooks:\n  gRPC:\n    default:\n      target-host: h\n",
         "alarm-settings.yml line 3: SkyWalking's gRPC alarm hook hooks are not sent by skyoap"),
        ("hooks:\n  webhook:\n    default:\n      is-default: true\n",
         "alarm-settings.yml line 4: hook webhook.default: it names nowhere to send"),
        (RULE + "    metrics-name: service_sla\n",
         "alarm-settings.yml line 5: rule a_rule: expression and metrics-name do not go together"),
    ],
)  # fmt: skip
def test_a_file_it_cannot_use_is_refused_with_the_line_and_the_reason(text: str, message: str) -> None:
    with pytest.raises(SettingsError, match="^" + message):
        parse_settings(text)


def test_an_empty_file_has_no_rules() -> None:
    assert parse_settings("") == AlarmSettings()


def covers(regex: str, key: str = "include-names-regex") -> Callable[[str], bool]:
    (rule,) = parse_settings(RULE + f"    {key}: '{regex}'\n").rules
    return rule.covers


def test_a_name_filter_over_a_catastrophic_pattern_is_decided_exactly() -> None:
    """``(a|aa)+`` over a's and then a ``!`` takes a backtracking engine (Python's
    ``re``) time growing by half with each a, past any bound at 500 characters;
    RE2 decides it in one pass, up to the longest names agents may send."""
    included, excluded = covers("(a|aa)+"), covers("(a|aa)+", "exclude-names-regex")
    for name in ("a" * 30 + "!", "a" * 499 + "!"):
        assert (included(name), excluded(name)) == (False, True)
    assert (included("a" * 500), excluded("a" * 500)) == (True, False)


@pytest.mark.parametrize(
    ("regex", "construct"),
    [
        ("(\\w+)-\\1", "a backreference \\(\\\\1\\)"),
        ("shop(?=-prod)", "a lookahead \\(\\(\\?=\\)"),
        ("(?<!test-).*", "a lookbehind \\(\\(\\?<!\\)"),
        ("(?>a|ab)c", "an atomic group \\(\\(\\?>\\)"),
        ("(a|aa)++", "a possessive quantifier \\(\\+\\+\\)"),
    ],
)
def test_a_name_filter_that_needs_backtracking_is_refused_naming_the_construct(
    regex: str, construct: str
) -> None:
    message = (
        "alarm-settings.yml line 5: rule a_rule: exclude-names-regex '.+' cannot be used: "
        f"it has {construct}, which needs backtracking: name filters run on RE2, in time linear "
        "in the name; write it without$"
    )
    with pytest.raises(SettingsError, match=message):
        covers(regex, "exclude-names-regex")


def test_java_s_class_intersection_is_refused_rather_than_read_otherwise() -> None:
    message = (
        "alarm-settings.yml line 5: rule a_rule: include-names-regex '[a-z&&[^x]]' cannot be used: "
        "it has && in a character class (Java's intersection), which RE2 reads as two ampersands: "
        "list the class's characters instead"
    )
    with pytest.raises(SettingsError, match=f"^{re.escape(message)}$"):
        covers("[a-z&&[^x]]")
    # Outside a class, && is two ampersands in Java as in RE2.
    assert covers("a&&b")("a&&b")
