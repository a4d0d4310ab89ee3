"""ChatTemplate arithmetic against FakeTokenizer: prompt ids, end-of-turn, continuations, TITO fidelity, the probe."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from slime_tau_plugin.engine.chat.template_probe import Fidelity, TemplateMode
from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.engine.chat.tool_prompt import tools_system_text
from slime_tau_plugin.engine.choices import ToolsInPrompt
from slime_tau_plugin.engine.episode.trajectory import Trajectory
from slime_tau_plugin.engine.errors import ConfigError
from tests.fakes import FakeTokenizer

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Look up an order.",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        },
    }
]
CALL = '<tool_call>\n{"name": "get_order", "arguments": {"id": "ab"}}\n</tool_call>'
OPENING = [
    {"role": "system", "content": "You are a shop agent."},
    {"role": "user", "content": "hello, where is order ab?"},
]

Turn = tuple[list[int], list[dict[str, Any]]]


def _template(
    kind: str = "chatml", source: str | None = None, **template_kwargs: Any
) -> tuple[FakeTokenizer, ChatTemplate]:
    tok = FakeTokenizer(kind)
    if source is not None:
        tok.chat_template = source
    return tok, ChatTemplate(tok, TOOLS, template_kwargs)


_TURN = "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}"
_GENERATION = "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
_TOOLS = "{%- if tools -%}{{- '<|im_start|>schemas\\n' + (tools | tojson) + '<|im_end|>\\n' -}}{%- endif -%}"
STATEFUL = (  # like DeepSeek V3: the first tool output of the conversation opens a list, later ones continue it
    _TOOLS + "{%- set ns = namespace(opened=false) -%}{%- for m in messages -%}"
    "{%- if m.role == 'tool' and ns.opened -%}{{- '<|im_start|>more\\n' + m.content + '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'tool' -%}{{- '<|im_start|>tools\\n' + m.content + '<|im_end|>\\n' -}}"
    "{%- set ns.opened = true -%}"
    "{%- else -%}" + _TURN + "{%- endif -%}{%- endfor -%}" + _GENERATION
)
REJECTS_TOOLS = (
    "{%- for m in messages -%}{%- if m.role == 'tool' -%}{{- raise_exception('No tool role.\\nSorry') -}}{%- endif -%}"
    + _TURN
    + "{%- endfor -%}"
    + _GENERATION
)
DROPS_TOOLS = "{%- for m in messages if m.role != 'tool' -%}" + _TURN + "{%- endfor -%}" + _GENERATION


def _roll(ct: ChatTemplate, opening: list[dict[str, Any]], turns: Sequence[Turn]) -> tuple[Trajectory, list[dict]]:
    """Hold ids the way the agent does: prompt, then per turn the model's ids unchanged and the continuation."""
    messages = list(opening)
    traj = Trajectory(ct.prompt_ids(messages))
    for model_ids, new_messages in turns:
        traj.add_model_turn(model_ids, [-1.0] * len(model_ids))
        messages.append({"role": "assistant", "content": ct.decode(model_ids)})
        continuation = ct.continuation_ids(new_messages, messages)
        assert continuation is not None
        traj.add_continuation(continuation)
        messages.extend(new_messages)
    return traj, messages


def _model(ct: ChatTemplate, text: str) -> list[int]:
    """Ids a well-behaved model samples: the canonical tokenization of its text, then the end-of-turn."""
    return [*ct.encode(text), *ct.eot_ids]


# --- prompt and end-of-turn ---------------------------------------------------------------------------------


def test_prompt_ids_are_the_encoded_render_with_generation_prompt() -> None:
    tok, ct = _template()
    ids = ct.prompt_ids(OPENING)
    text = ct.render(OPENING, add_generation_prompt=True)
    assert ids == tok.encode(text)
    assert text.endswith("<|im_start|>assistant\n")
    assert '"name": "get_order"' in tok.decode(ids)  # the tool set reaches the template


def test_template_kwargs_reach_the_template() -> None:
    tok, ct = _template("think", enable_thinking=False)
    assert tok.decode(ct.prompt_ids(OPENING)).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_chatml_end_of_turn_is_the_special_im_end_token() -> None:
    _, ct = _template()
    assert (ct.eot_text, ct.eot_ids) == ("<|im_end|>", [2])


def test_tokenizer_without_chat_template_is_a_config_error() -> None:
    tok = FakeTokenizer()
    tok.chat_template = None
    with pytest.raises(ConfigError, match="fake/chatml"):
        ChatTemplate(tok)


def test_template_without_an_end_of_turn_marker_is_a_config_error() -> None:
    tok = FakeTokenizer()
    tok.chat_template = "{% for m in messages %}{{ m.role + ': ' + m.content + '\\n\\n' }}{% endfor %}"
    with pytest.raises(ConfigError, match="end-of-turn"):
        ChatTemplate(tok)


def test_decode_strips_the_end_of_turn_and_keeps_other_tokens() -> None:
    tok, ct = _template()
    assert ct.decode([*tok.encode(CALL), 2]) == CALL
    assert ct.decode(tok.encode("no eot here")) == "no eot here"


# --- non-rewriting template: held ids == tokenize(render(conversation)) -------------------------------------


def test_chatml_held_ids_equal_full_render_over_tool_and_user_turns() -> None:
    tok, ct = _template()
    turns = [
        (_model(ct, CALL), [{"role": "tool", "content": "order ab: shipped"}, {"role": "tool", "content": "eta 2d"}]),
        (_model(ct, "Order ab is shipped, hello!"), [{"role": "user", "content": "thanks. lo and behold"}]),
        (_model(ct, CALL), [{"role": "tool", "content": "still shipped"}]),
    ]
    traj, messages = _roll(ct, OPENING, turns)
    assert traj.ids == tok.encode(ct.render(messages, add_generation_prompt=True))
    assert traj.loss_mask.count(1) == sum(len(ids) for ids, _ in turns)


def test_chatml_safe_and_unsafe_continuations_agree_after_a_special_end_of_turn() -> None:
    _, ct = _template()
    new = [{"role": "tool", "content": "x"}]
    continuation = ct.continuation_ids(new)
    assert continuation == ct.continuation_ids_unsafe(new)
    assert continuation[:2] == ct.encode("\n<|im_start|>")


def test_turn_without_end_of_turn_is_closed_with_eot_ids_before_the_continuation() -> None:
    tok, ct = _template()
    new = [{"role": "user", "content": "and now?"}]
    generated = tok.encode("Stopped on a stop string")  # no <|im_end|> sampled
    held = [*ct.prompt_ids(OPENING), *generated, *ct.eot_ids, *ct.continuation_ids(new)]
    full = [*OPENING, {"role": "assistant", "content": ct.decode(generated)}, *new]
    assert held == tok.encode(ct.render(full, add_generation_prompt=True))
    without_eot = [*ct.prompt_ids(OPENING), *generated, *ct.continuation_ids(new)]
    assert without_eot != tok.encode(ct.render(full, add_generation_prompt=True))


def test_generated_ids_are_kept_even_when_text_would_retokenize_differently() -> None:
    tok, ct = _template()
    generated = [*tok.encode("hel"), *tok.encode("lo"), *ct.eot_ids]  # a valid but non-canonical sampling
    new = [{"role": "user", "content": "hi"}]
    traj, messages = _roll(ct, OPENING, [(generated, new)])
    full = tok.encode(ct.render(messages, add_generation_prompt=True))
    start = len(traj.prompt_ids)
    continuation = ct.continuation_ids(new)

    assert tok.encode("hello") != generated[:-1]  # re-tokenizing would change the model's ids
    assert traj.ids[start : start + len(generated)] == generated  # ...but they are held unchanged
    assert traj.ids != full
    assert tok.decode(traj.ids) == tok.decode(full)  # same text, different ids
    # The difference is confined to the model's span; the continuation starts cleanly after <|im_end|>.
    assert full[:start] == traj.ids[:start]
    assert full[start : -len(continuation)] == [*tok.encode("hello"), *ct.eot_ids]
    assert traj.ids[start + len(generated) :] == continuation == full[-len(continuation) :]


# --- history-rewriting template (Qwen3-like <think>) --------------------------------------------------------


def test_think_template_continuation_is_computed_and_difference_is_only_the_old_think_blocks() -> None:
    tok, ct = _template("think")
    think1, think2 = "<think>\nneed lookup\n</think>\n\n", "<think>\nanswer now\n</think>\n\n"
    model1, model2 = _model(ct, think1 + CALL), _model(ct, think2 + "Order ab is shipped.")
    tool_reply = [{"role": "tool", "content": "order ab: shipped"}]
    user_reply = [{"role": "user", "content": "thanks"}]
    assert ct.continuation_ids(tool_reply) is not None
    assert ct.continuation_ids(user_reply) is not None

    traj, messages = _roll(ct, OPENING, [(model1, tool_reply)])
    # Before a new user turn the template still shows the think block: held ids == what it renders.
    assert traj.ids == tok.encode(ct.render(messages, add_generation_prompt=True))

    traj, messages = _roll(ct, OPENING, [(model1, tool_reply), (model2, user_reply)])
    full = tok.encode(ct.render(messages, add_generation_prompt=True))
    assert traj.ids != full
    # Exactly the two think blocks (as the model sampled them) are missing from the re-render.
    at1 = len(traj.prompt_ids)
    at2 = at1 + len(model1) + len(ct.continuation_ids(tool_reply))
    span1, span2 = tok.encode(think1), tok.encode(think2)
    assert traj.ids[at1 : at1 + len(span1)] == span1
    assert traj.ids[at2 : at2 + len(span2)] == span2
    first_diff = next(i for i, (a, b) in enumerate(zip(traj.ids, full, strict=False)) if a != b)
    assert first_diff == at1
    without_think = traj.ids[:at1] + traj.ids[at1 + len(span1) : at2] + traj.ids[at2 + len(span2) :]
    assert without_think == full


# --- end-of-turn that is plain text (not prefix-safe) -------------------------------------------------------


def test_plain_text_end_of_turn_has_no_safe_continuation_but_an_unsafe_one() -> None:
    tok, ct = _template("text_eot")
    new = [{"role": "user", "content": "ok"}]
    assert ct.eot_text == "END"
    assert ct.eot_ids == tok.encode("END")
    assert ct.continuation_ids(new) is None
    unsafe = ct.continuation_ids_unsafe(new)
    assert tok.decode(unsafe) == "\n### user:\nokEND\n### assistant:\n"
    assert tok.encode("END" + tok.decode(unsafe))[: len(ct.eot_ids)] != ct.eot_ids  # "D\n" merges


def test_plain_text_end_of_turn_is_stripped_by_decode() -> None:
    tok, ct = _template("text_eot")
    assert ct.decode(tok.encode("Sure") + tok.encode("END")) == "Sure"


def test_unsafe_continuation_differs_from_full_render_only_at_the_merged_boundary() -> None:
    tok, ct = _template("text_eot")
    generated = tok.encode("Sure") + ct.eot_ids
    new = [{"role": "user", "content": "ok"}]
    held = [*ct.prompt_ids(OPENING), *generated, *ct.continuation_ids_unsafe(new)]
    full_text = ct.render([*OPENING, {"role": "assistant", "content": "Sure"}, *new], add_generation_prompt=True)
    full = tok.encode(full_text)
    assert tok.decode(held) == full_text
    boundary = len(ct.prompt_ids(OPENING)) + len(generated) - 1  # the "D" of END
    assert held[:boundary] == full[:boundary]
    assert held[boundary : boundary + 2] == tok.encode("D") + tok.encode("\n")
    assert full[boundary] == tok.encode("D\n")[0]
    assert held[boundary + 2 :] == full[boundary + 1 :]


# --- the probe: which continuation is exact, and which templates are refused ---------------------------------


def test_probe_of_non_rewriting_chatml_keeps_anchored_continuations_and_is_exact() -> None:
    _, ct = _template()
    assert (ct.mode, ct.probe.fidelity, ct.probe.exact_prefixes) == (TemplateMode.ANCHORED, Fidelity.EXACT, 6)


def test_probe_documents_history_rewriting_and_plain_text_end_of_turn() -> None:
    assert _template("think")[1].probe.fidelity is Fidelity.REWRITES_HISTORY
    assert _template("text_eot")[1].probe.fidelity is Fidelity.UNSAFE_BOUNDARY


def test_stateful_template_gets_rendered_history_continuations_that_equal_the_whole_render() -> None:
    tok, ct = _template(source=STATEFUL)
    assert (ct.mode, ct.probe.fidelity) == (TemplateMode.RENDERED_HISTORY, Fidelity.EXACT)
    turns = [
        (_model(ct, CALL), [{"role": "tool", "content": "shipped"}]),
        (_model(ct, "Shipped."), [{"role": "user", "content": "and again?"}]),
        (_model(ct, CALL), [{"role": "tool", "content": "still"}, {"role": "tool", "content": "eta 2d"}]),
    ]
    traj, messages = _roll(ct, OPENING, turns)
    assert traj.ids == tok.encode(ct.render(messages, add_generation_prompt=True))
    assert tok.decode(traj.ids).count("<|im_start|>more\n") == 2
    anchored = ct.continuation_text(turns[2][1], messages[:-2], mode=TemplateMode.ANCHORED)
    assert anchored.startswith("\n<|im_start|>tools\n")  # what a placeholder turn would have held


def test_rendered_history_mode_needs_the_conversation_so_far() -> None:
    _, ct = _template(source=STATEFUL)
    with pytest.raises(ValueError, match="conversation so far"):
        ct.continuation_ids([{"role": "tool", "content": "x"}])


def test_a_template_that_ignores_tools_is_refused_unless_they_go_into_the_system_message() -> None:
    tok = FakeTokenizer()
    tok.chat_template = "{%- for m in messages -%}" + _TURN + "{%- endfor -%}" + _GENERATION  # renders no tools=
    with pytest.raises(ConfigError) as info:
        ChatTemplate(tok, TOOLS)
    message = str(info.value)
    assert "\n" not in message and "leaves 1 of 1 tool schemas out of the prompt (get_order)" in message
    assert "set tau_tools_in_prompt to system" in message
    ct = ChatTemplate(tok, TOOLS, None, tools_system_text(TOOLS, "qwen25"))
    prompt = ct.render(OPENING, add_generation_prompt=True)
    assert ct.tools_in is ToolsInPrompt.SYSTEM and prompt.count("get_order") == 1  # in the schema
    assert '<tool_call>\n{"name":"NAME", "arguments":ARGUMENTS}\n</tool_call>' in prompt  # SGLang's qwen25 format
    assert prompt.startswith("<|im_start|>system\nYou are a shop agent.\n\n# Tools\n")
    assert ChatTemplate(FakeTokenizer(), TOOLS).tools_in is ToolsInPrompt.TEMPLATE
    with pytest.raises(ConfigError, match="tau_tool_call_parser='pythonic' has none"):
        tools_system_text(TOOLS, "pythonic")


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (REJECTS_TOOLS, "cannot render a τ conversation (system, user, assistant, tool, tool...): No tool role. Sorry"),
        (DROPS_TOOLS, "drops 'tool' messages from a τ conversation"),
    ],
)
def test_template_that_cannot_render_a_tau_conversation_is_refused_in_one_line(source: str, reason: str) -> None:
    """(Checked before whether the tools reach the prompt: these templates render no tools either.)"""
    with pytest.raises(ConfigError) as info:
        _template(source=source)
    assert str(info.value) == f"tokenizer 'fake/chatml' cannot run τ episodes: its chat template {reason}"
