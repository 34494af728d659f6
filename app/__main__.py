"""`heatsearch` / `python -m app`: with a subcommand, the CLI; without, the desktop app."""
from __future__ import annotations

import sys

CLI_COMMANDS = {"eval", "index", "search", "status", "rebuild", "forget"}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in CLI_COMMANDS for a in argv) or "--help" in argv or "-h" in argv or "--version" in argv:
        from .cli import main as cli_main

        return cli_main(argv)
    from .gui.app import main as gui_main

    return gui_main(argv)


if __name__ == "__main__":
    sys.exit(main())
