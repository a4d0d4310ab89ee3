"""verl's ``rollout.n`` repeats of a prompt (one ``uid``) share the LLM customer's opening with
``tau_user_shared_opening``: one user-simulator request per uid, every output still token-exact; never in validation
(evaluation rows, ``slime-tau prepare --eval``'s)."""

from __future__ import annotations

import itertools

import pytest

from slime_tau_plugin.adapters.verl.episodes import episode_views, step_metrics
from slime_tau_plugin.tools.servers.chat_user_server import ChatUserServer, scripted_user_reply
from tests.adapters.verl.conftest import refs_with_tasks, verl_config
from tests.adapters.verl.server_manager import HTTPServerManager
from tests.adapters.verl.test_tau_agent_loop import assert_output_invariants, dataset_rows, make_loop, run_rows


@pytest.mark.parametrize("evaluation", [False, True], ids=["training", "validation"])
def test_the_repeats_of_a_uid_share_one_customer_opening_in_training_only(
    tmp_path, tau2_backend, qwen25, oracle_server, evaluation
):
    numbers = itertools.count()

    def reply(messages, tools):  # every opening differs, as a customer at temperature > 0 would
        message = scripted_user_reply(messages, tools, 0)
        if any(m.get("role") == "assistant" for m in messages):
            return message
        return {**message, "content": f"{message['content']} (caller {next(numbers)})"}

    user = ChatUserServer(reply=reply).start()
    try:
        config = verl_config(
            "+tau.record_messages=true",
            "+tau.user=llm",
            f"+tau.user_base_url={user.base_url}",
            "+tau.user_model=customer",
            "+tau.user_shared_opening=true",
        )
        refs = refs_with_tasks(tau2_backend, "retail", "train", 2)
        rows = dataset_rows(tmp_path, config, qwen25, refs, evaluation=evaluation)
        repeats = [{**row, "uid": f"prompt-{i}"} for i, row in enumerate(rows) for _ in range(2)]  # rollout.n = 2
        outputs = run_rows(lambda: make_loop(config, HTTPServerManager(oracle_server.url), qwen25), repeats)
    finally:
        user.stop()
    openings = [r for r in user.requests if not any(m.get("role") == "assistant" for m in r["messages"])]
    for out in outputs:
        assert_output_invariants(out, config)
        assert out.extra_fields["status"] == "completed", out.extra_fields["error"]
    if evaluation:  # each validation episode meets its own customer
        firsts = {next(m["content"] for m in o.extra_fields["messages"] if m["role"] == "user") for o in outputs}
        assert len(openings) == 4 and len(firsts) == 4
        return
    assert len(openings) == 2
    for i in range(2):
        mine = outputs[2 * i : 2 * i + 2]
        firsts = {next(m["content"] for m in o.extra_fields["messages"] if m["role"] == "user") for o in mine}
        assert len(firsts) == 1 and len({tuple(o.prompt_ids) for o in mine}) == 1
    # verl's step metrics say so too (slime's names): 2 openings asked, 2 taken from the group
    metrics = step_metrics(episode_views([o.extra_fields for o in outputs]))
    prefix = next(k for k in metrics if k.endswith("tau_user/shared_opening_requests")).removesuffix("requests")
    assert metrics[f"{prefix}requests"] == 2.0 and metrics[f"{prefix}reused"] == 2.0
    assert metrics[f"{prefix}saved_share"] == 0.5
