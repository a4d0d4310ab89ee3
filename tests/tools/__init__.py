"""Tests of the tools: one folder per tool (``tools/<tool>``); tools/model needs torch (scripts/test_verl.sh)."""
