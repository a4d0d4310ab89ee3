"""Render a τ-shaped DeepSeek V4 conversation with DeepSeek's own encoder (PyPI ``deepseek-recipe``) into a fixture.

Why: DeepSeek ships no jinja chat template for V4; ``engine/chat/jinja/deepseek_v4.jinja`` is ours. This
script records what DeepSeek's reference encoder (``deepseek_recipe.DeepseekV4Encoding``, the one SGLang serves V4
with) renders for a conversation with τ-like tools, two tool rounds (one answered twice), replies, user turns and a
turn with two calls, thinking on and off, after every turn. ``tests/engine/chat/test_deepseek_v4_family.py`` checks
our template renders the same text, byte for byte, from the model's raw replies.

Usage: deepseek_v4_recipe_render.py OUT.json (with ``deepseek-recipe==0.2.0`` importable; it is not a test
dependency: the fixture is committed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.engine.chat.test_tool_call_formats import TOOLS  # noqa: E402

SWAP = {
    "order_id": "#W2378156",
    "item_ids": ["1151293680", "4983901480"],
    "new_item_ids": ["7706410293", "7747408585"],
    "payment_method_id": "credit_card_9513926",
}
OPENING = [
    {"role": "system", "content": "# Retail agent policy\nAuthenticate the user before acting."},
    {"role": "user", "content": "Hi, please swap the items of my pending order #W2378156."},
]
TURNS = [  # (reasoning, visible text, calls, messages that follow)
    ("Look up first.", "", [["calculate", {"expression": "1+1"}]], [["tool", "2"]]),
    ("Swap now.", "Swapping — ok.", [["modify_pending_order_items", SWAP]],
     [["tool", '{"status": "pending"}'], ["tool", "{}"]]),
    ("Done.", "Your order #W2378156 now has the new items, naïve café.", [], [["user", "Price?"]]),
    ("Two lookups.", "", [["list_all_product_types", {}], ["calculate", {"expression": "2 * 17.5"}]],
     [["tool", '["shirt"]'], ["tool", "35.0"]]),
    ("Answer.", "The difference is 35.0 dollars.  ", [], [["user", "Thanks, bye!"]]),
]  # fmt: skip


def _definitions(schemas: list[dict]) -> list:
    import deepseek_recipe as dr

    return [
        dr.ToolDefinition(name=f["name"], description=f.get("description"), parameters=f["parameters"])
        for f in (t["function"] for t in schemas)
    ]


def retail_tools() -> list[dict]:
    """τ² retail's own tool schemas, as an episode sends them (the installed τ²)."""
    from slime_tau_plugin.engine.envs import get_backend

    return get_backend("tau2").domain("retail").tools


def retail_prompt(thinking: bool) -> str:
    """The first prompt of a τ² retail episode (system ``P``, user ``U``) with every retail tool."""
    import deepseek_recipe as dr

    messages = [dr.SystemMessage("P"), dr.UserMessage("U")]
    conversation = dr.Conversation(messages, thinking_mode=thinking, tools=_definitions(retail_tools()))
    return dr.DeepseekV4Encoding().render_conversation(conversation).prompt


def render(thinking: bool) -> list[str]:
    import deepseek_recipe as dr

    tools = _definitions(TOOLS)
    messages = [dr.SystemMessage(OPENING[0]["content"]), dr.UserMessage(OPENING[1]["content"])]
    encoding = dr.DeepseekV4Encoding()
    rendered = lambda: encoding.render_conversation(dr.Conversation(messages, thinking_mode=thinking, tools=tools))  # noqa: E731
    renders = [rendered().prompt]
    for i, (reasoning, content, calls, new) in enumerate(TURNS):
        tool_calls = [dr.ToolCall(f"call_{i}_{j}", name, json.dumps(args)) for j, (name, args) in enumerate(calls)]
        messages.append(dr.AssistantMessage(content, reasoning if thinking else None, tool_calls or None))
        for role, text in new:
            messages.append(dr.ToolMessage(text, f"call_{i}_0") if role == "tool" else dr.UserMessage(text))
        renders.append(rendered().prompt)
    return renders


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-2])
    import deepseek_recipe

    out = {
        "source": f"deepseek-recipe=={deepseek_recipe.__version__} (PyPI) DeepseekV4Encoding.render_conversation",
        "opening": OPENING,
        "turns": TURNS,
        "renders": {"thinking": render(True), "no_thinking": render(False)},
        "retail_prompt": {"thinking": retail_prompt(True), "no_thinking": retail_prompt(False)},
    }
    Path(sys.argv[1]).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"{sys.argv[1]}: {len(TURNS) + 1} renders per mode")
