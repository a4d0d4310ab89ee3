"""``serve --model``: SGLang's sampling semantics and log-probs from a real model over real HTTP."""

from __future__ import annotations

import math
import threading
import time

import httpx
import pytest

torch = pytest.importorskip("torch")

from slime_tau_plugin.tools.model.sampling import LOGPROB_SEMANTICS  # noqa: E402
from slime_tau_plugin.tools.model.teacher import teacher_log_probs  # noqa: E402

PROMPT = list(range(1000, 1040))


def _generate(server, **params) -> dict:
    body = {"input_ids": PROMPT, "sampling_params": params, "return_logprob": True}
    reply = httpx.post(f"{server.url}/generate", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _ids_and_log_probs(body: dict) -> tuple[list[int], list[float]]:
    entries = body["meta_info"]["output_token_logprobs"]
    assert [t for _, t, _ in entries] == body["output_ids"]
    return body["output_ids"], [lp for lp, _, _ in entries]


def test_same_sampling_seed_gives_the_same_tokens(qwen25_server):
    first = _generate(qwen25_server, max_new_tokens=24, sampling_seed=11, ignore_eos=True)
    again = _generate(qwen25_server, max_new_tokens=24, sampling_seed=11, ignore_eos=True)
    other = _generate(qwen25_server, max_new_tokens=24, sampling_seed=12, ignore_eos=True)
    assert first["output_ids"] == again["output_ids"] != other["output_ids"]
    assert first["meta_info"]["finish_reason"] == {"type": "length", "length": 24}
    assert first["meta_info"]["logprob_semantics"] == LOGPROB_SEMANTICS


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
def test_log_probs_are_log_softmax_of_logits_over_temperature(qwen25_server, temperature):
    body = _generate(qwen25_server, max_new_tokens=16, temperature=temperature, top_p=0.9, top_k=50, ignore_eos=True)
    ids, stored = _ids_and_log_probs(body)
    decoder = qwen25_server.decoder
    positions = list(range(len(PROMPT), len(PROMPT) + len(ids)))
    forced = teacher_log_probs(decoder.model, "cpu", PROMPT + ids, positions, temperature or 1.0)
    assert max(abs(a - b) for a, b in zip(stored, forced, strict=True)) < 1e-4
    if temperature == 0.0:  # greedy: every token is the argmax
        with torch.inference_mode():
            logits = decoder.model(input_ids=torch.tensor([PROMPT + ids])).logits[0]
        assert ids == logits[len(PROMPT) - 1 : -1].argmax(-1).tolist()


def test_stop_token_ids_stop_strings_and_the_end_of_turn(qwen25_server):
    free = _generate(qwen25_server, max_new_tokens=8, sampling_seed=5, ignore_eos=True)["output_ids"]
    stopped = _generate(qwen25_server, max_new_tokens=8, sampling_seed=5, ignore_eos=True, stop_token_ids=[free[2]])
    # ignore_eos also ignores stop_token_ids (as SGLang): the same 8 tokens
    assert stopped["output_ids"] == free
    stopped = _generate(qwen25_server, max_new_tokens=8, sampling_seed=5, stop_token_ids=[free[2]])
    assert stopped["output_ids"] == free[:3]
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": free[2]}
    word = qwen25_server.decoder.tokenizer.decode([free[3]])
    by_text = _generate(qwen25_server, max_new_tokens=8, sampling_seed=5, ignore_eos=True, stop=[word])
    assert by_text["meta_info"]["finish_reason"] == {"type": "stop", "matched": word}
    assert by_text["output_ids"] == free[: len(by_text["output_ids"])] and len(by_text["output_ids"]) <= 4
    assert word not in by_text["text"]  # trimmed, as SGLang does without no_stop_trim
    eot = qwen25_server.decoder.eos_ids
    ends = [_generate(qwen25_server, max_new_tokens=200, sampling_seed=s) for s in range(8)]
    assert all(e["output_ids"][-1] in eot for e in ends if e["meta_info"]["finish_reason"]["type"] == "stop")
    lengths = [len(e["output_ids"]) for e in ends]
    assert 1 <= sum(lengths) / len(lengths) < 60, lengths  # calibrated for ~12 tokens per turn


def test_abort_ends_a_running_request_with_partial_output_and_loads_count_it(qwen25_server):
    result: dict = {}
    body = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 5000, "ignore_eos": True}, "rid": "abc-1"}
    thread = threading.Thread(
        target=lambda: result.update(httpx.post(f"{qwen25_server.url}/generate", json=body, timeout=60).json())
    )
    thread.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        loads = httpx.get(f"{qwen25_server.url}/v1/loads").json()["loads"][0]
        if loads["num_running_reqs"] == 1:
            break
        time.sleep(0.05)
    assert loads["num_running_reqs"] == 1
    assert httpx.post(f"{qwen25_server.url}/abort_request", json={"rid": "abc"}).status_code == 200
    thread.join(30)
    assert result["meta_info"]["finish_reason"]["type"] == "abort"
    assert 0 < len(result["output_ids"]) < 5000


def test_completions_and_bad_requests(qwen25_server):
    body = {"prompt": PROMPT, "max_tokens": 6, "seed": 3, "logprobs": 0, "return_token_ids": True, "ignore_eos": True}
    choice = httpx.post(f"{qwen25_server.url}/v1/completions", json=body, timeout=60).json()["choices"][0]
    same = _generate(qwen25_server, max_new_tokens=6, sampling_seed=3, ignore_eos=True)
    assert choice["token_ids"] == same["output_ids"] and choice["finish_reason"] == "length"
    assert all(math.isfinite(x) for x in choice["logprobs"]["token_logprobs"])
    bad = httpx.post(f"{qwen25_server.url}/generate", json={"input_ids": PROMPT, "sampling_params": {"top_p": 2}})
    assert bad.status_code == 400 and "top_p" in bad.text
    too_long = {"input_ids": PROMPT, "sampling_params": {"max_new_tokens": 10**6}}
    assert "maximum context length" in httpx.post(f"{qwen25_server.url}/generate", json=too_long).text


def test_tokenize_and_model_info_say_which_tokenizer_is_served(qwen25_server):
    """``rollout --sglang-url`` compares these with its ``--tokenizer`` (walk-through row b)."""
    url, tokenizer = qwen25_server.url, qwen25_server.decoder.tokenizer
    text = "<think>\nplan\n</think> τ² <|im_end|>"
    answer = httpx.post(f"{url}/tokenize", json={"prompt": text, "add_special_tokens": False}, timeout=30).json()
    assert answer["tokens"] == tokenizer.encode(text, add_special_tokens=False)
    info = httpx.get(f"{url}/model_info", timeout=30).json()
    assert info["tokenizer_path"] == info["model_path"] == qwen25_server.model_id and info.get("tau_task_sets") is None
