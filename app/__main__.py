"""`heatsearch` / `python -m app`: with a subcommand, the CLI; without, the desktop app."""
from __future__ import annotations

import sys

from .cli import command_names
from .cli import main as cli_main

GUI_FLAGS = {"--screenshot", "--query", "--box"}


def _command_first(argv: list[str], commands: set[str]) -> list[str]:
    """`heatsearch --home DIR server start` as `heatsearch server start --home DIR`: the data
    folder and library options written before the command are the command's (the window's
    parser read them and refused the command as "unrecognized arguments")."""
    i = 0
    while i < len(argv) and argv[i] in ("--home", "--library"):
        i += 2
    if 0 < i < len(argv) and argv[i] in commands:
        return argv[i:] + argv[:i]
    return argv


def main(argv=None) -> int:
    commands = command_names()
    argv = _command_first(list(sys.argv[1:] if argv is None else argv), commands)
    if argv and argv[0] in commands or ("--version" in argv) or (("--help" in argv or "-h" in argv) and not GUI_FLAGS & set(argv)):
        return cli_main(argv)
    # Qt only for the window: the CLI starts in ~0.25 s, with the window's modules ~1.4 s
    from .gui.app import main as gui_main

    return gui_main(argv)


if __name__ == "__main__":
    sys.exit(main())
