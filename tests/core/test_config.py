"""The data folder per platform, found by platformdirs: the same folders as before it."""
import os
from pathlib import Path

import platformdirs.windows
from platformdirs.macos import MacOS
from platformdirs.windows import Windows

from app.core.config import app_folder_name, home_dir


def test_the_data_folder_is_each_platforms_user_data_folder(monkeypatch, tmp_path):
    """Linux (here): $XDG_DATA_HOME/heatsearch, else ~/.local/share/heatsearch; macOS:
    ~/Library/Application Support/HeatSearch; Windows: %APPDATA%\\HeatSearch (the roaming
    folder, no author level), platformdirs' classes for those two asked as home_dir asks them;
    --home and $HEATSEARCH_HOME first."""
    monkeypatch.delenv("HEATSEARCH_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert home_dir() == tmp_path / "xdg" / "heatsearch"
    monkeypatch.delenv("XDG_DATA_HOME")
    assert home_dir() == tmp_path / ".local" / "share" / "heatsearch"
    monkeypatch.setenv("XDG_DATA_HOME", "")  # set but empty: the default, never a relative "heatsearch"
    assert home_dir() == tmp_path / ".local" / "share" / "heatsearch"
    assert Path(MacOS(app_folder_name("darwin"), appauthor=False, roaming=True).user_data_dir) == \
        tmp_path / "Library" / "Application Support" / "HeatSearch"
    roaming = r"C:\Users\me\AppData\Roaming"
    monkeypatch.setattr(platformdirs.windows, "get_win_folder", lambda csidl: roaming if csidl == "CSIDL_APPDATA" else "?")
    assert Windows(app_folder_name("win32"), appauthor=False, roaming=True).user_data_dir == os.path.join(roaming, "HeatSearch")
    monkeypatch.setenv("HEATSEARCH_HOME", str(tmp_path / "env"))
    assert home_dir() == tmp_path / "env" and home_dir(tmp_path / "flag") == tmp_path / "flag"
