"""The slime ``args`` object the e2e tests hand to ``generate``: what slime's argparse would give.

One builder for every test that plays through slime's entry point, so a new slime attribute or a
changed default is written once.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


def slime_args(server: Any, tokenizer_dir: str, **extra: Any) -> SimpleNamespace:
    """slime's args for a policy server (anything with ``.url``, or the URL itself) and a tokenizer;
    ``extra`` adds or overrides attributes (``tau_*`` keys, ``rollout_max_context_len``...)."""
    url = server if isinstance(server, str) else server.url
    host, port = url.removeprefix("http://").split(":")
    base = dict(
        hf_checkpoint=tokenizer_dir,
        sglang_router_ip=host,
        sglang_router_port=int(port),
        rollout_max_context_len=32768,
        rollout_max_response_len=None,
        partial_rollout=False,
        tau_record_messages=True,
    )
    return SimpleNamespace(**{**base, **extra})
