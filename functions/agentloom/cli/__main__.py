"""``python -m agentloom.cli``: the same as the ``agentloom`` command."""

import sys

from agentloom.cli import main

sys.exit(main())
