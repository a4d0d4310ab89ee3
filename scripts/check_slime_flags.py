"""Check a slime launch command's flags on a CPU box: print the flags slime's own parsers do not know.

slime's ``train.py`` parses Megatron's and slime's flags with ``ignore_unknown_args=True``
(slime/backends/megatron_utils/arguments.py) and SGLang's with ``parse_known_args``, so a misspelled flag is
silently ignored there. This helper runs slime's parsers without Megatron-LM or a GPU:

1. slime's own flags: ``get_slime_extra_args_provider()`` on ``argparse.ArgumentParser(allow_abbrev=False)``,
   plus the pre-parsed mode flags of ``slime.utils.arguments._pre_parse_mode`` (``--debug-rollout-only``...);
2. SGLang's: slime's ``add_sglang_arguments`` (``--sglang-*`` from the installed ``sglang.srt.server_args``,
   ``--router-*`` from ``sglang_router``);
3. Megatron's: ``megatron.training.arguments.add_megatron_arguments`` when Megatron-LM is importable, else the
   flags slime's own launch scripts pass (``scripts/**/*.sh``, ``examples/**/*.sh`` of the slime checkout).

What is left is printed in three groups: Megatron-looking, SGLang-looking (``--sglang-*``) and truly unknown.
A known flag whose value the installed parsers refuse (a bad choice) is listed too. Exit 0 when nothing is truly
unknown or refused, 1 otherwise, 2 when slime is not importable.

    PYTHONPATH=<slime checkout> python scripts/check_slime_flags.py FLAGS_FILE
FLAGS_FILE holds one command line (``#`` comments and ``\\``-newlines allowed; leading words such as
``python3 train.py`` are skipped), or a launch script's whole ``DRY_RUN=1`` output (its train command is read).
Needs the scratch venv of ``scripts/slime_loop_check.py``.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


def read_flags(path: str) -> list[str]:
    text = Path(path).read_text()
    if "train command:\n" in text:  # a launch script's whole dry-run output: its train command, up to the summary
        text = text.split("train command:\n", 1)[1].split("\n[tau] ", 1)[0]
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    first = next((i for i, word in enumerate(words) if word.startswith("-")), len(words))
    return words[first:]


def leftover(parser: argparse.ArgumentParser, words: list[str], bad: list[str]) -> list[str]:
    """The words ``parser`` does not consume; a known flag with a bad value goes to ``bad`` and is dropped."""
    for action in parser._actions:  # only the flags matter here, not slime's required ones (--rollout-batch-size)
        action.required = False
    while True:
        try:
            return parser.parse_known_args(words)[1]
        except argparse.ArgumentError as exc:
            flag = next((f for f in (exc.argument_name or "").split("/") if f in words), None)
            if flag is None:
                raise
            bad.append(str(exc))
            start = end = words.index(flag)
            while end + 1 < len(words) and not words[end + 1].startswith("--"):
                end += 1
            words = words[:start] + words[end + 1 :]


def flag_names(words: list[str]) -> list[str]:
    return [word.split("=", 1)[0] for word in words if word.startswith("--")]


def megatron_flags(slime_root: Path) -> tuple[set[str] | None, str]:
    """Megatron's flags from Megatron-LM itself, else from slime's own launch scripts."""
    try:
        from megatron.training.arguments import add_megatron_arguments
    except ImportError:
        scripts = [*slime_root.glob("scripts/**/*.sh"), *slime_root.glob("examples/**/*.sh")]
        seen = {flag for script in scripts for flag in FLAG.findall(script.read_text(errors="replace"))}
        return seen, f"flags used in slime's {len(scripts)} launch scripts (Megatron-LM is not importable)"
    parser = add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    return {s for action in parser._actions for s in action.option_strings}, "megatron.training.arguments"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    try:
        import slime
        from slime.backends.sglang_utils.arguments import add_sglang_arguments
        from slime.utils import arguments as slime_arguments
    except Exception as exc:  # noqa: BLE001 - slime's import chain raises more than ImportError off its image
        print(f"slime is not importable here ({type(exc).__name__}: {exc}); run with PYTHONPATH=<slime checkout>")
        return 2
    words = read_flags(sys.argv[1])
    argv, sys.argv = sys.argv, sys.argv[:1]  # _pre_parse_mode reads sys.argv; its flags are not in the provider
    try:
        pre_parse = getattr(slime_arguments, "_pre_parse_mode", lambda: argparse.Namespace())
        mode_flags = {"--" + name.replace("_", "-") for name in vars(pre_parse())}
    finally:
        sys.argv = argv
    bad: list[str] = []  # parse errors (e.g. a choice the installed sglang-router does not offer)
    slime_parser = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    rest = leftover(slime_arguments.get_slime_extra_args_provider()(slime_parser), words, bad)
    sglang_parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    rest = leftover(add_sglang_arguments(sglang_parser), rest, bad)
    unknown = [flag for flag in flag_names(rest) if flag not in mode_flags]
    megatron, source = megatron_flags(Path(slime.__file__).resolve().parents[1])
    groups = {
        f"Megatron's ({source})": [f for f in unknown if f in megatron],
        "SGLang-style, unknown to the installed sglang (--sglang-*)": [
            f for f in unknown if f.startswith("--sglang-") and f not in megatron
        ],
    }
    groups["truly unknown"] = [f for f in unknown if not any(f in group for group in groups.values())]
    groups["known, but the value is refused"] = bad
    print(f"{len(flag_names(words))} flags checked; slime and SGLang know {len(flag_names(words)) - len(unknown)}")
    for title, flags in groups.items():
        print(f"{title}: {len(flags)}" + "".join(f"\n  {flag}" for flag in flags))
    return 1 if groups["truly unknown"] or bad else 0


if __name__ == "__main__":
    sys.exit(main())
