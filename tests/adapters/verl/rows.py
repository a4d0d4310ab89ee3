"""Test helper: write verl rows to a parquet file (``slime-tau prepare --format verl`` is the product's writer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slime_tau_plugin.adapters.verl.rows import verl_parquet_bytes


def write_verl_parquet(rows: list[dict[str, Any]], path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(verl_parquet_bytes(rows))
    return out
