"""``python -m spaces._daemon [--state-dir DIR] serve``: the real spacesd, carried by this package.

Every argument is spacesd's own command line (``python -m spaces._daemon --help``); this is what
``Spaces()`` starts, detached, when no daemon answers on the state dir's socket."""

import json
import os
import sys
from pathlib import Path

from . import _native


def main() -> int:
    # The daemon gives agent runs its own tools as an MCP server started with its own command
    # line; hosted here, that command is this interpreter and module, not a `spacesd` binary.
    os.environ["SPACES_SELF_COMMAND"] = json.dumps([sys.executable, "-m", "spaces._daemon"])
    # ...which needs the interpreter's environment and this package's folder: a sandbox that
    # hides where they live (a venv under /tmp) shows these read-only to that command.
    os.environ["SPACES_SELF_PATHS"] = json.dumps(
        sorted({sys.prefix, sys.base_prefix, os.path.realpath(sys.executable), str(Path(__file__).resolve().parent.parent)}))
    return _native.daemon_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
