"""Which endpoint the failure guard's stop named, and whether the launch script serves it itself.

``tau_guard.py LOG [--offset N] [--config RUN_CONFIG] [--served URLS]`` reads the job's output (``train.log``)
from byte ``N`` on (this attempt's lines), finds the failure guard's last stop line and prints
``endpoint=KEY`` (a key of ``group_filter.ENDPOINTS``, ``unknown`` when no description matches) and
``served=1`` when that endpoint's base URL in the run's τ config (``tau_user_base_url`` for ``user`` and for
``customer``, the review's share of customer errors: the same simulator, answering wrong; ``tau_judge_base_url``
for ``judge``) is one of ``URLS``, the user simulators the launcher started, else ``served=0``. The launch
script (``tau_supervise.sh``) restarts the attempt for a served endpoint; a hosted one stays a stop (exit 4).

The stop line is read from the job's output because that reaches the head whichever node ran slime's rollout
manager; the endpoint is matched against the guard's own descriptions (``ENDPOINTS``), so new enum entries and
the guard's wording travel with the package.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

GUARD_MARK = "FailureGuardError"
URL_KEYS = {"user": "tau_user_base_url", "customer": "tau_user_base_url", "judge": "tau_judge_base_url"}
"""The endpoints a launch script can serve itself, and the τ config key that holds each one's URL. ``customer`` is
the review's stop (``tau_review_max_error_share``): the user simulator answers, but wrongly (a server in a bad state
after a fault, a wrong template); a fresh server is the one remedy the launcher has, bounded by MAX_RESTARTS."""


def stop_endpoint(text: str) -> str | None:
    """The ``ENDPOINTS`` key the last stop line in ``text`` names; None without a stop line."""
    from slime_tau_plugin.adapters.slime.group_filter import ENDPOINTS

    lines = [line for line in text.splitlines() if GUARD_MARK in line or "stopped the run" in line]
    if not any(GUARD_MARK in line for line in lines):
        return None
    for line in reversed(lines):
        found = [(line.find(f"on {desc}"), key) for key, desc in ENDPOINTS.items() if f"on {desc}" in line]
        if found:
            return min(found)[1]  # the first endpoint named: the one the stop is about
    return "unknown"


def served(endpoint: str, config: Path | None, urls: str) -> bool:
    """True when every URL the config gives ``endpoint`` is one of the launcher's own servers (``urls``)."""
    key = URL_KEYS.get(endpoint)
    own = {u.strip().rstrip("/") for u in urls.split(",") if u.strip()}
    if key is None or config is None or not own or not config.is_file():
        return False
    import yaml

    value = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get(key)
    wanted = {u.strip().rstrip("/") for u in str(value or "").split(",") if u.strip()}
    return bool(wanted) and wanted <= own


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--served", default="", metavar="URLS")
    ns = parser.parse_args(argv)
    try:
        with ns.log.open("rb") as fh:
            fh.seek(max(ns.offset, 0))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        print(f"error: {ns.log}: {exc.strerror}", file=sys.stderr)
        return 2
    endpoint = stop_endpoint(text)
    if endpoint is None:
        return 1
    print(f"endpoint={endpoint}")
    print(f"served={int(served(endpoint, ns.config, ns.served))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
