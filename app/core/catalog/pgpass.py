"""Saved PostgreSQL passwords, so that a library URL never needs one: a libpq password file in the
data folder (`<home>/pgpass`, mode 0600), written by `heatsearch server login` and by `heatsearch
server start|init`, read by libpq itself (the catalog passes it as `passfile`).

The format is libpq's own (host:port:database:user:password, `*` matches anything, `\\` escapes
`:` and `\\`), so the same lines work in ~/.pgpass. libpq reads one password file per connection:
the data folder's is handed to it only when it holds a line for that connection, so PGPASSWORD,
PGPASSFILE, ~/.pgpass and pg_service.conf keep working for every other URL.
"""
from __future__ import annotations

import configparser
import getpass
import os
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote

NAME = "pgpass"
DEFAULT_PORT = "5432"


def has_password(url: str) -> bool:
    """Whether a postgresql:// URL carries a (non-empty) password, in its user part or its query."""
    if "://" not in url:
        return False
    rest = url.split("://", 1)[1]
    netloc = rest.split("/", 1)[0].split("?", 1)[0]
    if "@" in netloc and ":" in netloc.rsplit("@", 1)[0] and netloc.rsplit("@", 1)[0].split(":", 1)[1]:
        return True
    query = rest.split("?", 1)[1] if "?" in rest else ""
    return any(p.split("=", 1)[0] == "password" and p.split("=", 1)[1:] != [""] for p in query.split("&") if p)


def split_password(url: str) -> tuple[str, str]:
    """(the URL without the password in its user part, that password, percent-decoded; "" when
    none): for a person who typed the password into an address that is then remembered."""
    scheme, rest = url.split("://", 1)
    netloc, sep, tail = rest.partition("/")
    if "@" not in netloc or ":" not in netloc.rsplit("@", 1)[0]:
        return url, ""
    userinfo, host = netloc.rsplit("@", 1)
    user, password = userinfo.split(":", 1)
    return f"{scheme}://{user}@{host}{sep}{tail}", unquote(password)


def plain(url: str) -> str:
    """A driver URL (postgresql+psycopg://) as libpq reads it (postgresql://)."""
    scheme, rest = url.split("://", 1)
    return f"postgresql://{rest}" if scheme.lower().startswith("postgres") else url


def targets(url: str) -> list[tuple[str, str, str, str]]:
    """The (host, port, database, user) libpq looks up in a password file for `url`: the URL's
    own parameters, then its service's (pg_service.conf), then PG* variables, then libpq's defaults
    (no host: "localhost", as libpq matches the default socket). One per host of a multi-host URL."""
    from psycopg.conninfo import conninfo_to_dict  # psycopg: optional (heatsearch[scale]), needed for PostgreSQL only

    given = {k: str(v) for k, v in conninfo_to_dict(plain(url)).items() if v not in (None, "")}
    service = given.get("service") or os.environ.get("PGSERVICE")
    merged = {**(_service(service) if service else {}), **given}

    def pick(key, env, default):
        return merged.get(key) or os.environ.get(env) or default

    user = pick("user", "PGUSER", _os_user())
    db = pick("dbname", "PGDATABASE", user)
    hosts = pick("host", "PGHOST", "").split(",")
    ports = pick("port", "PGPORT", DEFAULT_PORT).split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)
    return [(h or "localhost", p or DEFAULT_PORT, db, user) for h, p in zip(hosts, ports)]


def lookup(passfile: Path, url: str) -> bool:
    """Whether `passfile` holds a line for (one host of) `url`."""
    try:
        lines = _lines(Path(passfile))
        want = targets(url)
    except (OSError, ValueError, ImportError):
        return False
    return any(_matches(fields, t) for fields in lines for t in want)


def save(passfile: Path, target: tuple[str, str, str, str], password: str) -> None:
    """Record `password` for (host, port, database, user) in `passfile`, replacing that line. The
    file is written beside itself with mode 0600 from its creation (never readable by others, not
    even for a moment) and moved over the old one in one step."""
    passfile = Path(passfile)
    passfile.parent.mkdir(parents=True, exist_ok=True)
    keep = []
    if passfile.exists():
        for line in passfile.read_text(encoding="utf-8").splitlines():
            fields = _split(line)
            if fields is None or tuple(fields[:4]) != tuple(target):
                keep.append(line)
    keep.append(":".join(_escape(f) for f in (*target, password)))
    fd, tmp = tempfile.mkstemp(prefix=".pgpass-", dir=passfile.parent)  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("\n".join(keep) + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, passfile)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def ask(prompt: str) -> str:
    """A password from the terminal (not echoed), or one line of stdin when it is not a terminal."""
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(prompt)
    line = sys.stdin.readline() if sys.stdin is not None else ""
    return line.rstrip("\r\n")


# ---- libpq's format ---------------------------------------------------------------------------

def _escape(field: str) -> str:
    return str(field).replace("\\", "\\\\").replace(":", "\\:")


def _split(line: str) -> list[str] | None:
    """The five fields of a password-file line (None: a comment, blank or malformed line)."""
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    fields, cur, esc = [], [], False
    for ch in line:
        if esc:
            cur.append(ch)
            esc = False
        elif ch == "\\":
            esc = True
        elif ch == ":" and len(fields) < 4:
            fields.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    fields.append("".join(cur))
    return fields if len(fields) == 5 else None


def _lines(passfile: Path) -> list[list[str]]:
    if not passfile.is_file():
        return []
    return [f for f in map(_split, passfile.read_text(encoding="utf-8").splitlines()) if f is not None]


def _matches(fields: list[str], target: tuple[str, str, str, str]) -> bool:
    return all(f == "*" or f == t for f, t in zip(fields[:4], target))


def _service(name: str) -> dict:
    """A service's parameters from the user's then the system's pg_service.conf ({} when absent)."""
    files = [os.environ.get("PGSERVICEFILE") or str(Path.home() / ".pg_service.conf")]
    if os.environ.get("PGSYSCONFDIR"):
        files.append(str(Path(os.environ["PGSYSCONFDIR"]) / "pg_service.conf"))
    for f in files:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(f, encoding="utf-8")
        except (OSError, configparser.Error):
            continue
        if parser.has_section(name):
            return dict(parser.items(name))
    return {}


def _os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name here: libpq would fail the same way
        return ""
