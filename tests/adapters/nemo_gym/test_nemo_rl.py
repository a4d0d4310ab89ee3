"""NeMo RL through NeMo Gym: rows collected the way NeMo RL collects them (``run_examples``) from agents whose policy is
NeMo RL's two vLLM servers (stand-ins with its routes), read back by a mirror of NeMo RL's own rollout code
(``tests/adapters/nemo_gym/nemo_rl_mirror.py``: NeMo RL needs torch and vLLM, so its code is restated, not imported).

They show: every parity case trains on slime's episode (ids, loss mask, log-probs, reward: compared with slime's
``generate`` via SGLang's ``/generate``); both servers play; a failed episode (a dead user simulator, a task τ does
not have) is an HTTP 200 that NeMo RL's code drops by its own ``mask_sample``, never a crash; the entry point NeMo Gym's
launcher starts serves the agent from its environment alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.adapters.nemo_gym import nemo_rl_mirror as nemo_rl
from tests.adapters.nemo_gym.conftest import free_port
from tests.parity import EXPECTED_STATUS, PARITY_CASES, ParityRecord, assert_same, slime_record

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("case", PARITY_CASES, ids=lambda c: c.name)
def test_nemo_rl_trains_on_slimes_episode_or_masks_it(collected, oracle, qwen25_dir, case):
    slime = slime_record(oracle.url, qwen25_dir, case)
    assert slime.status == EXPECTED_STATUS[case.name]
    result = collected["nemo_rl"][case.name]
    processed = nemo_rl.postprocess(result)  # NeMo RL's own walk: contiguous turns, at least one generation
    (reward,) = nemo_rl.rewards([processed])
    (masked,) = nemo_rl.mask_sample_flags([processed])
    if slime.reward is None:  # slime's remove_sample: NeMo RL's drop, with a number for its reward column
        assert masked and reward == 0.0 and nemo_rl.apply_mask_sample_filter([1.0], [masked]) == [0.0]
        assert result["tau_status"] == "failed" and result["_ng_failure_class"]
        return
    assert not masked and reward == slime.reward
    ids, mask, lps = nemo_rl.flat(processed)
    # NeMo RL's sequence ends with the last model turn; slime's goes on with the ids after it (mask 0)
    prompt_len = slime.prompt_len
    ours = ParityRecord.of(
        ids[:prompt_len], ids[prompt_len:], mask[prompt_len:], lps[prompt_len:], reward, slime.status
    )
    n = len(ours.loss_mask)
    cut = ParityRecord(
        slime.tokens[: prompt_len + n], slime.loss_mask[:n], slime.logprobs[:n], slime.reward, slime.status
    )
    assert_same(cut, ours, "NeMo RL", case)
    assert not any(slime.loss_mask[n:]), "nothing trainable after NeMo RL's last turn"
    assert not any(mask[:prompt_len])


def test_every_nemo_rl_server_plays(collected):
    assert all(count > 0 for count in collected["nemo_rl"]["servers"]), collected["nemo_rl"]["servers"]


def test_a_dead_user_simulator_is_masked_in_nemo_rls_batch_never_a_crash(collected, qwen25):
    found = collected["nemo_rl"]
    assert not [k for k in found if k.startswith("error-")], "every /run answered 200"
    result = found["dead-user"]
    assert result["reward"] == 0.0 and result["instance_config"] == {"mask_sample": True} and result["mask_sample"]
    assert result["_ng_failure_class"] == "transient" and result["tau_termination"] == "user_error"
    processed = nemo_rl.postprocess(result)
    (turn,) = [m for m in processed["message_log"] if m["role"] == "assistant"]
    assert turn["token_ids"] == [qwen25.eos_token_id] and result["response"]["metadata"]["tau_placeholder"] == "true"
    batch = [processed, nemo_rl.postprocess(found["retail-short"])]
    flags = nemo_rl.mask_sample_flags(batch)
    assert nemo_rl.rewards(batch) == [0.0, 1.0] and flags == [True, False]
    assert nemo_rl.apply_mask_sample_filter([1.0, 1.0], flags) == [0.0, 1.0]


def test_the_mirror_fails_as_nemo_rl_does_on_a_null_reward_or_a_row_without_turns():
    """What the agent's answer avoids: NeMo RL's reward column raises on null, its postprocess on no turns."""
    with pytest.raises(TypeError):
        nemo_rl.rewards([{"full_result": {"reward": None}}])
    with pytest.raises(ValueError, match="no generation data"):
        nemo_rl.postprocess({"response": {"output": []}})
    assert nemo_rl.http_status_is_infra(503) and not nemo_rl.http_status_is_infra(400)


def test_nemo_gyms_launcher_finds_and_starts_the_entry_point(gym, nemo_rl_servers, qwen25_dir, tmp_path):
    """Gym's launcher resolves ``responses_api_agents/<type>`` (cwd first) and runs ``python {entrypoint}`` there
    with the global config in NEMO_GYM_CONFIG_DICT and the server's name in NEMO_GYM_CONFIG_PATH."""
    import requests
    from nemo_gym.cli.env import _resolve_server_dir
    from omegaconf import OmegaConf

    from tests.adapters.nemo_gym.conftest import NEMO_RL_MODEL, _agent_entry

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        folder = _resolve_server_dir(Path("responses_api_agents", "slime_tau"))
    finally:
        os.chdir(cwd)
    assert folder == ROOT / "responses_api_agents" / "slime_tau"
    port = free_port()
    entry = _agent_entry(port, {"tau_tokenizer_path": qwen25_dir, "tau_policy_api": "nemo-rl"}, NEMO_RL_MODEL)
    entry["responses_api_agents"] = {"slime_tau": {**entry["responses_api_agents"]["tau"], "entrypoint": "app.py"}}
    head = requests.get(f"http://{gym.head[0]}:{gym.head[1]}/global_config_dict_yaml", timeout=10).json()
    config = {**OmegaConf.to_container(OmegaConf.create(head)), "launched_agent": entry}
    env = {**os.environ, "NEMO_GYM_CONFIG_DICT": OmegaConf.to_yaml(OmegaConf.create(config))}
    env["NEMO_GYM_CONFIG_PATH"] = "launched_agent"
    proc = subprocess.Popen(
        [sys.executable, "app.py"], cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read()[-2000:]
            try:
                answer = requests.post(
                    f"http://127.0.0.1:{port}/seed_session", json={"task": "tau2/retail/train/57"}, timeout=5
                )
                break
            except requests.RequestException:
                time.sleep(0.5)
        assert answer.status_code == 200 and answer.json()["domain"] == "retail"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    bad = subprocess.run(
        [sys.executable, "app.py"],
        cwd=folder,
        env={k: v for k, v in env.items() if k != "NEMO_GYM_CONFIG_PATH"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "NEMO_GYM_CONFIG_PATH" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
