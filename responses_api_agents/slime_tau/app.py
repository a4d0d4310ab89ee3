"""NeMo Gym's entry point for the τ agent: its launcher (``gym env start``, NeMo RL's ``RunHelper``) runs
``python app.py`` in this folder with the global config in its environment (docs/nemo_gym.md)."""

import sys

from slime_tau_plugin.adapters.nemo_gym.serve import serve_from_environment

if __name__ == "__main__":
    sys.exit(serve_from_environment())
