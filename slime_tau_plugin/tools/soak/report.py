"""What a soak prints and writes (``--json``), and whether it passed.

A soak passes when no exception escaped ``generate``, no sample came back misaligned and none was lost:
those are the plugin's promises to slime. Faults, FAILED samples, retries and breaker openings are what the
faults cost, reported but not judged (a 5% fault rate is meant to fail some episodes).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

EXAMPLES = 5
"""How many escaped exceptions / misaligned samples are quoted."""


@dataclass(slots=True)
class SoakReport:
    """The soak's numbers; filled as episodes finish."""

    command: str = ""
    sample_class: str = ""
    episodes_requested: int = 0
    episodes: int = 0
    """``generate`` calls that returned (or raised)."""
    concurrency: int = 0
    fault_specs: dict[str, str] = field(default_factory=dict)
    faults_injected: dict[str, int] = field(default_factory=dict)
    """``target.kind`` -> count (servers' ``GET /faults`` and the soak's env injector)."""
    statuses: Counter = field(default_factory=Counter)
    termination_reasons: Counter = field(default_factory=Counter)
    failed_errors: Counter = field(default_factory=Counter)
    """FAILED samples by the first words of ``metadata["error"]`` (ids stripped)."""
    exceptions_escaped: int = 0
    exception_examples: list[str] = field(default_factory=list)
    misaligned: int = 0
    misaligned_examples: list[str] = field(default_factory=list)
    lost: int = 0
    retries: int = 0
    outage_wait_s: float = 0.0
    slot_wait_s: float = 0.0
    breaker_openings: dict[str, int] = field(default_factory=dict)
    outages: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    loop_worst_stall_s: float = 0.0
    loop_worst_stall_at_s: float = 0.0
    loop_stalls_over_100ms: int = 0
    rss_mb_start: float | None = None
    rss_mb_at_1000: float | None = None
    rss_mb_end: float | None = None
    rss_mb_by_episode: dict[int, float] = field(default_factory=dict)
    """RSS every 1,000 episodes (the memory trend)."""
    server_rss_mb: dict[str, float | None] = field(default_factory=dict)

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def passed(self) -> bool:
        return self.exceptions_escaped == 0 and self.misaligned == 0 and self.lost == 0

    def note_exception(self, exc: BaseException) -> None:
        self.exceptions_escaped += 1
        if len(self.exception_examples) < EXAMPLES:
            self.exception_examples.append(f"{type(exc).__name__}: {exc}"[:300])

    def note_misaligned(self, problem: str, index: int) -> None:
        self.misaligned += 1
        if len(self.misaligned_examples) < EXAMPLES:
            self.misaligned_examples.append(f"sample {index}: {problem}")

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["episodes_per_s"] = round(self.episodes_per_s, 3)
        data["passed"] = self.passed
        data["faults_injected_total"] = sum(self.faults_injected.values())
        for name in ("statuses", "termination_reasons", "failed_errors"):
            data[name] = dict(getattr(self, name).most_common())
        return data

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, default=str)

    def to_text(self) -> str:
        """The human summary: one fact per line, the pass/fail counters first."""
        mb = _mb
        total = sum(self.faults_injected.values())
        by_kind = ", ".join(f"{k}={v}" for k, v in sorted(self.faults_injected.items()) if v) or "none"
        lines = [
            f"soak: {self.command}",
            f"sample class        {self.sample_class}",
            f"episodes            {self.episodes} of {self.episodes_requested} (concurrency {self.concurrency})",
            f"exceptions escaped  {self.exceptions_escaped}",
            f"misaligned samples  {self.misaligned}",
            f"samples lost        {self.lost}",
            f"faults injected     {total}: {by_kind}",
            f"statuses            {_counts(self.statuses)}",
            f"termination reasons {_counts(self.termination_reasons)}",
            f"retries             {self.retries}",
            f"outage wait total   {self.outage_wait_s:.1f}s (slot wait total {self.slot_wait_s:.1f}s)",
            f"breaker openings    {_counts(Counter(self.breaker_openings)) or 0}",
            f"outages             {'; '.join(self.outages) or 'none'}",
            f"wall time           {self.wall_s:.1f}s ({self.episodes_per_s:.2f} episodes/s)",
            f"event-loop stall    worst {self.loop_worst_stall_s * 1000:.0f} ms at {self.loop_worst_stall_at_s:.0f}s; "
            f"{self.loop_stalls_over_100ms} ticks late by > 100 ms",
            f"RSS (MB)            start {mb(self.rss_mb_start)}, at 1,000 {mb(self.rss_mb_at_1000)}, "
            f"end {mb(self.rss_mb_end)}",
            f"RSS by episode      {', '.join(f'{k}: {v:.0f}' for k, v in self.rss_mb_by_episode.items()) or '-'}",
            f"server RSS (MB)     {', '.join(f'{k} {mb(v)}' for k, v in self.server_rss_mb.items())}",
        ]
        if self.failed_errors:
            lines.append("FAILED by cause     " + "; ".join(f"{n}x {e}" for e, n in self.failed_errors.most_common(6)))
        lines += [f"  escaped: {e}" for e in self.exception_examples]
        lines += [f"  misaligned: {e}" for e in self.misaligned_examples]
        lines.append("PASS" if self.passed else "FAIL: exceptions escaped, misaligned or lost samples above")
        return "\n".join(lines)


def _counts(counter: Counter) -> str:
    return ", ".join(f"{k} {v}" for k, v in counter.most_common())


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
