"""GLM-4.5 / 4.6 (``glm45``): refused in one line, because its assistant turns have no end-of-turn token.

No GLM tokenizer is obtainable here (no npm or PyPI package ships one), so these tests use a stand-in: a byte-level
tokenizer with GLM's special tokens and GLM-4.6's chat template (``tests/fixtures/chat_templates/glm4_6.jinja``,
llama.cpp's ``models/templates/GLM-4.6.jinja``). The refusal depends only on the template: it writes nothing after
an assistant message's content; the model ends its turn by sampling the next message's role token
(``<|observation|>`` before tool results, ``<|user|>`` before a user turn). SGLang's own ``glm45`` detector reads the
calls that template writes, so the parser side is ready for the day the engine can hold a per-turn closing token.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.engine.errors import ConfigError
from tests.conftest import ROOT, require_sglang_parsers
from tests.engine.chat.test_tool_call_formats import TOOLS

require_sglang_parsers()

from slime_tau_plugin.engine.chat.tool_calls import ToolCallParser  # noqa: E402

TEMPLATE = ROOT / "tests" / "fixtures" / "chat_templates" / "glm4_6.jinja"
TEMPLATE_SHA256 = "46786fd637de2728b41928ac3b6983e2d8a04706e51778de031fa933eb6f566f"
SPECIALS = (
    "[gMASK] <sop> <|system|> <|user|> <|assistant|> <|observation|> <|endoftext|> <think> </think> <tool_call> "
    "</tool_call> <tool_response> </tool_response> <arg_key> </arg_key> <arg_value> </arg_value>"
).split()
"""GLM-4.5/4.6's added tokens that its template writes (``<|endoftext|>`` is its eos)."""
SWAP = {
    "order_id": "#W2378156",
    "item_ids": ["1151293680", "4983901480"],
    "new_item_ids": ["7706410293", "7747408585"],
    "payment_method_id": "credit_card_9513926",
}


def stand_in_tokenizer():
    """Bytes plus GLM's special tokens, with GLM-4.6's template: enough for what is refused (template structure)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", name_or_path="glm-4.6-stand-in")
    fast.chat_template = TEMPLATE.read_text()
    return fast


def test_template_is_the_recorded_file() -> None:
    assert hashlib.sha256(TEMPLATE.read_bytes()).hexdigest() == TEMPLATE_SHA256


@pytest.mark.parametrize("kwargs", [{}, {"enable_thinking": False}], ids=["thinking", "no-thinking"])
def test_glm_is_refused_in_one_line_naming_the_missing_end_of_turn(kwargs) -> None:
    with pytest.raises(ConfigError) as err:
        ChatTemplate(stand_in_tokenizer(), TOOLS, kwargs)
    line = str(err.value)
    assert "\n" not in line and line.startswith("tokenizer 'glm-4.6-stand-in' cannot run τ episodes:")
    assert "writes no end-of-turn after an assistant message" in line and "<|observation|>" in line


def test_what_the_template_writes_after_a_reply_is_the_next_messages_role_token() -> None:
    """The fact the refusal names: a reply is followed by ``<|observation|>`` or ``<|user|>``, never by its own
    closing token, and which one depends on what comes next."""
    tok = stand_in_tokenizer()
    opening = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    reply = {"role": "assistant", "content": "REPLY"}
    for new, closer in (
        ({"role": "tool", "content": "T"}, "<|observation|>"),
        ({"role": "user", "content": "U2"}, "<|user|>"),
    ):
        text = tok.apply_chat_template([*opening, reply, new], tools=TOOLS, tokenize=False)
        assert text.split("REPLY", 1)[1].startswith(closer)
    alone = tok.apply_chat_template([*opening, reply], tools=TOOLS, tokenize=False)
    assert alone.endswith("REPLY")


def test_sglang_glm45_reads_the_calls_glm46s_template_writes() -> None:
    tok = stand_in_tokenizer()
    calls = [
        {"type": "function", "function": {"name": "modify_pending_order_items", "arguments": SWAP}},
        {"type": "function", "function": {"name": "calculate", "arguments": {"expression": "2 * 17.5"}}},
    ]
    messages = [{"role": "user", "content": "U"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    text = tok.apply_chat_template(messages, tools=TOOLS, tokenize=False)
    reply = text.split("<|assistant|>", 1)[1]
    action = ToolCallParser(TOOLS, "glm45", "glm45").parse(reply)
    assert action.kind == "tool_calls"
    assert [(c.name, c.arguments) for c in action.calls] == [
        ("modify_pending_order_items", SWAP),
        ("calculate", {"expression": "2 * 17.5"}),
    ]
    assert json.dumps(SWAP["item_ids"]) in reply  # arrays as JSON, strings raw: what the parser converts back
