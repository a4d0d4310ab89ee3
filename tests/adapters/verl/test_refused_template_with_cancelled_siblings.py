"""A refused chat template under verl while a sibling episode is cancelled (issue 34 §4).

verl's agent loops share one resources build per process; a ConfigError raised by it (a template that leaves the
tools out of the prompt) must reach every waiting loop as itself. Before, a cancelled sibling cancelled the shared
future: the build's end raised ``InvalidStateError: CANCELLED`` chained onto the refusal and the other loops got
``CancelledError``. The deterministic check of the mechanism is ``tests/engine/test_shared_build.py``; here the
same with verl's real loop classes (the sibling is cancelled while the build runs, or after: either way the others
must get the refusal).
"""

from __future__ import annotations

import asyncio

from slime_tau_plugin.engine.chat.templates import load_tokenizer
from slime_tau_plugin.engine.errors import ConfigError
from tests.adapters.verl.conftest import refs_with_tasks, verl_config
from tests.adapters.verl.server_manager import HTTPServerManager
from tests.adapters.verl.test_tau_agent_loop import dataset_rows, make_loop
from tests.conftest import ROOT


def test_every_loop_gets_the_refusal_itself_when_a_sibling_is_cancelled(tmp_path, tau2_backend, qwen25):
    llama = load_tokenizer(str(ROOT / ".cache/tokenizers/llama3_1"))  # its template ignores tools=: refused
    config = verl_config()
    manager = HTTPServerManager("http://127.0.0.1:9")
    rows = dataset_rows(tmp_path, config, qwen25, refs_with_tasks(tau2_backend, "retail", "train", 4))

    async def main() -> list[BaseException | None]:
        tasks = [asyncio.create_task(make_loop(config, manager, llama).run({"temperature": 1.0}, **r)) for r in rows]
        await asyncio.sleep(0.3)  # the shared build runs in its thread (a cold tokenizer probe takes longer)
        tasks[1].cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)

    outcomes = asyncio.run(main())
    others = [outcomes[0], *outcomes[2:]]
    for outcome in others:
        assert isinstance(outcome, ConfigError), repr(outcome)
        assert "leaves 1 of 1 tool schemas out of the prompt" in str(outcome)
        assert not isinstance(outcome.__context__, asyncio.InvalidStateError)
    assert isinstance(outcomes[1], (asyncio.CancelledError, ConfigError))
