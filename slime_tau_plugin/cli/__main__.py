"""``python -m slime_tau_plugin.cli`` = ``slime-tau``."""

import sys

from .main import main

sys.exit(main())
