"""A stand-in for slime's ``Sample`` (slime/utils/types.py), for tests: slime is not on PyPI.

The stand-in itself is the package's (``slime_tau_plugin.tools.soak.strict_sample.StrictSample``, which the soak
fills too); this module names it ``Sample`` for the tests and adds :class:`PlainSample`, an older slime's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slime_tau_plugin.tools.soak.strict_sample import PrefixCacheInfo, StrictSample

Sample = StrictSample

__all__ = ["PlainSample", "PrefixCacheInfo", "Sample"]


@dataclass
class PlainSample:
    """A Sample without ``append_response_tokens`` (older slime): generate() sets fields directly."""

    Status = Sample.Status

    prompt: Any = ""
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    reward: float | None = None
    loss_mask: list[int] | None = None
    rollout_log_probs: list[float] | None = None
    remove_sample: bool = False
    status: Sample.Status = Sample.Status.PENDING
    metadata: dict = field(default_factory=dict)
    session_id: str | None = None
