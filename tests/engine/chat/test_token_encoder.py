"""The Rust tokenizer called directly gives transformers' ``encode`` ids, or is not used; τ² task lists need no lock."""

from __future__ import annotations

import threading

import pytest

from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.engine.chat.token_encoder import TokenEncoder
from tests.fakes import FakeTokenizer


@pytest.mark.parametrize("name", ["qwen25", "qwen3"])
def test_direct_encoding_equals_encode_on_real_tool_outputs_and_templates(tau2_backend, request, name):
    tokenizer = request.getfixturevalue(name)
    encoder = TokenEncoder(tokenizer)
    assert encoder.is_direct, "a Qwen fast tokenizer encodes through its backend"
    session = tau2_backend.open(tau2_backend.task_refs("retail", "train")[0])
    template = ChatTemplate(tokenizer, session.tools)
    texts = [
        session.agent_system_prompt,
        template.render([{"role": "user", "content": "hi"}], add_generation_prompt=True),
    ]
    for call in session.script.gold_actions[:6]:
        if call.requestor == "assistant":
            texts.append(session.step(_call(call)).content)
    for text in texts:
        assert encoder.encode(text) == tokenizer.encode(text, add_special_tokens=False)


def test_a_backend_someone_set_to_truncate_is_not_used_directly(qwen25):
    encoder = TokenEncoder(qwen25)
    text = "word " * 50
    qwen25.backend_tokenizer.enable_truncation(max_length=4)  # as a shared tokenizer's other user might
    try:
        assert len(encoder.encode(text)) > 4
    finally:
        qwen25.backend_tokenizer.no_truncation()
    assert encoder.encode(text) == qwen25.encode(text, add_special_tokens=False)


def test_a_tokenizer_without_a_rust_backend_uses_its_own_encode():
    tokenizer = FakeTokenizer("chatml")
    encoder = TokenEncoder(tokenizer)
    assert not encoder.is_direct
    assert encoder.encode("hello <|im_end|>") == list(tokenizer.encode("hello <|im_end|>", add_special_tokens=False))


def test_task_lists_are_read_while_a_domain_build_holds_the_backend_lock(tau2_backend):
    """slime's loop looks integer prompts up in the task list while worker threads may be building a domain."""
    tau2_backend.task_refs("retail", "train")  # loaded (resources load the configured split when built)
    found: list[int] = []
    with tau2_backend._lock:  # a domain build in progress
        reader = threading.Thread(target=lambda: found.append(len(tau2_backend.task_refs("retail", "train"))))
        reader.start()
        reader.join(timeout=30)
        assert found and found[0] > 0, "the task list waited for the domain lock"


def _call(action):
    from slime_tau_plugin.engine.envs.base import EnvToolCall

    return EnvToolCall(action.name, dict(action.arguments), "call-0")
