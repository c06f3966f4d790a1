"""``python -m agentloom.cli``: the same as the ``agentloom`` command."""

import sys

from agentloom.cli import main

if __name__ == "__main__":  # importing the module (a package walk) runs nothing
    sys.exit(main())
