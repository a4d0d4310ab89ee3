"""τ³ banking_knowledge in the reward-parity suite: our cached reward equals τ³'s own ``evaluate_simulation`` on
right and wrong episodes, and the built-in oracle plays the domain.

The episode variants are the τ² parity suite's (``tests/engine/envs/test_tau2_reward_parity.py``): the reference
solution complete, one action dropped, one argument changed, an extra write from another task, nothing done, the
facts left unsaid, an unscored ending. Episodes run with ``tau_retrieval_variant: bm25`` (offline) and NL
assertions excluded (no judge here; both sides leave them out the same way). Needs what ``test_tau3_domains.py``
needs (upstream τ³ and ``TAU2_DATA_DIR``); skips elsewhere.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

from slime_tau_plugin.engine.envs import EnvOptions
from tests.engine.envs.tau3.test_tau3_domains import BANKING, pytestmark  # noqa: F401 (the same skip)
from tests.engine.envs.test_tau2_reward_parity import Variant, _checks, variants

OPTIONS = EnvOptions(retrieval_variant="bm25", nl_assertions="exclude")
TASKS = 10
"""Banking tasks sampled (of 97), each played in every variant (~60 episodes): τ³'s evaluator rebuilds two
environments per episode (~1 s each with bm25), so 40 tasks took 6 minutes on 2 cores with one mismatch found."""


def play(backend, ref, variant: Variant, outputs: tuple[str, ...]):
    """``test_tau2_reward_parity.play`` with the bm25 build of the domain."""
    from slime_tau_plugin.engine.envs import EnvToolCall

    session = backend.open(ref, OPTIONS)
    session.record_message("user", session.script.user_instructions)
    for i, action in enumerate(variant.actions):
        call = EnvToolCall(action.name, dict(action.arguments), f"call-{i}")
        (session.user_step if action.requestor == "user" else session.step)(call)
        session.record_message("assistant", "Done with that step.")
    if variant.say_outputs and outputs:
        session.record_message("assistant", "Here is what I found: " + "; ".join(outputs))
    return session


def test_fast_reward_equals_tau3_evaluation_on_banking():
    from slime_tau_plugin.engine.envs import get_backend

    backend = get_backend("tau2")
    rng = random.Random(11)
    refs = backend.task_refs(BANKING, "base")
    episodes, mismatches, rewards = 0, [], {0.0: 0, 1.0: 0}
    for ref in rng.sample(refs, min(TASKS, len(refs))):
        script = backend.script(ref)
        other = backend.script(rng.choice(refs))
        for variant in variants(script, other, rng):
            session = play(backend, ref, variant, script.gold_outputs)
            fast = session.fast_reward(variant.termination)
            reference = session.reference_reward(variant.termination)
            episodes += 1
            rewards[fast.reward] = rewards.get(fast.reward, 0) + 1
            if (fast.reward, _checks(fast)) != (reference.reward, _checks(reference)):
                mismatches.append((ref.task_id, variant.name, fast, reference))
    print(f"τ³ banking reward parity: {episodes} episodes, rewards {rewards}, {len(mismatches)} mismatches")
    assert mismatches == []
    assert episodes >= 50
    assert rewards[1.0] >= 8 and rewards[0.0] >= 20, rewards


def test_the_oracle_plays_banking(tmp_path):
    """``slime-tau rollout`` with the built-in oracle on 12 banking tasks, one of which lists the transfer first
    (task_005: the oracle plays it last). Every episode is solved."""
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "slime_tau_plugin.tools.cli", "rollout", "--domain", BANKING, "--split", "base"]
    argv += ["--tasks", "0-11", "--nl-assertions", "exclude", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and "task_005" in {r["metadata"]["task_id"] for r in rows}
    assert [r["metadata"]["task_id"] for r in rows if r["reward"] != 1.0] == []
