"""Destinations beyond HTTP through the official Svix Python SDK (`svix.destination`),
against real servers on loopback: a private RabbitMQ node (tests/python/brokers.py,
read back with pika) and a second Postgres database (read back with psql). Each
message arrives once, with its id for the consumer's dedupe; RabbitMQ messages are
signed as webhooks are (`standardwebhooks` verifies them); credentials are never shown
back; a stopped broker means retries, then everything once it is back."""
import json
import os
import subprocess
import time
import uuid

import pytest
import standardwebhooks
from svix.api import (
    AppPortalAccessIn,
    ApplicationIn,
    DestinationIn,
    DestinationPatch,
    EndpointSecretRotateIn,
    MessageIn,
    PostgresConfigIn,
    RabbitMqConfigIn,
    RabbitMqConfigPatch,
    Svix,
    SvixOptions,
)
from svix.exceptions import HttpError, HTTPValidationError

from brokers import second_database
from conftest import ADMIN_TOKEN, Hookgate, call, eventually, fresh_database, free_port


def verify(msg, secret):
    """A RabbitMQ message verifies as a webhook with the destination's secret."""
    h = msg.headers
    standardwebhooks.Webhook(secret).verify(
        msg.body, {k: h[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")})
    return True


def rabbit_destination(svix, app_id, rabbitmq, queue, **extra):
    return svix.destination.create(app_id, DestinationIn(
        type="rabbitMq", config=RabbitMqConfigIn(uri=rabbitmq.uri, routing_key=queue), **extra))


def psql(url, sql):
    out = subprocess.run(["psql", url, "-qAtc", sql], check=True, capture_output=True, text=True)
    return [line for line in out.stdout.splitlines() if line]


def rows_when_made(url, sql):
    """`psql`, or no rows while the table is not made yet (its first delivery makes it)."""
    try:
        return psql(url, sql)
    except subprocess.CalledProcessError:
        return []


def test_a_rabbitmq_destination_gets_each_message_once_signed_with_its_id_and_never_shows_its_password(
        hookgate, tenant, svix, rabbitmq):
    queue = "orders-" + uuid.uuid4().hex[:6]
    rabbitmq.declare_queue(queue)
    app = svix.application.create(ApplicationIn(name="queues"))
    dest = rabbit_destination(svix, app.id, rabbitmq, queue, event_types=["order.paid"], metadata={"team": "ops"})
    assert dest.type == "rabbitMq" and dest.status == "enabled" and dest.metadata == {"team": "ops"}
    assert ":guest@" not in dest.config.uri and "%5Bredacted%5D@" in dest.config.uri, dest.config
    assert dest.config.routing_key == queue and dest.config.mandatory is True
    secret = svix.destination.rotate_secret(app.id, dest.id, EndpointSecretRotateIn()).key
    assert secret.startswith("whsec_")

    paid = [svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": i})).id for i in range(10)]
    svix.message.create(app.id, MessageIn(event_type="order.created", payload={"other": True}))
    got = rabbitmq.drain(queue, expect=10, timeout=20)
    # Each once; not in order: a destination's messages go concurrently, side by side on
    # the connection's eight channels (docs/destinations.md), and the queue takes them as they come.
    assert sorted(m.message_id for m in got) == sorted(paid), "each message once"
    assert sorted(json.loads(m.body)["n"] for m in got) == list(range(10))
    assert all(m.content_type == "application/json" and m.headers["event-type"] == "order.paid" for m in got)
    assert all(verify(m, secret) for m in got)
    time.sleep(0.5)
    assert rabbitmq.drain(queue) == [], "the filtered-out message and no duplicate came"

    # Its attempts read as an endpoint's, with the broker's answer.
    attempts = eventually(lambda: (lambda a: a if len(a) == 10 else None)(
        svix.message_attempt.list_by_endpoint(app.id, dest.id).data))
    assert all(a.status == 0 and a.response_status_code == 0 and "confirmed" in a.response for a in attempts)
    assert all(":guest@" not in a.url and "guest" not in a.url for a in attempts), attempts[0].url

    # Read back and listed without its password; not an HTTP endpoint; another tenant sees nothing.
    got_back = svix.destination.get(app.id, dest.id)
    assert got_back.config == dest.config
    assert [d.id for d in svix.destination.list(app.id).data] == [dest.id]
    assert svix.endpoint.list(app.id).data == []
    with pytest.raises(HttpError) as e:
        svix.endpoint.get(app.id, dest.id)
    assert e.value.status_code == 404
    # A portal link (the application's customer) reads its destinations and their
    # attempts, without credentials, and cannot change them.
    portal = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    status, _, seen = call(hookgate, "GET", f"/api/v1/app/{app.id}/destination", portal)
    assert status == 200 and [d["id"] for d in seen["data"]] == [dest.id] and "guest@" not in json.dumps(seen)
    status, _, _ = call(hookgate, "GET", f"/api/v1/app/{app.id}/attempt/endpoint/{dest.id}", portal)
    assert status == 200
    for method, path, body in [("POST", "destination", {"type": "pollingEndpoint", "config": {}}),
                               ("DELETE", f"destination/{dest.id}", None),
                               ("POST", f"destination/{dest.id}/secret/rotate", {})]:
        status, _, _ = call(hookgate, method, f"/api/v1/app/{app.id}/{path}", portal, body)
        assert status == 403, (method, path, status)
    other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other-" + uuid.uuid4().hex[:6]})
    status, _, _ = call(hookgate, "GET", f"/api/v1/app/{app.id}/destination/{dest.id}", other["apiKey"])
    assert status == 404


def test_a_patch_that_sends_the_redacted_uri_back_keeps_the_password_and_an_unroutable_key_fails_with_a_reason(
        hookgate, tenant, svix, rabbitmq):
    key = tenant["apiKey"]
    queue = "patch-" + uuid.uuid4().hex[:6]
    rabbitmq.declare_queue(queue)
    app = svix.application.create(ApplicationIn(name="patch"))
    dest = rabbit_destination(svix, app.id, rabbitmq, "nowhere-" + uuid.uuid4().hex[:6])
    # No queue takes the routing key: mandatory, so the broker returns it and the attempt fails.
    svix.message.create(app.id, MessageIn(event_type="e", payload={"lost": False}))
    failed = eventually(lambda: svix.destination.get(app.id, dest.id) if svix.destination.get(
        app.id, dest.id).failure_reason else None)
    assert failed.status == "retrying" and "returned by RabbitMQ" in failed.failure_reason, failed

    # The redacted password sent back with another host is refused: a kept secret never moves.
    status, _, body = call(hookgate, "PATCH", f"/api/v1/app/{app.id}/destination/{dest.id}", key, {
        "type": "rabbitMq", "config": {"uri": dest.config.uri.replace("127.0.0.1", "localhost")}})
    assert status == 422 and "give the password again" in json.dumps(body), body

    # The uri as shown (password redacted) sent back with a new routing key: the password is kept.
    patched = svix.destination.patch(app.id, dest.id, DestinationPatch(
        type="rabbitMq", config=RabbitMqConfigPatch(uri=dest.config.uri, routing_key=queue)))
    assert patched.config.routing_key == queue
    msg = svix.message.create(app.id, MessageIn(event_type="e", payload={"after": "patch"}))
    got = rabbitmq.drain(queue, expect=1, timeout=20)
    assert [m.message_id for m in got] == [msg.id], "it connected with the kept password"


def test_bad_destinations_are_refused_with_a_reason_naming_the_field(hookgate, tenant, svix):
    app = svix.application.create(ApplicationIn(name="bad"))
    key = tenant["apiKey"]
    cases = [
        ({"type": "rabbitMq", "config": {"uri": "amqp://guest:guest@127.0.0.2:5672/%2F", "routingKey": "q"}},
         "`uri` is refused"),
        ({"type": "rabbitMq", "config": {"uri": "http://127.0.0.1/", "routingKey": "q"}}, "uri"),
        ({"type": "rabbitMq", "config": {"uri": "amqp://127.0.0.1/%2F"}}, "routingKey"),
        ({"type": "postgres", "config": {"url": "postgres://u@127.0.0.1/db?sslrootcert=/etc/passwd",
                                         "tableName": "t"}}, "sslrootcert"),
        ({"type": "postgres", "config": {"url": "postgres://u@127.0.0.1/db", "tableName": "a\"; drop"}},
         "tableName"),
        ({"type": "clickhouse", "config": {}}, "not served"),
        ({"type": "rabbitMq", "config": {"uri": "amqp://u:p@[::1]:5672/%2F", "routingKey": "q"}}, "IPv6"),
        ({"type": "rabbitMq", "config": {"uri": "amqp://u:p@127.0.0.1:5672/" + "v" * 300, "routingKey": "q"}},
         "vhost"),
        ({"type": "postgres", "config": {"url": "postgres://u@127.0.0.1/db?password=x", "tableName": "t"}},
         "password"),
        ({"type": "amazonS3", "config": {"bucket": "b-1", "region": "x@127.0.0.1:1/", "accessKeyId": "a",
                                         "secretAccessKey": "s"}}, "region"),
        ({"type": "rabbitMq", "config": {"uri": "amqp://127.0.0.1/%2F", "routingKey": "a\u0000b"}}, "NUL"),
        ({"type": "sqs", "config": {"queueUrl": "http://127.0.0.1:1/q", "region": "us-east-1",
                                    "roleArn": "arn:aws:iam::1:role/r"}}, "roleArn"),
        ({"type": "carrierPigeon", "config": {}}, "not a destination type"),
        ({"type": "rabbitMq", "config": {"uri": "amqp://127.0.0.1/%2F", "routingKey": "q"}, "batchSize": 0},
         "batchSize"),
    ]
    for body, reason in cases:
        status, _, out = call(hookgate, "POST", f"/api/v1/app/{app.id}/destination", key, body)
        assert status == 422 and reason in json.dumps(out), (body, status, out)
    assert svix.destination.list(app.id).data == [], "nothing half-written"


def test_a_postgres_destination_writes_one_row_per_message_and_a_resend_adds_none(hookgate, tenant, svix):
    key = tenant["apiKey"]
    target = second_database()
    app = svix.application.create(ApplicationIn(name="pg"))
    dest = svix.destination.create(app.id, DestinationIn(type="postgres", config=PostgresConfigIn(
        url=target, password="not-needed-on-loopback", table_name="public.hookgate_events")))
    assert dest.config.table_name == "public.hookgate_events"
    status, _, raw = call(hookgate, "GET", f"/api/v1/app/{app.id}/destination/{dest.id}", key)
    assert status == 200 and "password" not in raw["config"] and "not-needed" not in json.dumps(raw), raw
    sent = [svix.message.create(app.id, MessageIn(event_type="invoice.paid", payload={"n": i},
                                                 channels=["eu"], event_id=f"evt-{i}")).id for i in range(5)]
    rows = eventually(lambda: (lambda r: r if len(r) == 5 else None)(rows_when_made(
        target, "SELECT id, event_type, event_id, channels[1], payload->>'n', content_type "
                "FROM public.hookgate_events ORDER BY payload->>'n'")), timeout=20)
    assert [r.split("|") for r in rows] == [
        [m, "invoice.paid", f"evt-{i}", "eu", str(i), "application/json"] for i, m in enumerate(sent)]

    # Sent again (a manual resend): the message id is the key, so still one row.
    svix.message_attempt.resend(app.id, sent[0], dest.id)
    eventually(lambda: len(svix.message_attempt.list_by_endpoint(app.id, dest.id).data) == 6)
    again = svix.message_attempt.list_by_endpoint(app.id, dest.id).data[0]
    assert again.status == 0 and "already there" in again.response, again
    assert psql(target, "SELECT count(*) FROM public.hookgate_events") == ["5"]


def own_hookgate():
    """A Hookgate of its own, whose retry schedule outlasts a broker's restart."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DATABASE_URL": fresh_database(),
        "HOOKGATE_LISTEN": f"127.0.0.1:{free_port()}",
        "HOOKGATE_METRICS_LISTEN": f"127.0.0.1:{free_port()}",
        "HOOKGATE_ADMIN_TOKEN": ADMIN_TOKEN,
        "HOOKGATE_MASTER_KEY": __import__("base64").b64encode(os.urandom(32)).decode(),
        "HOOKGATE_EGRESS_ALLOW_NETWORKS": "127.0.0.1/32",
        # The brokers are on loopback, a private network: the tests read what they answered.
        "HOOKGATE_EGRESS_RECORD_PRIVATE_RESPONSES": "true",
        # Long enough to outlast the broker's restart.
        "HOOKGATE_RETRY_SCHEDULE": ",".join(["1"] * 40),
        "HOOKGATE_WORKER_POLL_MS": "100",
        "RUST_LOG": "warn",
    }
    return Hookgate(env)


def test_a_stopped_broker_gives_retries_then_every_message_arrives_once_it_is_back(rabbitmq):
    hg = own_hookgate()
    try:
        tenant = hg.admin("POST", "/admin/v1/tenant", {"name": "outage"})
        svix = Svix(tenant["apiKey"], SvixOptions(server_url=hg.url, retry_schedule=[]))
        queue = "outage-" + uuid.uuid4().hex[:6]
        rabbitmq.declare_queue(queue)
        app = svix.application.create(ApplicationIn(name="outage"))
        dest = rabbit_destination(svix, app.id, rabbitmq, queue)
        first = svix.message.create(app.id, MessageIn(event_type="e", payload={"n": -1})).id
        assert [m.message_id for m in rabbitmq.drain(queue, expect=1, timeout=20)] == [first]

        rabbitmq.stop()
        sent = [svix.message.create(app.id, MessageIn(event_type="e", payload={"n": i})).id for i in range(5)]
        # Each fails while the broker is down, and is retried.
        eventually(lambda: sum(1 for a in svix.message_attempt.list_by_endpoint(app.id, dest.id).data
                               if a.status == 2) >= 5, timeout=20)
        assert svix.destination.get(app.id, dest.id).status == "retrying"
        rabbitmq.start()
        got = rabbitmq.drain(queue, expect=5, timeout=60)
        ids = [m.message_id for m in got]
        assert sorted(ids) == sorted(sent), f"nothing lost, nothing twice: {ids}"
        eventually(lambda: svix.destination.get(app.id, dest.id).status == "enabled", timeout=20)
        metrics = __import__("urllib.request").request.urlopen(hg.metrics_url, timeout=5).read().decode()
        assert 'hookgate_destination_publishes_total{outcome="success",type="rabbitMq"}' in metrics
        assert 'hookgate_destination_publishes_total{outcome="connect_error",type="rabbitMq"}' in metrics
    finally:
        if rabbitmq.proc is None:
            rabbitmq.start()
        hg.stop()


def aws_config(aws, **fields):
    """An AWS destination's config for the moto server on loopback (never real AWS)."""
    return {"region": aws.region, "accessKeyId": aws.access_key_id, "secretAccessKey": aws.secret_access_key,
            "endpointUrl": aws.endpoint_url, **fields}


def verify_sqs(m, secret):
    """An SQS message verifies as a webhook with the destination's secret, from its attributes."""
    a = m.attributes
    standardwebhooks.Webhook(secret).verify(
        m.body.encode(), {k: a[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")})
    return True


def test_an_sqs_destination_gets_each_message_once_signed_and_a_fifo_queue_gets_group_and_dedupe_ids(
        hookgate, tenant, svix, aws):
    app = svix.application.create(ApplicationIn(name="sqs"))
    queue = aws.sqs_queue("plain-" + uuid.uuid4().hex[:6])
    dest = svix.destination.create(app.id, DestinationIn(type="sqs", config=aws_config(aws, queueUrl=queue)))
    assert dest.type == "sqs"
    status, _, raw = call(hookgate, "GET", f"/api/v1/app/{app.id}/destination/{dest.id}", tenant["apiKey"])
    assert "secretAccessKey" not in raw["config"] and raw["config"]["accessKeyId"] == aws.access_key_id, raw
    secret = svix.destination.rotate_secret(app.id, dest.id, EndpointSecretRotateIn()).key
    sent = [svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": i})).id for i in range(5)]
    got = aws.sqs_drain(queue, expect=5, timeout=20)
    assert sorted(m.attributes["webhook-id"] for m in got) == sorted(sent), "each once"
    assert all(m.attributes["event-type"] == "order.paid" and verify_sqs(m, secret) for m in got)
    attempts = eventually(lambda: (lambda a: a if len(a) == 5 else None)(
        svix.message_attempt.list_by_endpoint(app.id, dest.id).data))
    assert all(a.status == 0 and a.response.startswith("accepted by SQS") for a in attempts)

    # A FIFO queue: one group per application, the message id as SQS's deduplication id.
    fifo = aws.sqs_queue("ordered-" + uuid.uuid4().hex[:6], fifo=True)
    fdest = svix.destination.create(app.id, DestinationIn(type="sqs", config=aws_config(aws, queueUrl=fifo)))
    more = [svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"m": i})).id for i in range(5)]
    got = aws.sqs_drain(fifo, expect=5, timeout=20)
    assert {m.attributes["webhook-id"] for m in got} == set(more)
    assert all(m.group_id == app.id and m.deduplication_id == m.attributes["webhook-id"] for m in got)
    assert len(svix.message_attempt.list_by_endpoint(app.id, fdest.id).data) == 5


def test_sns_and_eventbridge_destinations_deliver_every_message_with_its_id(hookgate, tenant, svix, aws):
    app = svix.application.create(ApplicationIn(name="aws"))
    topic, topic_queue = aws.sns_topic_to_queue("t-" + uuid.uuid4().hex[:6], "tq-" + uuid.uuid4().hex[:6])
    svix.destination.create(app.id, DestinationIn(type="sns", config=aws_config(aws, topicArn=topic)))
    bus, bus_queue = aws.eventbridge_bus_to_queue("b-" + uuid.uuid4().hex[:6], "bq-" + uuid.uuid4().hex[:6])
    # `endpointUrl` is Hookgate's addition to Svix's eventBridge config: the SDK's model
    # drops it, so this one is created with a plain request.
    status, _, eb = call(hookgate, "POST", f"/api/v1/app/{app.id}/destination", tenant["apiKey"], {
        "type": "eventBridge", "config": aws_config(aws, eventBusName=bus, detailType="hookgate.event")})
    assert status == 201 and eb["config"]["endpointUrl"] == aws.endpoint_url, eb
    eb = svix.destination.get(app.id, eb["id"])
    assert eb.type == "eventBridge"
    sent = [svix.message.create(app.id, MessageIn(event_type="invoice.paid", payload={"n": i})).id
            for i in range(4)]

    via_sns = aws.sqs_drain(topic_queue, expect=4, timeout=20)
    assert sorted(m.attributes["webhook-id"] for m in via_sns) == sorted(sent)
    assert sorted(json.loads(m.body)["n"] for m in via_sns) == [0, 1, 2, 3], "raw delivery: the payload as sent"

    attempts = eventually(lambda: (lambda a: a if len(a) >= 4 else None)(
        svix.message_attempt.list_by_endpoint(app.id, eb.id).data))
    assert all(a.status == 0 and a.response.startswith("accepted by EventBridge") for a in attempts), attempts[0].response
    via_bus = aws.sqs_drain(bus_queue, expect=4, timeout=20)
    events = [m.json() for m in via_bus]
    assert sorted(e["detail"]["id"] for e in events) == sorted(sent)
    assert all(e["detail-type"] == "hookgate.event" and e["source"] == "hookgate" for e in events)
    assert all(e["detail"]["eventType"] == "invoice.paid" and "n" in e["detail"]["payload"] for e in events)


def test_an_s3_destination_writes_one_object_per_message_keyed_by_its_id(hookgate, svix, aws):
    app = svix.application.create(ApplicationIn(name="s3"))
    bucket = aws.s3_bucket("hg-" + uuid.uuid4().hex[:8])
    dest = svix.destination.create(app.id, DestinationIn(type="amazonS3", config=aws_config(aws, bucket=bucket)))
    assert dest.type == "amazonS3" and getattr(dest.config, "secret_access_key", None) is None
    sent = [svix.message.create(app.id, MessageIn(event_type="file.made", payload={"n": i})).id for i in range(3)]
    objects = eventually(lambda: (lambda o: o if len(o) == 3 else None)(aws.s3_objects(bucket)), timeout=20)
    assert {k.rsplit("/", 1)[1] for k in objects} == set(sent), objects.keys()
    assert all(k.startswith(app.id + "/") for k in objects)
    assert sorted(json.loads(v)["n"] for v in objects.values()) == [0, 1, 2]
    # Written again (a resend): the same key, still one object each.
    svix.message_attempt.resend(app.id, sent[0], dest.id)
    eventually(lambda: len(svix.message_attempt.list_by_endpoint(app.id, dest.id).data) == 4)
    assert len(aws.s3_objects(bucket)) == 3
    assert all(a.status == 0 for a in svix.message_attempt.list_by_endpoint(app.id, dest.id).data)


def test_a_destination_transformation_reshapes_or_cancels_what_is_handed_over(hookgate, tenant, svix, rabbitmq):
    from svix.api import DestinationTransformIn
    hookgate.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"transformations": True})
    queue = "shaped-" + uuid.uuid4().hex[:6]
    rabbitmq.declare_queue(queue)
    app = svix.application.create(ApplicationIn(name="shaped"))
    dest = rabbit_destination(svix, app.id, rabbitmq, queue)
    code = """function handler(w) {
        if (w.payload.skip) { w.cancel = true; return w; }
        w.payload = { wrapped: w.payload, type: w.eventType }; return w; }"""
    svix.destination.transformation.patch(app.id, dest.id, DestinationTransformIn(code=code))
    got = svix.destination.transformation.get(app.id, dest.id)
    assert got.enabled and "wrapped" in got.code
    kept = svix.message.create(app.id, MessageIn(event_type="a.b", payload={"n": 1})).id
    skipped = svix.message.create(app.id, MessageIn(event_type="a.b", payload={"skip": True})).id
    attempts = eventually(lambda: svix.message_attempt.list_by_endpoint(app.id, dest.id).data, timeout=20)
    assert attempts[0].status == 0, attempts[0].response
    msgs = rabbitmq.drain(queue, expect=1, timeout=20)
    assert [m.message_id for m in msgs] == [kept]
    assert json.loads(msgs[0].body) == {"wrapped": {"n": 1}, "type": "a.b"}
    eventually(lambda: svix.message.get(app.id, skipped) and call(
        hookgate, "GET", f"/api/v1/app/{app.id}/msg/{skipped}/endpoint", tenant["apiKey"])[2]["data"][0][
        "statusText"] == "canceled")
    assert rabbitmq.drain(queue, timeout=1) == []
    # A polling endpoint reads its log: it has no transformation.
    poll = svix.destination.create(app.id, DestinationIn(type="pollingEndpoint", config={}))
    status, _, _ = call(hookgate, "GET", f"/api/v1/app/{app.id}/destination/{poll.id}/transformation",
                        tenant["apiKey"])
    assert status == 409


def test_a_refusing_database_gives_retries_then_every_row_arrives_once_it_takes_them_again():
    hg = own_hookgate()
    target = second_database()
    try:
        tenant = hg.admin("POST", "/admin/v1/tenant", {"name": "pg-outage"})
        svix = Svix(tenant["apiKey"], SvixOptions(server_url=hg.url, retry_schedule=[]))
        app = svix.application.create(ApplicationIn(name="pg-outage"))
        dest = svix.destination.create(app.id, DestinationIn(type="postgres", config=PostgresConfigIn(
            url=target, table_name="events")))
        first = svix.message.create(app.id, MessageIn(event_type="e", payload={"n": -1})).id
        eventually(lambda: rows_when_made(target, "SELECT id FROM events") == [first], timeout=20)
        # The database refuses every new row for a while (a constraint no row meets).
        psql(target, "ALTER TABLE events ADD CONSTRAINT closed CHECK (false) NOT VALID")
        sent = [svix.message.create(app.id, MessageIn(event_type="e", payload={"n": i})).id for i in range(5)]
        eventually(lambda: sum(1 for a in svix.message_attempt.list_by_endpoint(app.id, dest.id).data
                               if a.status == 2 and "refused the row" in a.response) >= 5, timeout=20)
        got = svix.destination.get(app.id, dest.id)
        assert got.status == "retrying" and "closed" in got.failure_reason, got.failure_reason
        psql(target, "ALTER TABLE events DROP CONSTRAINT closed")
        rows = eventually(lambda: (lambda r: r if len(r) == 6 else None)(psql(target, "SELECT id FROM events")),
                          timeout=30)
        assert sorted(rows) == sorted([first] + sent), "nothing lost, nothing twice"
        eventually(lambda: svix.destination.get(app.id, dest.id).status == "enabled", timeout=20)
    finally:
        hg.stop()
