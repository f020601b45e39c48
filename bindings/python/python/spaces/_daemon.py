"""``python -m spaces._daemon [--state-dir DIR] serve``: the real spacesd, carried by this package.

Every argument is spacesd's own command line (``python -m spaces._daemon --help``); this is what
``Spaces()`` starts, detached, when no daemon answers on the state dir's socket."""

import sys

from . import _native


def main() -> int:
    return _native.daemon_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
