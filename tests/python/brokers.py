"""Real message brokers for the destination tests: a private RabbitMQ node on loopback.

`RabbitMq` starts Debian's rabbitmq-server as a node of its own (own node name, ports, epmd,
Erlang cookie, data and log directories under a temporary directory, no plugins), so runs
never meet each other, a system broker or a system epmd. `stop()` really stops it (a client's
publishes then fail) and `start()` brings it back on the same port with the same data, so
durable queues keep their persistent messages. `declare_queue` and `drain` read what Hookgate
published, with the pika client. `second_database()` gives the destination tests a database
of their own, on a Postgres server of their own (Hookgate's own server is never a destination). The `rabbitmq` session fixture is meant for `pytest_plugins = ["brokers"]` in
conftest.py: imported into test modules instead, it would start one node per module.
"""
import atexit
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pika
import pytest

# Debian's /usr/sbin/rabbitmq-server is a wrapper that, run as root, `su`s to the rabbitmq user
# and works in /var/lib/rabbitmq; the real script beside it runs as any user with our paths.
# Elsewhere (the upstream tarball, other distributions) rabbitmq-server is the real script.
DEBIAN_SCRIPT = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


def _script() -> str:
    if DEBIAN_SCRIPT.exists():
        return str(DEBIAN_SCRIPT)
    found = shutil.which("rabbitmq-server", path=os.environ.get("PATH", "") + ":/usr/sbin:/usr/local/sbin")
    if not found:
        pytest.fail("rabbitmq-server is not installed (apt-get install rabbitmq-server; .ci/run does)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """A Postgres cluster of the destination tests' own, on loopback, apart from the test server
    Hookgate itself runs on: Hookgate refuses its own database server as a destination."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="hookgate-destination-pg-"))
        self.port = free_port()
        bindir = subprocess.run([str(Path(__file__).resolve().parents[2] / "scripts" / "stack.sh"), "pgbin", "test"],
                                capture_output=True, text=True, timeout=60).stdout.strip()
        self.bin = (lambda name: f"{bindir}/{name}" if bindir else name)
        root = os.geteuid() == 0
        # Postgres refuses to run as root: as the `postgres` user then, in a directory it owns.
        self.as_pg = ["runuser", "-u", "postgres", "--"] if root else []
        if root:
            shutil.chown(self.dir, "postgres")
        data = self.dir / "data"
        self._run([self.bin("initdb"), "-D", str(data), "-U", "hookgate", "--auth=trust", "--no-locale", "-E", "UTF8"])
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off -c max_connections=100"
        self._run([self.bin("pg_ctl"), "-D", str(data), "-l", str(self.dir / "postgres.log"), "-o", opts, "-w", "start"])
        atexit.register(self.close)

    def _run(self, cmd):
        subprocess.run(self.as_pg + cmd, check=True, capture_output=True, timeout=120)

    def database(self) -> str:
        name = "dest_" + secrets.token_hex(8)
        subprocess.run(["psql", f"postgres://hookgate@127.0.0.1:{self.port}/postgres", "-qc", f"CREATE DATABASE {name}"],
                       check=True, capture_output=True, timeout=30)
        return f"postgres://hookgate@127.0.0.1:{self.port}/{name}"

    def close(self):
        data = self.dir / "data"
        if data.exists():
            subprocess.run(self.as_pg + [self.bin("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                           capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


_DESTINATION_PG: list[PostgresServer] = []


def second_database() -> str:
    """A fresh database for a Postgres destination, on a server of its own (started once per
    session): Hookgate refuses its own Postgres server, host and port, as a destination."""
    if not _DESTINATION_PG:
        _DESTINATION_PG.append(PostgresServer())
    return _DESTINATION_PG[0].database()


@dataclass
class Message:
    body: bytes
    routing_key: str
    message_id: str | None
    content_type: str | None
    headers: dict = field(default_factory=dict)
    properties: pika.BasicProperties | None = None


class RabbitMq:
    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="hookgate-rabbitmq-"))
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.node = f"hg{secrets.token_hex(4)}@localhost"
        self.proc = None
        self.epmd = None
        (self.dir / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\n"
            # guest may only log in from loopback, which is all that is used.
            "loopback_users.guest = true\n"
            # A nearly full CI disk must not raise the disk alarm, which blocks publishers and
            # would look like Hookgate failing to deliver.
            "disk_free_limit.absolute = 1MB\n"
        )
        (self.dir / "enabled_plugins").write_text("[].\n")  # no management listener on 15672
        (self.dir / "rabbitmq-env.conf").write_text("")  # instead of /etc/rabbitmq/rabbitmq-env.conf
        # Erlang reads the cookie from $HOME/.erlang.cookie and refuses one others can read.
        cookie = self.dir / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(16))
        cookie.chmod(0o400)
        self.log = self.dir / "log" / f"{self.node}.log"
        self.stdout = self.dir / "stdout.log"
        atexit.register(self.close)

    @property
    def uri(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def _env(self) -> dict:
        # Nothing from the caller's RABBITMQ_*/ERL_* settings: the node is wholly ours.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        d = self.dir
        env.update(
            HOME=str(d),
            ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS="127.0.0.1",
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            # Set explicitly: the default, AMQP port + 20000, can be past 65535 for a free port.
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_CONF_ENV_FILE=str(d / "rabbitmq-env.conf"),
            RABBITMQ_CONFIG_FILE=str(d / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(d / "advanced.config"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(d / "enabled_plugins"),
            RABBITMQ_MNESIA_BASE=str(d / "mnesia"),
            RABBITMQ_LOG_BASE=str(d / "log"),
            # Erlang distribution listens on loopback only.
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
        )
        return env

    def start(self, timeout: float = 60.0):
        assert self.proc is None, "already started"
        began = time.monotonic()
        env = self._env()
        # epmd is ours, in the foreground: one that the node started itself would daemonize
        # out of reach and outlive stop().
        epmd = shutil.which("epmd") or "epmd"
        self.epmd = subprocess.Popen(
            [epmd, "-port", str(self.epmd_port), "-address", "127.0.0.1"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_port(self.epmd_port, began + 10, "epmd")
        with open(self.stdout, "ab") as out:
            # A session of its own, so that stop() can end the script, beam.smp and
            # erl_child_setup together.
            self.proc = subprocess.Popen(
                [_script()], env=env, cwd=self.dir, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = began + timeout
        self._wait_port(self.port, deadline, "RabbitMQ")
        # The port opens once the broker is up; an AMQP handshake tells it from anything else
        # that holds the port (pika's connect errors are not all AMQPError).
        while True:
            try:
                self.connection().close()
                break
            except Exception as e:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self._fail(f"no AMQP handshake on 127.0.0.1:{self.port}: {e!r}")
                time.sleep(0.2)
        return time.monotonic() - began

    def _wait_port(self, port: int, deadline: float, what: str):
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                pass
            if self.proc is not None and self.proc.poll() is not None:
                self._fail(f"rabbitmq-server exited with status {self.proc.returncode}")
            if time.monotonic() > deadline:
                self._fail(f"{what} did not listen on 127.0.0.1:{port} in time")
            time.sleep(0.1)

    def _fail(self, why: str):
        tail = ""
        for f in (self.stdout, self.log):
            if f.exists():
                tail += f"\n--- {f} (tail)\n" + "\n".join(f.read_text(errors="replace").splitlines()[-40:])
        self.stop()
        raise RuntimeError(f"RabbitMQ node {self.node}: {why}{tail}")

    def stop(self, timeout: float = 30.0):
        """Stops the node (SIGTERM: RabbitMQ shuts down cleanly) and its epmd; data is kept."""
        for proc in (self.proc, self.epmd):
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    pass
            # Whatever the session still holds (a hung beam.smp, erl_child_setup) goes too.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        self.proc = self.epmd = None

    def restart(self):
        self.stop()
        return self.start()

    def close(self):
        """Stops the node and removes its data and logs."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def connection(self) -> pika.BlockingConnection:
        params = pika.URLParameters(self.uri)
        params.connection_attempts = 1
        params.socket_timeout = 5
        params.blocked_connection_timeout = 10
        return pika.BlockingConnection(params)

    def declare_queue(self, name: str):
        with self.connection() as conn:
            conn.channel().queue_declare(queue=name, durable=True)

    def drain(self, queue: str, expect: int | None = None, timeout: float = 10.0) -> list[Message]:
        """Takes (and acks) the queue's messages: with `expect`, waits until that many came,
        then also takes any already queued past it, so that duplicates show; without it,
        takes what is queued now."""
        got = []
        deadline = time.monotonic() + timeout
        with self.connection() as conn:
            ch = conn.channel()
            while True:
                method, props, body = ch.basic_get(queue=queue, auto_ack=False)
                if method is not None:
                    ch.basic_ack(method.delivery_tag)
                    got.append(Message(body, method.routing_key, props.message_id,
                                       props.content_type, dict(props.headers or {}), props))
                    continue
                if expect is None or len(got) >= expect:
                    return got
                if time.monotonic() > deadline:
                    raise AssertionError(f"queue {queue} gave {len(got)} of {expect} messages")
                conn.sleep(0.1)


@pytest.fixture(scope="session")
def rabbitmq():
    broker = RabbitMq()
    broker.start()
    yield broker
    broker.close()
