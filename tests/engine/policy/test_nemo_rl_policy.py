"""The policy behind NeMo RL's vLLM server surface (``/tokenize``, ``/v1/chat/completions`` with its required
prefix), over real HTTP to our stand-in (``tools/servers/nemo_rl_server.py``): the parity cases through slime's
``generate`` give the same records as through SGLang's ``/generate``; ids the server's template would re-tokenize
stay ours; a server that cannot reproduce our prompt is refused before it generates; several servers share the load,
each episode staying on its server."""

from __future__ import annotations

import asyncio

import pytest

from slime_tau_plugin.engine.errors import PolicyProtocolError
from slime_tau_plugin.engine.net.endpoints import GuardSettings
from slime_tau_plugin.engine.net.retry import RetrySettings
from slime_tau_plugin.engine.policy.nemo_rl import NeMoRLPolicy
from slime_tau_plugin.tools.servers.fake_models import OracleModel, ScriptedModel
from slime_tau_plugin.tools.servers.nemo_rl_server import NeMoRLServer, splice_prefix
from tests.parity import EXPECTED_STATUS, PARITY_CASES, PARITY_SETS, ParityCase, assert_same, slime_record

FAST_RETRY = RetrySettings(attempts=2, backoff_s=0.01, max_backoff_s=0.02)
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "no_stop_trim": True, "skip_special_tokens": False}


@pytest.fixture(scope="module")
def nemo_rl(qwen25, tau2_backend):
    from slime_tau_plugin.tools.servers import oracle_scripts

    model = OracleModel(qwen25, oracle_scripts(list(PARITY_SETS)))
    with NeMoRLServer(model) as server:
        yield server


@pytest.fixture(scope="module")
def oracle(qwen25, oracle_server_factory):
    return oracle_server_factory(qwen25, tuple((d, s) for _, d, s in PARITY_SETS))


@pytest.mark.parametrize("case", PARITY_CASES, ids=lambda c: c.name)
def test_an_episode_through_nemo_rls_server_is_slimes_episode(oracle, nemo_rl, qwen25_dir, case):
    slime = slime_record(oracle.url, qwen25_dir, case)
    assert slime.status == EXPECTED_STATUS[case.name]
    since = nemo_rl.chat_requests.total
    settings = {**case.settings, "tau_policy_api": "nemo-rl"}
    ours = slime_record(nemo_rl.url, qwen25_dir, ParityCase(case.name, case.task, case.seed, settings))
    assert_same(slime, ours, "NeMo RL's server", case)
    new = nemo_rl.chat_requests.total - since
    sent = list(nemo_rl.chat_requests)[-new:] if new else []
    assert bool(sent) == (slime.reward is not None or case.settings != {})
    for body in sent:  # every turn: the held ids up to their last EOS as the required prefix, sampling explicit
        prefix = body["required_prefix_token_ids"]
        assert list(ours.tokens[: len(prefix)]) == prefix and body["top_p"] == 1.0 and body["top_logprobs"] == 0


def test_splice_follows_nemo_rls_documented_example():
    """``replace_prefix_tokens``' docstring example (eos 2): the model's own ids up to EOS, the template after it."""
    out = splice_prefix(
        [11, 12, 13, 40, 41, 220, 17, 2],
        [11, 12, 13, 40, 41, 1001, 2],
        [11, 12, 13, 40, 41, 1001, 2, 21, 22, 40, 41],
        2,
    )
    assert out == [11, 12, 13, 40, 41, 220, 17, 2, 21, 22, 40, 41]


def _scripted_server(qwen25, **kw) -> NeMoRLServer:
    return NeMoRLServer(ScriptedModel(qwen25, ["Hello there.", "Done."]), **kw)


def _held(qwen25) -> list[int]:
    """A conversation whose assistant turn was sampled as ids the template would not produce (one id per letter):
    a re-templating server would feed the model other ids than it sampled."""
    from slime_tau_plugin.engine.chat.templates import ChatTemplate

    template = ChatTemplate(qwen25)
    opening = template.render([{"role": "user", "content": "Say 4."}], add_generation_prompt=True)
    ids = qwen25.encode(opening, add_special_tokens=False)
    odd = [qwen25.convert_tokens_to_ids(c) for c in "four"]
    assert odd != qwen25.encode("four", add_special_tokens=False)
    full = template.render(
        [
            {"role": "user", "content": "Say 4."},
            {"role": "assistant", "content": "four"},
            {"role": "user", "content": "Again."},
        ],
        add_generation_prompt=True,
    )
    after = full[
        full.index("four") + len("four") :
    ]  # <|im_end|>\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n
    return ids + odd + qwen25.encode(after, add_special_tokens=False)


def test_ids_the_template_would_retokenize_are_sampled_from_as_held(qwen25):
    with _scripted_server(qwen25) as server:
        policy = NeMoRLPolicy(server.url + "/v1", qwen25.eos_token_id, retry=FAST_RETRY)
        held = _held(qwen25)
        result = asyncio.run(policy.generate(held, {**SAMPLING, "max_new_tokens": 64}, rid="ep-1"))
        assert result.output_ids[-1] == qwen25.eos_token_id and len(result.log_probs) == len(result.output_ids)
        assert server.tokenize_requests.total == 1, "the prefix contract is proven once per server, by its /tokenize"
        last_eos = max(i for i, t in enumerate(held) if t == qwen25.eos_token_id)
        assert server.chat_requests[-1]["required_prefix_token_ids"] == held[: last_eos + 1]


def test_a_server_whose_generation_prompt_differs_is_refused_before_it_generates(qwen25):
    with _scripted_server(qwen25) as server:
        policy = NeMoRLPolicy(server.url, qwen25.eos_token_id, retry=FAST_RETRY)
        held = _held(qwen25) + qwen25.encode("<think>\n\n</think>\n\n", add_special_tokens=False)
        with pytest.raises(PolicyProtocolError, match="would not sample from the held ids"):
            asyncio.run(policy.generate(held, {**SAMPLING, "max_new_tokens": 8}, rid="ep-1"))
        assert server.chat_requests.total == 0
        with pytest.raises(PolicyProtocolError, match="no EOS token"):
            asyncio.run(policy.generate([1, 2, 3], {**SAMPLING, "max_new_tokens": 8}, rid="ep-2"))


def test_nemo_rl_refuses_off_policy_sampling_and_the_client_never_sends_it(qwen25):
    from slime_tau_plugin.engine.errors import PolicyConnectionError, PolicyHTTPError

    with _scripted_server(qwen25, temperature=0.7, top_p=0.9) as server:
        no_wait = GuardSettings(outage_tolerance_s=0.0)  # NeMo RL's assertion is a 500: retried, not waited out
        policy = NeMoRLPolicy(server.url, qwen25.eos_token_id, retry=FAST_RETRY, guard_settings=no_wait)
        held = _held(qwen25)
        out = asyncio.run(policy.generate(held, {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 8}, rid="ep-2"))
        assert out.output_ids and server.chat_requests[-1]["temperature"] == 0.7
        with pytest.raises((PolicyHTTPError, PolicyConnectionError), match="500|is down"):
            asyncio.run(policy.generate(held, {**SAMPLING, "max_new_tokens": 8}, rid="ep-1"))
        assert server.chat_requests[-1]["temperature"] == 1.0  # what the row asked for, sent as asked


def test_several_servers_share_episodes_and_each_episode_keeps_its_server(qwen25):
    with _scripted_server(qwen25) as a, _scripted_server(qwen25) as b:
        policy = NeMoRLPolicy(f"{a.url}/v1,{b.url}/v1", qwen25.eos_token_id, retry=FAST_RETRY)
        held = _held(qwen25)

        async def play() -> None:
            for turn in range(3):
                for episode in ("ep-x", "ep-y"):
                    await policy.generate(held, {**SAMPLING, "max_new_tokens": 8}, rid=f"{episode}-{turn}")

        asyncio.run(play())
        assert a.chat_requests.total == b.chat_requests.total == 3, "both servers used, one episode each"
        assert a.tokenize_requests.total == b.tokenize_requests.total == 1

        async def many() -> list[BaseException]:  # an unproven tail met by 8 episodes at once: one proof, shared
            other = held + qwen25.encode("Sure", add_special_tokens=False)
            calls = [policy.generate(other, {**SAMPLING, "max_new_tokens": 8}, rid=f"ep-{n}-0") for n in range(8)]
            return await asyncio.gather(*calls, return_exceptions=True)

        failures = asyncio.run(many())
        assert all(isinstance(f, PolicyProtocolError) for f in failures), failures
        assert (a.tokenize_requests.total, b.tokenize_requests.total) == (2, 1)  # refused by the first server


def test_nemo_rls_context_clamps_a_turn_and_a_full_prompt_is_a_context_error(qwen25):
    """NeMo RL clamps ``max_tokens`` to what ``max_model_len`` leaves (the turn ends ``length``) and refuses a prompt
    that fills it with a 400 the engine reads as the context limit (the episode ends, it does not fail)."""
    from slime_tau_plugin.engine.errors import ContextLengthError
    from slime_tau_plugin.engine.policy.client import FinishReason

    held = _held(qwen25)
    with (
        _scripted_server(qwen25, context_len=len(held) + 2) as roomy,
        _scripted_server(qwen25, context_len=len(held)) as full,
    ):
        out = asyncio.run(
            NeMoRLPolicy(roomy.url, qwen25.eos_token_id).generate(held, {**SAMPLING, "max_new_tokens": 64})
        )
        assert out.finish_reason is FinishReason.LENGTH and len(out.output_ids) == 2
        with pytest.raises(ContextLengthError, match="max_model_len"):
            asyncio.run(NeMoRLPolicy(full.url, qwen25.eos_token_id).generate(held, {**SAMPLING, "max_new_tokens": 8}))
