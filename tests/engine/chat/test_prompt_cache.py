"""Prompt ids with the shared system/tools text tokenized once equal a direct encode, with real Qwen templates."""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.chat.templates import ChatTemplate


@pytest.mark.parametrize("name", ["qwen25", "qwen3"])
def test_cached_prompt_ids_equal_the_direct_encoding_for_every_domain(tau2_backend, request, name):
    tokenizer = request.getfixturevalue(name)
    for domain, split in (("retail", "train"), ("airline", "test"), ("telecom", "train")):
        refs = tau2_backend.task_refs(domain, split)[:12]
        template = None
        for ref in refs:
            session = tau2_backend.open(ref)
            template = template or ChatTemplate(tokenizer, session.tools)
            messages = [
                {"role": "system", "content": session.agent_system_prompt},
                {"role": "user", "content": session.script.user_instructions},
            ]
            direct = tokenizer.encode(template.render(messages, add_generation_prompt=True), add_special_tokens=False)
            assert template.prompt_ids(messages) == direct
        assert template._pieces.enabled, "a real Qwen tokenizer splits at added tokens: the cache must stay on"
        assert len(template._pieces._cache) >= 1


def test_a_tokenizer_that_merges_across_added_tokens_turns_the_cache_off(qwen25):
    """If pieces do not encode independently, the one-off check catches it and the direct encoding wins."""

    class Merging:
        """Wraps Qwen2.5 but encodes '<|im_end|>\\n<|im_start|>' as one made-up id (a merge across the split)."""

        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def encode(self, text, add_special_tokens=False):
            ids = list(self.inner.encode(text, add_special_tokens=False))
            if "<|im_end|>\n<|im_start|>" in text:
                ids.append(7)  # differs from the sum of its pieces
            return ids

    tokenizer = Merging(qwen25)
    template = ChatTemplate(tokenizer)
    messages = [{"role": "system", "content": "policy " * 600}, {"role": "user", "content": "hi"}]
    expected = tokenizer.encode(template.render(messages, add_generation_prompt=True))
    assert template.prompt_ids(messages) == expected
    assert template._pieces.enabled is False
    assert template.prompt_ids(messages) == expected
