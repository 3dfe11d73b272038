"""Observability (the metrics listed in docs/operations.md), end to end: traffic of every
kind the dashboard and the alert rules look at, then (a) the saved GET /metrics passes
`deploy/check.sh <file>`, and (b) a real Prometheus server scrapes the Hookgate process,
evaluates the shipped alert rules, and answers PromQL queries with the values the traffic
must have produced.

Everything stays on 127.0.0.1: Prometheus gets no remote write and no Alertmanager,
and the test checks that its sockets only ever reach loopback."""
import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
import standardwebhooks
from prometheus_client.parser import text_string_to_metric_families
from svix.api import ApplicationIn, EndpointIn, MessageIn

from conftest import call, eventually, free_port

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "deploy" / "check.sh"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "hookgate.rules.yml"
PROMETHEUS = Path("/usr/bin/prometheus")


def scrape(hookgate) -> str:
    with urllib.request.urlopen(hookgate.metrics_url, timeout=10) as res:
        assert res.status == 200
        assert res.headers["content-type"].startswith("text/plain; version=0.0.4")
        return res.read().decode()


def samples(text: str) -> dict:
    """{(sample name, frozenset(labels)): value}, parsed by Prometheus's own Python parser,
    which also checks that the exposition format is well formed."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(parsed: dict, name: str, **labels) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in parsed.items() if n == name and want <= ls)


@dataclass
class Traffic:
    tenant: str
    source: str
    app: str
    deliveries: int  # requests the sink received


def produce_traffic(hookgate, tenant, svix, sink) -> Traffic:
    """Ingress (accepted, duplicate, invalid signature) on a `standard-webhooks` source
    signed by the reference library, and egress (a message published with the Svix SDK
    and delivered to the sink); returns once the deliveries are counted."""
    app = svix.application.create(ApplicationIn(name="observed"))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    status, _, src = call(hookgate, "POST", "/api/v1/source", tenant["apiKey"],
                          {"name": "observed", "provider": "standard-webhooks", "secret": secret, "appId": app.id})
    assert status == 201, src

    body = json.dumps({"type": "order.paid", "data": {"order": 42}})
    msg_id = "msg_obs_" + uuid.uuid4().hex
    now = datetime.now(timezone.utc)
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": standardwebhooks.Webhook(secret).sign(msg_id, now, body),
        "Content-Type": "application/json",
    }
    url = f"/in/{src['id']}"
    status, _, first = call(hookgate, "POST", url, raw=body.encode(), headers=headers)
    assert (status, first["status"]) == (200, "accepted"), first
    status, _, again = call(hookgate, "POST", url, raw=body.encode(), headers=headers)
    assert (status, again["status"]) == (200, "duplicate"), again
    forged = dict(headers, **{"webhook-signature": standardwebhooks.Webhook(
        "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()).sign(msg_id, now, body)})
    status, _, err = call(hookgate, "POST", url, raw=body.encode(), headers=forged)
    assert (status, err["code"]) == (401, "invalid_signature"), err

    svix.message.create(app.id, MessageIn(event_type="invoice.sent", payload={"invoice": 7}))
    got = sink.wait_for(2)  # the admitted inbound event, forwarded, and the published message
    assert body.encode() in [r["body"] for r in got], "the inbound event was forwarded byte for byte"
    # The attempt is counted once its response is in: wait until /metrics has both.
    eventually(lambda: value(samples(scrape(hookgate)), "hookgate_delivery_attempts_total",
                             tenant=tenant["id"], outcome="success") >= 2)
    return Traffic(tenant=tenant["id"], source=src["id"], app=app.id, deliveries=len(sink.received))


# --- (a) deploy/check.sh on a saved /metrics -------------------------------------------------------


def test_saved_metrics_pass_the_deploy_check(hookgate, tenant, svix, sink, tmp_path):
    t = produce_traffic(hookgate, tenant, svix, sink)
    # A quota refusal too (the over-quota alert and panel read it): one API
    # request a second, then a burst.
    hookgate.admin("PATCH", f"/admin/v1/tenant/{t.tenant}", {"quotas": {"apiRequestsPerSecond": 1}})
    statuses = [call(hookgate, "GET", "/api/v1/app", key=tenant["apiKey"])[0] for _ in range(5)]
    hookgate.admin("PATCH", f"/admin/v1/tenant/{t.tenant}", {"quotas": None})
    assert 429 in statuses, statuses
    text = scrape(hookgate)
    parsed = samples(text)
    assert value(parsed, "hookgate_quota_rejections_total", tenant=t.tenant, limit="api_requests_per_second") >= 1
    # What this traffic must have produced, exactly: a fresh source and a fresh tenant.
    assert value(parsed, "hookgate_ingress_requests_total", tenant=t.tenant, outcome="accepted") == 1
    assert value(parsed, "hookgate_ingress_requests_total", tenant=t.tenant, outcome="duplicate") == 1
    assert value(parsed, "hookgate_ingress_requests_total", tenant=t.tenant, outcome="invalid_signature") == 1
    # A source's id is the credential of a source that checks no signature: never a label.
    assert t.source not in text and "source=" not in text.split("hookgate_ingress_requests_total", 1)[1].split("\n# ", 1)[0]
    assert value(parsed, "hookgate_ingress_requests_total", tenant=t.tenant) == 3
    assert value(parsed, "hookgate_ingress_duplicates_total") >= 1
    assert value(parsed, "hookgate_messages_created_total", tenant=t.tenant) >= 1
    assert value(parsed, "hookgate_delivery_attempts_total", tenant=t.tenant, outcome="success") == t.deliveries
    assert value(parsed, "hookgate_ingress_request_duration_seconds_count") >= 3
    assert value(parsed, "hookgate_delivery_duration_seconds_count") >= 2
    assert value(parsed, "hookgate_delivery_lag_seconds_count") >= 1
    assert value(parsed, "hookgate_http_requests_total", route="/in/{source_id}", status="401") >= 1
    assert value(parsed, "hookgate_db_pool_connections", state="max") > 0

    saved = tmp_path / "metrics.txt"
    saved.write_text(text)
    res = subprocess.run([str(CHECK), str(saved)], capture_output=True, text=True, timeout=600)
    out = res.stdout + res.stderr
    assert res.returncode == 0, f"deploy/check.sh {saved} exited {res.returncode}:\n{out}"
    assert f"ok    every metric used by the dashboard and the rules is in {saved}" in out, out
    assert "0 failed" in out.strip().splitlines()[-1], out


def test_the_deploy_check_refuses_metrics_without_traffic(tmp_path):
    """The check above can fail: an instance that served nothing lacks the labelled series."""
    bare = tmp_path / "bare.txt"
    bare.write_text("# TYPE hookgate_deliveries_pending gauge\nhookgate_deliveries_pending 0\n")
    res = subprocess.run([str(CHECK), str(bare)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "missing: hookgate_ingress_requests_total" in res.stdout


# --- (b) a real Prometheus ------------------------------------------------------------------------


def ensure_prometheus():
    if PROMETHEUS.exists():
        return
    if os.geteuid() != 0:
        pytest.skip("/usr/bin/prometheus is missing and we are not root to apt-get install prometheus")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(install, env=env, check=True, capture_output=True)
    assert PROMETHEUS.exists(), "apt-get install prometheus did not provide /usr/bin/prometheus"


class Prometheus:
    def __init__(self, target_port: int, work: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # JSON is YAML. No `alerting` and no `remote_write`: nothing leaves loopback.
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{
                "job_name": "hookgate",
                "metrics_path": "/metrics",
                "scheme": "http",
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "static_configs": [{"targets": [f"127.0.0.1:{target_port}"], "labels": {"role": "all"}}],
            }],
        }
        self.config = work / "prometheus.yml"
        self.config.write_text(json.dumps(config, indent=2))
        self.log = work / "prometheus.log"
        self._log = open(self.log, "wb")
        self.proc = subprocess.Popen(
            [str(PROMETHEUS), f"--config.file={self.config}", f"--storage.tsdb.path={work / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", f"--web.external-url={self.url}/",
             f"--web.console.templates={work}", f"--web.console.libraries={work}"],
            stdout=self._log, stderr=subprocess.STDOUT, cwd=work, start_new_session=True,
        )
        self.peers = set()
        deadline = time.time() + 30
        while time.time() < deadline:
            assert self.proc.poll() is None, f"prometheus exited {self.proc.returncode}:\n{self.log.read_text()}"
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as res:
                    if res.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus did not become ready:\n{self.log.read_text()}")

    def api(self, path: str, **params):
        q = ("?" + urllib.parse.urlencode(params)) if params else ""
        self.record_peers()
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{q}", timeout=5) as res:
            body = json.loads(res.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> list:
        data = self.api("query", query=promql)
        assert data["resultType"] == "vector", data
        return data["result"]

    def record_peers(self):
        """Remembers the remote address of every socket the Prometheus process holds."""
        self.peers |= socket_peers(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()


def socket_peers(pid: int) -> set:
    """(ip, port) of the remote end of every TCP/UDP socket of `pid`, from /proc."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        for fd in fd_dir.iterdir():
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except FileNotFoundError:
        return set()
    peers = set()
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            f = line.split()
            if f[9] in inodes:
                peers.add(decode_addr(f[2]))
    return peers


def decode_addr(hexaddr: str):
    host, port = hexaddr.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # four little-endian 32-bit words
        ip = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
    return ip, int(port, 16)


def is_loopback_or_unconnected(ip: str) -> bool:
    return ip in ("0.0.0.0", "::", "::1") or ip.startswith("127.") or ip.startswith("::ffff:127.")


@pytest.fixture
def prometheus(hookgate, tmp_path):
    ensure_prometheus()
    prom = Prometheus(hookgate.metrics_port, tmp_path)
    yield prom
    prom.stop()
    outside = {p for p in prom.peers if not is_loopback_or_unconnected(p[0])}
    assert not outside, f"prometheus reached beyond loopback: {outside}"


def test_prometheus_scrapes_hookgate_and_answers_for_the_traffic(hookgate, tenant, svix, sink, prometheus):
    targets = eventually(lambda: [t for t in prometheus.api("targets")["activeTargets"]
                                  if t["labels"]["job"] == "hookgate" and t["health"] == "up"], timeout=30)
    assert targets[0]["scrapeUrl"] == f"http://127.0.0.1:{hookgate.metrics_port}/metrics"

    t = produce_traffic(hookgate, tenant, svix, sink)

    def one(promql: str) -> float:
        result = prometheus.query(promql)
        assert len(result) == 1, f"{promql}: {result}"
        return float(result[0]["value"][1])

    tnt = t.tenant
    expectations = {
        'up{job="hookgate"}': lambda v: v == 1,
        f'hookgate_ingress_requests_total{{tenant="{tnt}",outcome="accepted"}}': lambda v: v == 1,
        f'hookgate_ingress_requests_total{{tenant="{tnt}",outcome="duplicate"}}': lambda v: v == 1,
        f'hookgate_ingress_requests_total{{tenant="{tnt}",outcome="invalid_signature"}}': lambda v: v == 1,
        # No series names a source: its id is the credential of a source that checks no signature.
        f'count(hookgate_ingress_requests_total{{source!=""}}) or vector(0)': lambda v: v == 0,
        f'sum(hookgate_ingress_requests_total{{tenant="{tnt}"}})': lambda v: v == 3,
        "sum(hookgate_ingress_duplicates_total)": lambda v: v >= 1,
        f'hookgate_messages_created_total{{tenant="{tnt}"}}': lambda v: v >= 1,
        f'hookgate_delivery_attempts_total{{tenant="{tnt}",outcome="success"}}': lambda v: v == t.deliveries,
        'sum(hookgate_http_requests_total{route="/in/{source_id}",status="401"})': lambda v: v >= 1,
        'sum(hookgate_http_requests_total{route="/api/v1/source",status="201"})': lambda v: v >= 1,
        "hookgate_ingress_request_duration_seconds_count": lambda v: v >= 3,
        'hookgate_ingress_request_duration_seconds_bucket{le="+Inf"}': lambda v: v >= 3,
        "hookgate_delivery_duration_seconds_count": lambda v: v >= 2,
        'hookgate_db_pool_connections{pool="main",state="max"}': lambda v: v > 0,
        # The worker's own pool shows once it has claimed (the traffic was delivered).
        'hookgate_db_pool_connections{pool="worker",state="max"}': lambda v: v > 0,
        'max by (job) (hookgate_deliveries_pending)': lambda v: v >= 0,
    }
    last = {}

    def all_hold():
        ok = True
        for promql, holds in expectations.items():
            try:
                last[promql] = one(promql)
            except AssertionError as e:
                last[promql] = str(e)
                ok = False
                continue
            ok = ok and holds(last[promql])
        return ok

    deadline = time.time() + 30
    while not all_hold():
        if time.time() > deadline:
            failing = {q: v for q, v in last.items() if not (isinstance(v, float) and expectations[q](v))}
            raise AssertionError(f"Prometheus did not report the traffic within 30 s: {failing}\n"
                                 f"targets: {prometheus.api('targets')}")
        time.sleep(0.5)

    # Prometheus and /metrics agree on what Hookgate counted.
    direct = samples(scrape(hookgate))
    assert value(direct, "hookgate_ingress_requests_total", tenant=tnt, outcome="accepted") == 1

    # The shipped alert rules load and evaluate against these series without error.
    def rules_evaluated():
        groups = prometheus.api("rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        return rules if rules and all(r["health"] == "ok" and r["lastEvaluation"][:4] != "0001"
                                      for r in rules) else None

    rules = eventually(rules_evaluated, timeout=15)
    assert {r["name"] for r in rules} >= {"HookgateDeliveriesFailing", "HookgatePostgresUnreachable"}
    state = {r["name"]: r["state"] for r in rules}
    assert state["HookgatePostgresUnreachable"] == "inactive", "the target is up and Postgres answers"
    assert ("127.0.0.1", hookgate.metrics_port) in prometheus.peers, "the sockets of prometheus were inspected"
