"""Broker sources: a tenant's RabbitMQ queue (a private node), SQS queue (moto's
server) and Redis stream (the suite's Redis) consumed into messages of the send
API. 1,000 broker messages arrive as exactly 1,000 messages, delivered, though
the consuming process is killed mid-batch and the broker delivers again what it
had not seen acknowledged; a poison message is set aside and the rest flow."""
import json
import subprocess
import time
import urllib.request
import uuid

import pika
import pytest
from svix.api import ApplicationIn, EndpointIn, Svix, SvixOptions

from conftest import Hookgate, Sink, call, eventually, free_port
from test_operational_webhooks import own_hookgate

TOTAL = 1000


class PrivateRedis:
    """A Redis of the test's own on loopback: the suite's is Hookgate's own, which
    its SSRF guard keeps every tenant away from."""

    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        eventually(lambda: self.cli("PING").strip() == "PONG", timeout=10)

    def cli(self, *args, stdin: bytes | None = None) -> str:
        cmd = ["redis-cli", "-h", "127.0.0.1", "-p", str(self.port)] + (["--pipe"] if stdin is not None else [])
        return subprocess.run(cmd + list(args), input=stdin, capture_output=True, timeout=60).stdout.decode()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def resp(*args) -> bytes:
    """One Redis command in RESP, for `redis-cli --pipe`."""
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(f"${len(b)}\r\n".encode() + b + b"\r\n")
    return b"".join(out)


def messages_in(hg, app_id) -> tuple[int, int]:
    """(messages, distinct payloads) of the application, counted in Postgres."""
    out = subprocess.run(
        ["psql", hg.env["DATABASE_URL"], "-tAc",
         f"SELECT count(*), count(DISTINCT payload) FROM messages WHERE app_id = '{app_id}'"],
        capture_output=True, check=True, text=True).stdout.strip()
    n, distinct = out.split("|")
    return int(n), int(distinct)


def body(i: int) -> str:
    return json.dumps({"eventType": "order.paid", "eventId": f"order-{i}", "payload": {"n": i}})


def publish_rabbitmq(rabbitmq, queue):
    rabbitmq.declare_queue(queue)
    conn = rabbitmq.connection()
    ch = conn.channel()
    for i in range(TOTAL):
        if i == 500:
            ch.basic_publish("", queue, b"{not json", pika.BasicProperties(message_id="poison-1"))
            ch.basic_publish("", queue, json.dumps({"eventType": "x", "appId": "nobody", "payload": {}}).encode())
        # Half named by headers (the body is the payload; no event id: the broker's
        # id of the message keys it), half by an envelope with an event id.
        if i % 2:
            props = pika.BasicProperties(message_id=f"m-{i}", headers={"event-type": "order.paid"})
            ch.basic_publish("", queue, json.dumps({"n": i}).encode(), props)
        else:
            ch.basic_publish("", queue, body(i).encode())
    conn.close()
    return {"uri": rabbitmq.uri, "queue": queue, "prefetch": 50}


def publish_sqs(aws, queue):
    url = aws.sqs_queue(queue)
    sqs = aws.client("sqs")
    entries = []
    for i in range(TOTAL):
        if i == 500:
            entries.append({"Id": "p1", "MessageBody": "{not json"})
            entries.append({"Id": "p2", "MessageBody": json.dumps({"eventType": "x", "appId": "nobody", "payload": {}})})
        if i % 2:
            entries.append({"Id": f"m{i}", "MessageBody": json.dumps({"n": i}), "MessageAttributes": {
                "event-type": {"DataType": "String", "StringValue": "order.paid"}}})
        else:
            entries.append({"Id": f"m{i}", "MessageBody": body(i)})
    for k in range(0, len(entries), 10):
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries[k:k + 10]).get("Failed")
    return {"queueUrl": url, "region": aws.region, "accessKeyId": aws.access_key_id,
            "secretAccessKey": aws.secret_access_key, "endpointUrl": aws.endpoint_url, "visibilityTimeout": 10}


def publish_redis(redis, stream):
    cmds = []
    for i in range(TOTAL):
        if i == 500:
            cmds.append(resp("XADD", stream, "*", "payload", "{not json"))
            cmds.append(resp("XADD", stream, "*", "payload", json.dumps({"eventType": "x", "appId": "nobody", "payload": {}})))
        if i % 2:
            cmds.append(resp("XADD", stream, "*", "payload", json.dumps({"n": i}), "event-type", "order.paid"))
        else:
            cmds.append(resp("XADD", stream, "*", "payload", body(i)))
    redis.cli(stdin=b"".join(cmds))
    assert redis.cli("XLEN", stream).strip() == str(TOTAL + 2)
    return {"url": f"redis://127.0.0.1:{redis.port}", "stream": stream}


@pytest.mark.parametrize("kind", ["rabbitMq", "sqs", "redis"])
def test_a_thousand_broker_messages_arrive_as_a_thousand_messages_though_the_consumer_is_killed_mid_batch(
        hookgate, kind, request):
    first = own_hookgate(hookgate, HOOKGATE_WORKER_POLL_MS="100")
    second = None
    redis = PrivateRedis() if kind == "redis" else None
    sink = Sink()
    try:
        tenant = first.admin("POST", "/admin/v1/tenant", {"name": "broker-client"})
        key = tenant["apiKey"]
        svix = Svix(key, SvixOptions(server_url=first.url, retry_schedule=[]))
        app = svix.application.create(ApplicationIn(name="Shop", uid="shop"))
        svix.endpoint.create(app.id, EndpointIn(url=sink.url))
        name = "orders-" + uuid.uuid4().hex[:8]
        if kind == "rabbitMq":
            config = publish_rabbitmq(request.getfixturevalue("rabbitmq"), name)
        elif kind == "sqs":
            config = publish_sqs(request.getfixturevalue("aws"), name)
        else:
            config = publish_redis(redis, name)
        status, _, source = call(first, "POST", "/api/v1/broker-source", key=key,
                                 body={"name": name, "type": kind, "appId": "shop", "config": config})
        assert status == 201, source
        assert "guest:guest" not in json.dumps(source) and "secretAccessKey" not in source["config"], source

        # Killed (no clean stop) once part of the stream is in.
        eventually(lambda: messages_in(first, app.id)[0] >= 100, timeout=60)
        first.proc.kill()
        first.proc.wait(timeout=10)
        env = dict(first.env, HOOKGATE_LISTEN=f"127.0.0.1:{free_port()}",
                   HOOKGATE_METRICS_LISTEN=f"127.0.0.1:{free_port()}")
        second = Hookgate(env)

        eventually(lambda: messages_in(second, app.id)[0] >= TOTAL, timeout=120)
        time.sleep(3)
        assert messages_in(second, app.id) == (TOTAL, TOTAL), "one message per broker message, no copy"
        with urllib.request.urlopen(second.metrics_url, timeout=5) as r:
            metrics = r.read().decode()
        counted = {l.split('outcome="')[1].split('"')[0]: float(l.rsplit(" ", 1)[1])
                   for l in metrics.splitlines() if l.startswith("hookgate_broker_messages_total{")}
        # The first process made some before it was killed; what the broker gave the
        # second again (committed, never acknowledged) it counted as duplicates.
        assert counted.get("published", 0) < TOTAL, counted
        print(kind, counted)
        eventually(lambda: len({r["headers"]["webhook-id"] for r in sink.received}) >= TOTAL, timeout=120)
        delivered = {json.loads(r["body"])["n"] for r in sink.received}
        assert delivered == set(range(TOTAL))

        status, _, letters = call(second, "GET", f"/api/v1/broker-source/{source['id']}/dead-letter", key=key)
        assert status == 200
        reasons = sorted(d["reason"] for d in letters["data"])
        assert len(reasons) == 2, reasons
        assert "not JSON" in " ".join(reasons) or "not an envelope" in " ".join(reasons), reasons
        assert any("`nobody`" in r for r in reasons), reasons
        status, _, shown = call(second, "GET", f"/api/v1/broker-source/{source['id']}", key=key)
        assert status == 200 and shown["lastError"] is None and shown["lastReadAt"], shown
    finally:
        sink.server.shutdown()
        if redis:
            redis.stop()
        if second:
            second.stop()
        if first.proc.poll() is None:
            first.stop()


def svix_sources(hg, key):
    status, _, page = call(hg, "GET", "/api/v1/broker-source", key=key)
    assert status == 200
    return page["data"]


def test_a_source_holds_past_the_daily_cap_pauses_while_its_tenant_is_disabled_and_a_stalled_one_is_told(hookgate):
    hg = own_hookgate(hookgate, HOOKGATE_WORKER_POLL_MS="100")
    redis = PrivateRedis()
    sink, chat = Sink(), Sink()
    try:
        tenant = hg.admin("POST", "/admin/v1/tenant", {"name": "paused-client"})
        key = tenant["apiKey"]
        svix = Svix(key, SvixOptions(server_url=hg.url, retry_schedule=[]))
        app = svix.application.create(ApplicationIn(name="Shop", uid="shop"))
        svix.endpoint.create(app.id, EndpointIn(url=sink.url))
        hg.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"quotas": {"messagesPerDay": 3}})
        add = lambda lo, hi: redis.cli(stdin=b"".join(resp("XADD", "orders", "*", "payload", body(i)) for i in range(lo, hi)))
        # A poison entry whose event type holds a NUL (Postgres stores no NUL in
        # text): set aside all the same, and the entries after it flow.
        redis.cli(stdin=resp("XADD", "orders", "*", "payload", "{}", "event-type", b"bad\x00type"))
        add(0, 5)
        status, _, source = call(hg, "POST", "/api/v1/broker-source", key=key, body={
            "name": "orders", "type": "redis", "appId": app.id,
            "config": {"url": f"redis://127.0.0.1:{redis.port}", "stream": "orders"}})
        assert status == 201, source
        # The day's cap: three made, two held on the broker (not set aside).
        eventually(lambda: messages_in(hg, app.id)[0] == 3, timeout=30)
        time.sleep(3)
        assert messages_in(hg, app.id)[0] == 3
        _, _, letters = call(hg, "GET", f"/api/v1/broker-source/{source['id']}/dead-letter", key=key)
        assert [d["headers"]["event-type"] for d in letters["data"]] == ["bad\ufffdtype"], letters
        assert "event type" in letters["data"][0]["reason"], letters
        hg.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"quotas": {"messagesPerDay": None}})
        eventually(lambda: messages_in(hg, app.id)[0] == 5, timeout=30)

        # A disabled tenant's source is not consumed; enabled again, it goes on.
        hg.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"disabled": True})
        time.sleep(4)
        add(5, 7)
        time.sleep(4)
        assert messages_in(hg, app.id)[0] == 5
        hg.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"disabled": False})
        eventually(lambda: messages_in(hg, app.id)[0] == 7, timeout=30)

        # A source aimed at Hookgate's own Redis is refused by the SSRF guard at
        # each connect, and once it has read nothing for the tenant's
        # failingMinutes the tenant's chat is told.
        status, _, told = call(hg, "PATCH", "/api/v1/alert-settings", key=key,
                               body={"chatUrl": chat.url, "events": ["source.stalled"]})
        assert status == 200, told
        subprocess.run(["psql", hg.env["DATABASE_URL"], "-qc",
                        f"UPDATE alert_settings SET failing_secs = 1 WHERE tenant_id = '{tenant['id']}'"], check=True)
        own = hg.env.get("REDIS_URL", "redis://127.0.0.1:9")
        status, _, stuck = call(hg, "POST", "/api/v1/broker-source", key=key, body={
            "name": "stuck", "type": "redis", "appId": app.id, "config": {"url": own.split(",")[0], "stream": "x"}})
        assert status == 201, stuck
        shown = eventually(lambda: (lambda s: s if s["lastError"] else None)(
            call(hg, "GET", f"/api/v1/broker-source/{stuck['id']}", key=key)[2]), timeout=30)
        assert shown["lastReadAt"] is None, shown
        if "REDIS_URL" in hg.env:
            assert "Hookgate's own database or Redis" in shown["lastError"], shown
        eventually(lambda: len(chat.received) == 1, timeout=30)
        text = json.loads(chat.received[0]["body"])["text"]
        assert text.startswith("*[Hookgate] Broker source stalled: stuck*"), text
        assert "redis" in text and stuck["id"] in text, text
        time.sleep(3)
        assert len(chat.received) == 1, "once per stall"
        # The operator sees and manages the tenant's sources under /admin/v1.
        listed = hg.admin("GET", f"/admin/v1/tenant/{tenant['id']}/broker-source")
        assert sorted(x["name"] for x in listed["data"]) == ["orders", "stuck"]
        status, _, _ = call(hg, "DELETE", f"/admin/v1/tenant/{tenant['id']}/broker-source/{stuck['id']}",
                            key="py-admin-token-0123456789abcdef")
        assert status == 204
        assert [x["name"] for x in svix_sources(hg, key)] == ["orders"]
    finally:
        for s in (sink, chat):
            s.server.shutdown()
        redis.stop()
        hg.stop()
