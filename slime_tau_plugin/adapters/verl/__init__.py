"""verl's seam: ``TauAgentLoop`` (``agent_loop.py``), its policy client over verl's server manager (``policy.py``) and
verl's dataset rows (``rows.py``). verl is imported only by ``agent_loop.py``."""
