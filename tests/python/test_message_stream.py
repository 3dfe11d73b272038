"""The message streams on the wire (`GET /api/v1/app/{app}/events`, Svix's
`v1.message.events`, and `GET /api/v1/events`, `v1.events.stream`): every
message read once, in order, and never passed while an older transaction that
could still commit one is open. The Python SDK 2.9 has neither call, so they go
as plain HTTP, each answer checked against /openapi.json on the way."""
import subprocess
import time
from datetime import datetime, timedelta, timezone

from svix.api import ApplicationIn, EndpointIn, MessageIn, OperationalWebhookEndpointIn

from conftest import Sink, call, eventually


def read_all(hookgate, key, path, query=""):
    """Pages through a stream from its start until it is done; returns the ids and the last iterator."""
    ids, iterator = [], None
    for _ in range(100):
        q = query + (f"&iterator={iterator}" if iterator else "")
        status, _, page = call(hookgate, "GET", f"{path}?{q.lstrip('&')}", key)
        assert status == 200, page
        ids += [m["id"] for m in page["data"]]
        iterator = page["iterator"]
        if page["done"]:
            return ids, iterator
    raise AssertionError("the stream never came to its end")


def test_an_applications_stream_reads_every_message_once_in_order_page_by_page(hookgate, tenant, svix):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="stream"))
    other = svix.application.create(ApplicationIn(name="not-this-one"))
    sent = []
    for i in range(7):
        sent.append(svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": i}, channels=["c1"] if i % 2 else None)).id)
        svix.message.create(other.id, MessageIn(event_type="order.paid", payload={"n": i}))
    path = f"/api/v1/app/{app.id}/events"
    # Messages show once no transaction older than them is open (about a second).
    ids, last = eventually(lambda: (r := read_all(hookgate, key, path, "limit=3")) and len(r[0]) == 7 and r)
    assert ids == sent, "every message, once, in the order created, none of another application's"
    # Read on from the last iterator: nothing new. Iterators are sealed: the
    # messages of other applications a page passed over are not named in them.
    status, _, page = call(hookgate, "GET", f"{path}?iterator={last}", key)
    assert status == 200 and page["data"] == [] and page["done"] is True
    assert "msg_" not in last and str(datetime.now().year) not in last
    # A new message shows after it, and only it.
    newer = svix.message.create(app.id, MessageIn(event_type="order.shipped", payload={"n": 99}))
    page = eventually(lambda: (p := call(hookgate, "GET", f"{path}?iterator={last}", key)[2])["data"] and p)
    assert [m["id"] for m in page["data"]] == [newer.id]
    m = page["data"][0]
    assert m["eventType"] == "order.shipped" and m["payload"] == {"n": 99} and m["timestamp"]
    # Filters: by event type, by channel (repeated keys or commas).
    ids, _ = read_all(hookgate, key, path, "event_types=order.shipped&event_types=nope")
    assert ids == [newer.id]
    ids, _ = read_all(hookgate, key, path, "channels=c1,c9")
    assert ids == [sent[1], sent[3], sent[5]]
    # A test event (its payload may be a portal customer's) is not one of the tenant's events.
    ep = svix.endpoint.create(app.id, EndpointIn(url="http://127.0.0.1:9/never"))
    status, _, test = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/send-example", key,
                           {"eventType": "svix.ping", "payload": {"forged": True}})
    assert status == 202 and test["tags"] == ["hookgate.test-event"], test
    after_test = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 100}))
    page = eventually(lambda: (p := call(hookgate, "GET", f"{path}?iterator={last}", key)[2])
                      and len(p["data"]) >= 2 and p)
    assert [x["id"] for x in page["data"]] == [newer.id, after_test.id], "the test event is left out"
    # `after`: only messages created later.
    status, _, page = call(hookgate, "GET", f"{path}?after={m['timestamp'].replace('+', '%2B')}", key)
    assert status == 200 and [x["id"] for x in page["data"]] == [after_test.id]
    before = (datetime.fromisoformat(m["timestamp"].replace("Z", "+00:00")) - timedelta(microseconds=1)).isoformat()
    status, _, page = call(hookgate, "GET", f"{path}?after={before.replace('+', '%2B')}", key)
    assert status == 200 and [x["id"] for x in page["data"]] == [newer.id, after_test.id]


def test_a_stream_refuses_what_it_did_not_give_out_and_keeps_to_its_tenant(hookgate, tenant, svix):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="strict"))
    path = f"/api/v1/app/{app.id}/events"
    # An iterator of another application's stream is not this one's.
    elsewhere = svix.application.create(ApplicationIn(name="elsewhere"))
    foreign = call(hookgate, "GET", f"/api/v1/app/{elsewhere.id}/events", key)[2]["iterator"]
    for bad in ["nonsense", "12.msg_x", "A" * 600, foreign]:
        status, _, body = call(hookgate, "GET", f"{path}?iterator={bad}", key)
        assert status == 422 and "iterator" in str(body["detail"]), (bad, body)
    for bad in ["limit=0", "limit=251", "event_types=" + "x" * 257, "unknown=1"]:
        status, _, body = call(hookgate, "GET", f"{path}?{bad}", key)
        assert status in (400, 422), (bad, body)
    other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other"})["apiKey"]
    status, _, _ = call(hookgate, "GET", path, other)
    assert status == 404
    # A portal token reads its own application's stream, not another's.
    sent = svix.message.create(app.id, MessageIn(event_type="a.b", payload={}))
    token = call(hookgate, "POST", f"/api/v1/auth/app-portal-access/{app.id}", key, {})[2]["token"]
    eventually(lambda: [m["id"] for m in call(hookgate, "GET", path, token)[2]["data"]] == [sent.id])
    second = svix.application.create(ApplicationIn(name="second"))
    assert call(hookgate, "GET", f"/api/v1/app/{second.id}/events", token)[0] == 404
    # The tenant-wide operational stream is the tenant's key's only.
    assert call(hookgate, "GET", "/api/v1/events", token)[0] == 403


def test_a_stream_waits_for_an_older_transaction_before_passing_a_newer_message(hookgate, tenant, svix):
    """A message whose transaction began first but commits last is still read, and
    before the newer one: the stream does not go past the start of an open transaction."""
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="slow"))
    first = svix.message.create(app.id, MessageIn(event_type="t.first", payload={}))
    path = f"/api/v1/app/{app.id}/events"
    ids, last = eventually(lambda: (r := read_all(hookgate, key, path)) and r[0] and r)
    assert ids == [first.id]
    # A slow publisher: its transaction inserts a message (as Hookgate's own
    # statement does: created_at is the transaction's start) and does not commit yet.
    slow = subprocess.Popen(["psql", hookgate.env["DATABASE_URL"], "-qAt", "-v", "ON_ERROR_STOP=1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        slow.stdin.write(
            "BEGIN;\n"
            "INSERT INTO messages (tenant_id, app_id, id, event_type, payload) "
            f"SELECT tenant_id, app_id, id || 'z', 't.slow', payload FROM messages WHERE id = '{first.id}';\n"
            "\\echo inserted\n")
        slow.stdin.flush()
        assert slow.stdout.readline().strip() == "inserted"
        time.sleep(1.5)
        newer = svix.message.create(app.id, MessageIn(event_type="t.newer", payload={}))
        # Well past the margin: the newer message is committed, but the stream holds.
        time.sleep(2.5)
        status, _, page = call(hookgate, "GET", f"{path}?iterator={last}", key)
        assert status == 200 and page["data"] == [], "read past a transaction still open"
        slow.stdin.write("COMMIT;\n\\echo committed\n")
        slow.stdin.flush()
        assert slow.stdout.readline().strip() == "committed"
    finally:
        slow.stdin.close()
        slow.wait(timeout=10)
    ids, _ = eventually(lambda: (r := read_all(hookgate, key, path)) and len(r[0]) == 3 and r)
    assert ids == [first.id, first.id + "z", newer.id], "the slow message is read, before the newer one"


def test_the_operational_stream_reads_the_tenants_operational_events(hookgate, tenant, svix):
    key = tenant["apiKey"]
    # Nothing is kept before an operational webhook endpoint subscribes.
    status, _, page = call(hookgate, "GET", "/api/v1/events", key)
    assert status == 200 and page["data"] == [] and page["done"] is True
    ops = Sink()
    try:
        svix.operational_webhook.endpoint.create(OperationalWebhookEndpointIn(url=ops.url))
        app = svix.application.create(ApplicationIn(name="watched"))
        ep = svix.endpoint.create(app.id, EndpointIn(url=ops.url))
        svix.endpoint.delete(app.id, ep.id)

        def events():
            ids, _ = read_all(hookgate, key, "/api/v1/events")
            assert len(ids) >= 2
            return call(hookgate, "GET", "/api/v1/events", key)[2]["data"]

        data = eventually(events)
        assert [m["eventType"] for m in data] == ["endpoint.created", "endpoint.deleted"]
        assert all(m["payload"]["data"]["endpointId"] == ep.id for m in data)
        filtered = call(hookgate, "GET", "/api/v1/events?event_types=endpoint.deleted", key)[2]["data"]
        assert [m["eventType"] for m in filtered] == ["endpoint.deleted"]
        # Another tenant's stream shows none of them.
        other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other"})["apiKey"]
        assert call(hookgate, "GET", "/api/v1/events", other)[2]["data"] == []
    finally:
        ops.server.shutdown()
