"""``python -m slime_tau_plugin.tools.cli`` = ``slime-tau``."""

import sys

from slime_tau_plugin.tools.cli.main import main

sys.exit(main())
