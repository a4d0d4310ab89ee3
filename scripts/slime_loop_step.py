"""What the one-step checks (``slime_loop_review.py``, ``slime_loop_group.py``, ``slime_loop_stops.py``) share:
their command line and one train step of slime's ``generate_rollout_async`` with a user server of their own, run
the way ``slime_loop_check.py`` runs it (its server, its slime args, our ``generate``)."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import slime_loop_check as loop

STEP_SETTINGS = {
    "extra_groups": 2,
    "max_response_len": 1024,
    "max_tokens_per_gpu": 16384,
    "max_context_len": 16384,
    "filter": "none",
    "extra_flags": "",
}
"""The slime settings of the one-step checks (``one_step``) that their command lines do not set."""
STEP_API = ("generate_rollout_async", "run", "init_http_client", "load_function")
"""What ``one_step`` calls of slime."""


def step_parser(doc: str) -> argparse.ArgumentParser:
    """The command line every one-step check has (4 groups of 4 samples); the check adds its own flags."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--n-train-groups", type=int, default=4)
    p.add_argument("--n-samples-per-prompt", type=int, default=4)
    return p


def one_step(
    ns: argparse.Namespace,
    slime: Any,
    prefix: str,
    start_user: Callable[[], tuple[Any, str]],
    tau_yaml: Callable[[str], str],
    rows: Callable[[Path], tuple[Path, Path]] | None = None,
) -> tuple[Any, Any, Any]:
    """One train step of slime's ``generate_rollout_async`` (our oracle server, ``STEP_SETTINGS`` put on ``ns``)
    with a user server the caller starts (``start_user() -> (server, base URL)``) and ``tau_yaml(user URL)`` as
    the custom config; ``rows(tmp) -> (train rows, eval config)`` (default: ``prepare`` of τ² retail). Both
    servers are stopped before it returns (args, slime's output, the user server): the caller checks after."""
    vars(ns).update(STEP_SETTINGS)
    tok, server, user = loop.tokenizer_dir(), None, None
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp_name:
        tmp = Path(tmp_name)
        try:
            train, eval_yaml = rows(tmp) if rows is not None else loop.prepare(tmp, ["tau2/retail/test"])
            server, url = loop.start_server(tok, 0, tmp / "server.log")
            user, user_url = start_user()
            (custom := tmp / "tau.yaml").write_text(tau_yaml(user_url))
            args = loop.build_args(ns, tok, url, train, eval_yaml, custom)
            slime.init_http_client(args)
            data_source = slime.load_function(args.data_source_path)(args)
            out, _ = slime.run(slime.generate_rollout_async(args, 0, data_source.get_samples))
        finally:
            loop.stop_started(server, user)
    return args, out, user
