"""Fixtures: a real Hookgate process on a fresh database, a recording sink, tenants.

Only loopback addresses are used. `make test` sets HOOKGATE_TEST_DATABASE_URL and
HOOKGATE_TEST_REDIS_URL and builds target/debug/hookgate first.
"""
import base64
import json
import os
import secrets
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import openapi_check

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "target" / "debug" / "hookgate"
ADMIN_TOKEN = "py-admin-token-0123456789abcdef"

# The private RabbitMQ node and moto's AWS server (one each per session) for the destination tests.
pytest_plugins = ["brokers", "aws"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    url = os.environ.get("HOOKGATE_TEST_DATABASE_URL")
    if not url:
        pytest.fail("HOOKGATE_TEST_DATABASE_URL is unset: run the suite with `make test`")
    return url


# The databases this run made, dropped when it ends (a CI machine's disk may be small).
MADE_DATABASES = []


def fresh_database() -> str:
    base = database_url()
    name = "py_" + uuid.uuid4().hex[:16]
    server = base.rsplit("/", 1)[0]
    subprocess.run(["psql", f"{server}/postgres", "-qc", f"CREATE DATABASE {name}"], check=True)
    MADE_DATABASES.append(name)
    return f"{server}/{name}"


def drop_made_databases():
    server = database_url().rsplit("/", 1)[0]
    for name in MADE_DATABASES:
        subprocess.run(["psql", f"{server}/postgres", "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"],
                       capture_output=True, timeout=30)


class Hookgate:
    def __init__(self, env: dict):
        self.env = env
        self.port = int(env["HOOKGATE_LISTEN"].rsplit(":", 1)[1])
        self.url = f"http://127.0.0.1:{self.port}"
        openapi_check.BASES.add(self.url)
        # /metrics is served on a listener of its own, off the public port.
        self.metrics_port = int(env["HOOKGATE_METRICS_LISTEN"].rsplit(":", 1)[1])
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        self.proc = subprocess.Popen([str(BIN), "serve", "--migrate"], env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("hookgate did not start")

    def admin(self, method: str, path: str, body=None):
        req = urllib.request.Request(self.url + path, method=method)
        req.add_header("Authorization", f"Bearer {ADMIN_TOKEN}")
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, data=data, timeout=10) as res:
            return json.loads(res.read() or b"null")

    def stop(self):
        openapi_check.BASES.discard(self.url)
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def hookgate():
    assert BIN.exists(), f"{BIN} is missing: run `cargo build --bin hookgate` (make test does)"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DATABASE_URL": fresh_database(),
        "HOOKGATE_LISTEN": f"127.0.0.1:{free_port()}",
        "HOOKGATE_METRICS_LISTEN": f"127.0.0.1:{free_port()}",
        "HOOKGATE_ADMIN_TOKEN": ADMIN_TOKEN,
        "HOOKGATE_MASTER_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        # Seals secrets in environment exports (test_sdk_surface.py).
        "HOOKGATE_TRANSIT_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        "HOOKGATE_EGRESS_ALLOW_NETWORKS": "127.0.0.1/32",
        # The sinks are on loopback, a private network: the tests read what they answered.
        "HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES": "true",
        # PayPal certificates only from loopback: no test can make Hookgate reach PayPal.
        "HOOKGATE_PAYPAL_CERT_URLS": "http://127.0.0.1:9/",
        "HOOKGATE_RETRY_SCHEDULE": "1,1",
        "HOOKGATE_WORKER_POLL_MS": "100",
        "RUST_LOG": "warn",
    }
    if os.environ.get("HOOKGATE_TEST_REDIS_URL"):
        env["REDIS_URL"] = os.environ["HOOKGATE_TEST_REDIS_URL"]
        env["HOOKGATE_REDIS_PREFIX"] = "py-" + uuid.uuid4().hex[:8] + ":"
    hg = Hookgate(env)
    yield hg
    hg.stop()


class Sink:
    """A real HTTP server on 127.0.0.1 that records requests and answers `status`."""

    def __init__(self):
        self.received = []
        self.status = 200
        self.fail_first = 0
        self._tries = {}
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with sink._lock:
                    wid = headers.get("webhook-id", "")
                    sink._tries[wid] = sink._tries.get(wid, 0) + 1
                    status = 500 if sink._tries[wid] <= sink.fail_first else sink.status
                    sink.received.append({"headers": headers, "body": body, "path": self.path, "method": self.command,
                                          "at": time.time()})
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_PUT = do_POST

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, n: int, timeout: float = 20.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self._lock:
                if len(self.received) >= n:
                    return list(self.received)
            time.sleep(0.05)
        raise AssertionError(f"sink got {len(self.received)} of {n} requests")


@pytest.fixture
def sink():
    s = Sink()
    yield s
    s.server.shutdown()


@pytest.fixture
def tenant(hookgate):
    return hookgate.admin("POST", "/admin/v1/tenant", {"name": "py-" + uuid.uuid4().hex[:6]})


@pytest.fixture
def svix(hookgate, tenant):
    from svix.api import Svix, SvixOptions

    return Svix(tenant["apiKey"], SvixOptions(server_url=hookgate.url, retry_schedule=[]))


@pytest.fixture(autouse=True)
def answers_match_the_api_document():
    """Fails a test that received an answer the API document does not describe, even
    if it caught the assertion (a retry loop) and went on."""
    seen = len(openapi_check.MISMATCHES)
    yield
    new = openapi_check.MISMATCHES[seen:]
    openapi_check.REPORTED.update(range(seen, seen + len(new)))
    assert not new, "answers the API document does not describe:\n" + "\n\n".join(new)


def pytest_sessionfinish(session, exitstatus):
    """A mismatch seen outside any test (a shared fixture's set-up or teardown) fails the run.
    The run's databases go (its instances have stopped: session fixtures end first)."""
    drop_made_databases()
    unreported = [m for i, m in enumerate(openapi_check.MISMATCHES) if i not in openapi_check.REPORTED]
    if unreported:
        print("\nanswers the API document does not describe, outside any test:\n" + "\n\n".join(unreported))
        session.exitstatus = 1


def raw_call(hookgate, method, path, key=None, body=None, headers=None, raw=None):
    """One request; returns (status, lower-cased headers, the body's bytes)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(hookgate.url + path, data=data, method=method.upper())
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    # The answer is checked against the API document on the way (openapi_check.py).
    try:
        with urllib.request.urlopen(req, timeout=15) as res:
            return res.status, {k.lower(): v for k, v in res.headers.items()}, res.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def call(hookgate, method, path, key=None, body=None, headers=None, raw=None):
    """One request; returns (status, lower-cased headers, parsed JSON body)."""
    status, hdrs, data = raw_call(hookgate, method, path, key=key, body=body, headers=headers, raw=raw)
    return status, hdrs, json.loads(data or b"null")


def eventually(check, timeout: float = 15.0):
    """Retries `check` until it returns a truthy value or raises nothing."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            value = check()
            if value:
                return value
        except AssertionError as e:
            last = e
        time.sleep(0.1)
    if last:
        raise last
    raise AssertionError("condition never held")


@pytest.fixture
def wired(hookgate, tenant, svix, sink):
    """An application with one endpoint (the sink); returns a source factory and the endpoint's secret."""
    from svix.api import ApplicationIn, EndpointIn
    app = svix.application.create(ApplicationIn(name="in"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    secret = svix.endpoint.get_secret(app.id, ep.id).key

    def source(provider, **extra):
        status, _, src = call(hookgate, "POST", "/api/v1/source", tenant["apiKey"],
                              {"name": provider, "provider": provider, "appId": app.id, **extra})
        assert status == 201, src
        return src

    return source, secret


def post(hookgate, src, body: bytes, headers, query: str = ""):
    """Posts a provider's request to a source."""
    return call(hookgate, "POST", f"/in/{src['id']}{query}", raw=body, headers=headers)


def event_types(svix, *names):
    """Creates the tenant's event types `names`: an endpoint may subscribe only to types
    the tenant has, as in Svix."""
    from svix.api import EventTypeIn
    for name in names:
        svix.event_type.create(EventTypeIn(name=name, description=name))
