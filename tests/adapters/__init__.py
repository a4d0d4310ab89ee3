"""Tests of the trainer adapters: one folder per trainer (``adapters/<trainer>``); verl, trl and nemo_gym are the
suites of their own venvs (scripts/test_<trainer>.sh).
"""
