"""One alarm's course, a minute at a time: whether its rule's expression held
for an entity moves it between SkyWalking's states (10.4) and may give a
notice to send, a firing or a recovery.

- NORMAL or RECOVERED: it fires when the expression holds.
- FIRING: it stays so while the expression holds, silent the
  ``silence-period`` minutes after each firing, then fires again (a new
  firing, with an id of its own).
- The expression false: the alarm is observed; it recovers once the
  expression has been false ``recovery-observation-period`` minutes in a row
  (at once for 0), but never within the silence after a firing.

The state is plain data, stored between minutes, so that whichever node
evaluates the next minute goes on from it."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from skyoap.alarm.settings import Rule


class State(enum.Enum):
    NORMAL = "NORMAL"
    FIRING = "FIRING"
    SILENCED_FIRING = "SILENCED_FIRING"
    OBSERVING_RECOVERY = "OBSERVING_RECOVERY"
    RECOVERED = "RECOVERED"


@dataclass(frozen=True)
class Course:
    """Where one rule's alarm of one entity stands."""

    state: State = State.NORMAL
    minute: int = -1
    """The last minute evaluated (minutes since the epoch); -1: none yet."""
    silent_until: int = 0
    """The first minute after the silence of the last firing."""
    observed: int = 0
    """Minutes in a row the expression has been false while firing."""
    firing: str = ""
    """The id of the firing in force (its recovery carries it too)."""
    started_minute: int = 0
    """The minute of that firing."""

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "state": self.state.value}  # its fields (asdict's deep copy is slow)

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Course:
        return cls(**{**doc, "state": State(doc["state"])})


class Kind(enum.Enum):
    FIRING = "firing"
    RECOVERY = "recovery"


@dataclass(frozen=True)
class Notice:
    kind: Kind
    firing: str
    """The firing's id: a resend of the notice carries the same."""
    started_minute: int
    recovered_minute: int | None = None


def step(course: Course, held: bool, minute: int, rule: Rule) -> tuple[Course, Notice | None]:
    """The course after ``minute``, in which the expression ``held`` or not,
    and the notice it gives. A minute at or before the last one evaluated
    changes nothing and gives nothing: a minute is evaluated once."""
    if minute <= course.minute:
        return course, None
    course = replace(course, minute=minute)
    silent = minute < course.silent_until
    if held:
        if course.state in (State.NORMAL, State.RECOVERED) or not silent:
            fired = replace(
                course,
                state=State.FIRING,
                silent_until=minute + rule.silence_period + 1,
                observed=0,
                firing=uuid.uuid4().hex,
                started_minute=minute,
            )
            return fired, Notice(Kind.FIRING, fired.firing, minute)
        return replace(course, state=State.SILENCED_FIRING, observed=0), None
    if course.state in (State.NORMAL, State.RECOVERED):
        return replace(course, state=State.NORMAL), None
    observed = course.observed + 1
    if observed >= max(1, rule.recovery_observation_period) and not silent:
        notice = Notice(Kind.RECOVERY, course.firing, course.started_minute, minute)
        return replace(course, state=State.RECOVERED, observed=0), notice
    return replace(course, state=State.OBSERVING_RECOVERY, observed=observed), None
