"""Entry script for the PyInstaller bundle: the same `main` as the `heatsearch` console script."""
import sys

from app.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
