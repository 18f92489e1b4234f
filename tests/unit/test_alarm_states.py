"""An alarm's course minute by minute: fired once, silent for its silence
period, fired again after it, recovered once the expression has stayed false
long enough and never within a silence, each minute evaluated once."""

from __future__ import annotations

from skyoap.alarm.settings import Rule
from skyoap.alarm.states import Course, Kind, State, step


def rule(silence: int, recovery: int = 0) -> Rule:
    return Rule("r_rule", "sum(service_sla < 1) >= 1", 5, silence, recovery, "{name}")


def run(r: Rule, held: str, first: int = 100) -> list[tuple[State, str]]:
    """The state after each minute of ``held`` (1: the expression held, 0:
    not), with the notice it gave: F a firing, R a recovery, . none."""
    course, out = Course(), []
    for i, h in enumerate(held):
        course, notice = step(course, h == "1", first + i, r)
        out.append((course.state, "." if notice is None else "F" if notice.kind is Kind.FIRING else "R"))
    return out


def notices(r: Rule, held: str) -> str:
    return "".join(n for _, n in run(r, held))


def test_a_firing_is_silent_for_its_silence_period_then_fires_again() -> None:
    assert notices(rule(silence=3), "1111111111") == "F...F...F."
    assert notices(rule(silence=0), "111") == "FFF"
    assert [s for s, _ in run(rule(silence=3), "111")] == [
        State.FIRING, State.SILENCED_FIRING, State.SILENCED_FIRING,
    ]  # fmt: skip


def test_a_recovery_is_told_at_once_without_an_observation_period_but_not_within_the_silence() -> None:
    assert notices(rule(silence=1), "1100") == "F.R."
    # Silent the 3 minutes after the firing: the recovery waits for the 4th.
    assert notices(rule(silence=3), "100000") == "F...R."
    assert [s for s, _ in run(rule(silence=3), "1000")][1:] == [State.OBSERVING_RECOVERY] * 3


def test_a_recovery_waits_for_the_expression_to_stay_false_the_observation_period() -> None:
    assert notices(rule(silence=0, recovery=3), "10001") == "F..RF"
    # True again while observed: fired again, and observed from the start.
    assert notices(rule(silence=0, recovery=3), "1001000") == "F..F..R"


def test_the_recovery_carries_its_firing_s_id_and_a_new_firing_has_another() -> None:
    r = rule(silence=0)
    course, fired = step(Course(), True, 10, r)
    course, recovered = step(course, False, 11, r)
    course, again = step(course, True, 12, r)
    assert fired and recovered and again
    assert (recovered.firing, recovered.started_minute, recovered.recovered_minute) == (fired.firing, 10, 11)
    assert again.firing != fired.firing


def test_a_minute_is_evaluated_once() -> None:
    r = rule(silence=1)
    course, fired = step(Course(), True, 10, r)
    assert fired is not None
    assert step(course, True, 10, r) == (course, None)
    assert step(course, True, 9, r) == (course, None)
