"""The review's knobs as one value, read from ``TauConfig``'s ``tau_review_*`` keys.

``config.py`` calls :func:`parse_names` while it checks a config, so a misspelt check or tag is refused with the
other bad values (one ``ConfigError`` line naming the key). Imports ``checks``, ``verdict`` and the error tree.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.review.checks import CHECKS, DEFAULT_CHECKS
from slime_tau_plugin.engine.review.verdict import ReviewCheck, ReviewTag

if TYPE_CHECKING:
    from slime_tau_plugin.engine.config import TauConfig

__all__ = ["ReviewSettings", "parse_names"]

E = TypeVar("E", bound=enum.Enum)


def parse_names(value: str | None, kind: type[E], key: str, allowed: tuple[E, ...] | None = None) -> tuple[E, ...]:
    """``"a,b"`` as members of ``kind`` (None: ``allowed``, else every member).

    Raises:
        ConfigError: an unknown name, naming the key and the names it takes.
    """
    every = allowed if allowed is not None else tuple(kind)
    if value is None:
        return every
    names = [part.strip() for part in str(value).split(",") if part.strip()]
    out: list[E] = []
    for name in names:
        member = next((m for m in every if m.value == name), None)
        if member is None:
            expected = ", ".join(str(m.value) for m in every)
            raise ConfigError(f"{key}={value!r} names {name!r}, which is unknown; expected some of {expected}")
        if member not in out:
            out.append(member)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ReviewSettings:
    """How this run reviews its customer."""

    enabled: bool = True
    checks: tuple[ReviewCheck, ...] = DEFAULT_CHECKS
    critical_tags: tuple[ReviewTag, ...] = tuple(ReviewTag)
    """A critical finding removes the episode only when it carries one of these tags."""
    keep_flagged: bool = False
    repeat_limit: int = 3
    judge_share: float = 0.0

    @classmethod
    def from_config(cls, config: TauConfig) -> ReviewSettings:
        """The config's review keys."""
        checks = parse_names(config.review_checks, ReviewCheck, "tau_review_checks", tuple(CHECKS))
        tags = parse_names(config.review_critical_tags, ReviewTag, "tau_review_critical_tags")
        keep, share = config.review_keep_flagged, config.review_judge_share
        return cls(config.review, checks, tags, keep, config.review_repeat_limit, share)
