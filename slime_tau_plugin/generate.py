"""The stable path slime's flag names: ``--custom-generate-function-path slime_tau_plugin.generate.generate``.

The code lives in :mod:`slime_tau_plugin.adapters.slime.generate`; this module only keeps the documented path working.
"""

from slime_tau_plugin.adapters.slime.generate import generate

__all__ = ["generate"]
