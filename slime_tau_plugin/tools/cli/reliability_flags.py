"""``rollout``'s flags for outages, retries, in-flight bounds and the episode deadline (``endpoints.py``).

Each sets the ``TauConfig`` key of the same name; unset, the config's default applies (the README's
reliability section says what each default is and why).
"""

from __future__ import annotations

import argparse

from slime_tau_plugin.tools.cli.args import non_negative_float, non_negative_int, positive_float, positive_int


def add_reliability_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("outages and deadlines (a failing endpoint costs time, not samples)")
    group.add_argument(
        "--outage-tolerance-s",
        type=non_negative_float,
        default=None,
        metavar="S",
        help="how long episodes wait for a policy/user/judge endpoint that answered before and now fails every "
        "request, before they FAIL naming it (0 = fail after each request's own tries) (default: 300)",
    )
    group.add_argument(
        "--retry-budget",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="retries one episode may spend on transient faults, all endpoints together (default: 16)",
    )
    group.add_argument(
        "--policy-max-inflight",
        type=positive_int,
        default=None,
        metavar="N",
        help="requests in flight at once to the policy server (default: unbounded)",
    )
    group.add_argument(
        "--user-max-inflight",
        type=positive_int,
        default=None,
        metavar="N",
        help="requests in flight at once to the LLM user simulator (default: unbounded)",
    )
    group.add_argument(
        "--episode-timeout-s",
        type=positive_float,
        default=None,
        metavar="S",
        help="wall-clock deadline per episode: past it the episode ends at the next turn as deadline "
        "(TRUNCATED, not scored) (default: none)",
    )
