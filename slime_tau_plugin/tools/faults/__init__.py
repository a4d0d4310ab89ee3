"""Fault injection for soak and tests: the spec (``spec.py``) and an env wrapper (``env.py``). Only tools turn it on."""
