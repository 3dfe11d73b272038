"""Svix's message operations beyond create/list/get, on the wire: the raw payload,
an attempt's headers (credentials masked), a test attempt, cancelling an endpoint's
pending deliveries, search, and broadcast. The Python SDK 2.9
has none of these calls, so they go as plain HTTP (`call`), each answer checked
against /openapi.json on the way."""
import subprocess
import time
from datetime import datetime, timedelta, timezone

from svix.api import ApplicationIn, EndpointIn, EndpointHeadersIn, MessageIn

from conftest import Sink, call, eventually, raw_call


def other_tenant(hookgate):
    return hookgate.admin("POST", "/admin/v1/tenant", {"name": "other"})["apiKey"]


def portal_token(hookgate, key, app_id):
    status, _, body = call(hookgate, "POST", f"/api/v1/auth/app-portal-access/{app_id}", key, {})
    assert status == 200, body
    return body["token"]


def psql(hookgate, sql):
    out = subprocess.run(["psql", hookgate.env["DATABASE_URL"], "-qAtc", sql], check=True,
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


def test_the_raw_payload_is_the_bytes_the_message_was_sent_with(hookgate, tenant, svix):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="raw"))
    payload = '{"b": 1,   "a":[1, 2.50],"s":"caf\\u00e9"}'
    body = ('{"eventType": "raw.test", "payload": ' + payload + '}').encode()
    status, _, msg = call(hookgate, "POST", f"/api/v1/app/{app.id}/msg", key, raw=body,
                          headers={"Content-Type": "application/json"})
    assert status == 202, msg
    status, _, out = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg/{msg['id']}/raw", key)
    assert status == 200 and out == {"payload": payload}, out
    # Another tenant's key finds nothing there.
    status, _, _ = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg/{msg['id']}/raw", other_tenant(hookgate))
    assert status == 404
    # Expunged, it reads as `GET …/msg/{id}` shows it.
    svix.message.expunge_content(app.id, msg["id"])
    status, _, out = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg/{msg['id']}/raw", key)
    assert status == 200 and out == {"payload": '{"expired":true}'}, out


def test_an_attempts_headers_show_what_was_sent_with_the_secret_header_masked(hookgate, tenant, svix, sink):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="headers"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"Authorization": "Bearer s3cret"}))
    msg = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 1}))
    assert sink.wait_for(1)[0]["headers"]["authorization"] == "Bearer s3cret"

    def attempt():
        status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/attempt/msg/{msg.id}", key)
        assert status == 200 and body["data"], body
        return body["data"][0]

    atmpt = eventually(attempt)["id"]
    status, _, raw = raw_call(hookgate, "GET", f"/api/v1/app/{app.id}/msg/{msg.id}/attempt/{atmpt}/headers", key)
    assert status == 200 and b"s3cret" not in raw, raw
    status, _, out = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg/{msg.id}/attempt/{atmpt}/headers", key)
    assert out["sentHeaders"]["authorization"] == "[redacted]"
    assert out["sentHeaders"]["webhook-id"] == msg.id
    assert "authorization" in out["sensitive"] and "webhook-id" not in out["sensitive"]
    assert out.get("responseHeaders") is None
    # The application's portal link reads them too, masked alike.
    token = portal_token(hookgate, key, app.id)
    status, _, seen = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg/{msg.id}/attempt/{atmpt}/headers", token)
    assert status == 200 and seen == out


def test_a_test_attempt_sends_to_that_endpoint_only_and_answers_its_attempt(hookgate, tenant, svix, sink):
    key = tenant["apiKey"]
    other = Sink()
    try:
        app = svix.application.create(ApplicationIn(name="test-attempt"))
        ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
        svix.endpoint.create(app.id, EndpointIn(url=other.url))
        status, _, out = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/msg/test-attempt", key,
                              {"eventType": "test.ping", "payload": {"hello": "world"}})
        assert status == 201, out
        assert out["endpointId"] == ep.id and out["msgId"].startswith("msg_") and out["id"].startswith("atmpt_")
        assert out["status"] == 0 and out["responseStatusCode"] == 200, out
        got = sink.wait_for(1)
        assert got[0]["headers"]["webhook-id"] == out["msgId"] and got[0]["body"] == b'{"hello": "world"}'
        time.sleep(0.5)
        assert other.received == [], "the other endpoint got nothing"
        status, _, body = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/msg/test-attempt", key,
                               {"eventType": "test.ping", "payload": {}, "channels": ["c1"]})
        assert status == 422 and "channels" in str(body["detail"]), body
        # A customer's portal link may not: it would publish a message of any type and payload
        # into the tenant's application (its test is `send-example`).
        from svix.api import AppPortalAccessIn
        token = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
        status, _, _ = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/msg/test-attempt", token,
                            {"eventType": "invoice.paid", "payload": {"amount": 1}})
        assert status == 403
    finally:
        other.server.shutdown()


def test_cancel_msgs_ends_a_failing_endpoints_pending_deliveries_canceled_and_they_are_not_retried(
        hookgate, tenant, svix, sink):
    key = tenant["apiKey"]
    sink.status = 500
    app = svix.application.create(ApplicationIn(name="cancel"))
    # One request a second: most deliveries wait untried while the first ones fail.
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, throttle_rate=1))
    for i in range(8):
        svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": i}))
    sink.wait_for(1)
    before = (datetime.now(timezone.utc) + timedelta(seconds=1)).isoformat()

    def settled():
        status, _, _ = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/cancel-msgs", key,
                            {"createdBefore": before})
        assert status == 204
        status, _, page = call(hookgate, "GET", f"/api/v1/app/{app.id}/endpoint/{ep.id}/msg?limit=50", key)
        statuses = [m["status"] for m in page["data"]]
        assert len(statuses) == 8 and not set(statuses) & {1, 3}, statuses
        return statuses

    statuses = eventually(settled, timeout=20)
    assert statuses.count(4) >= 4, statuses
    assert all(s in (2, 4) for s in statuses), "each ended canceled, or failed after its own tries"
    sent = len(sink.received)
    time.sleep(3)
    assert len(sink.received) == sent, "nothing canceled was tried again"
    status, _, body = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/cancel-msgs", key, {})
    assert status == 422 and "createdBefore" in str(body["detail"]), body


def test_search_filters_by_the_bodys_fields_and_pages_both_ways(hookgate, tenant, svix):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="search"))
    tagged = [svix.message.create(app.id, MessageIn(event_type="a.b", payload={"n": i}, tags=["t1"])).id
              for i in range(5)]
    svix.message.create(app.id, MessageIn(event_type="a.c", payload={"n": 9}, channels=["ch"]))
    path = f"/api/v1/app/{app.id}/msg/search"
    status, _, first = call(hookgate, "POST", path, key, {"limit": 2, "tag": "t1"})
    assert status == 200 and [m["id"] for m in first["data"]] == tagged[::-1][:2] and not first["done"], first
    assert first["data"][0]["payload"] == {}, "without with_content, no payload (Svix's default here)"
    status, _, second = call(hookgate, "POST", path, key, {"limit": 2, "tag": "t1", "iterator": first["iterator"],
                                                             "with_content": True})
    assert [m["id"] for m in second["data"]] == tagged[::-1][2:4] and second["data"][0]["payload"] == {"n": 2}
    status, _, back = call(hookgate, "POST", path, key, {"limit": 2, "tag": "t1",
                                                         "iterator": second["prevIterator"]})
    assert [m["id"] for m in back["data"]] == [m["id"] for m in first["data"]], back
    status, _, chan = call(hookgate, "POST", path, key, {"channel": "ch", "event_types": ["a.c"]})
    assert status == 200 and len(chan["data"]) == 1 and chan["data"][0]["eventType"] == "a.c"
    status, _, body = call(hookgate, "POST", path, key, {"tags": ["t1"]})
    assert status == 422 and "tags" in str(body["detail"]), body
    status, _, body = call(hookgate, "POST", path, key, {"limit": 0})
    assert status == 422 and "limit" in str(body["detail"]), body
    status, _, _ = call(hookgate, "POST", path, other_tenant(hookgate), {})
    assert status == 404


def test_a_broadcast_reaches_every_application_once_even_when_its_task_runs_twice(hookgate, svix):
    key = hookgate.admin("POST", "/admin/v1/tenant", {"name": "broadcast"})["apiKey"]
    sinks = [Sink() for _ in range(3)]
    try:
        apps = []
        for s in sinks:
            status, _, app = call(hookgate, "POST", "/api/v1/app", key, {"name": "bc"})
            assert status == 201, app
            status, _, _ = call(hookgate, "POST", f"/api/v1/app/{app['id']}/endpoint", key, {"url": s.url})
            assert status == 201
            apps.append(app["id"])
        status, _, out = call(hookgate, "POST", "/api/v1/msg/broadcast", key,
                              {"eventType": "news.out", "payload": {"hello": "all"}})
        assert status == 202 and out["task"] == "message.broadcast" and out["id"].startswith("qtask_"), out

        def finished():
            status, _, task = call(hookgate, "GET", f"/api/v1/background-task/{out['id']}", key)
            assert status == 200 and task["status"] == "finished", task
            return task

        assert eventually(finished)["data"]["messagesSent"] == 3
        for s in sinks:
            assert len(s.wait_for(1)) == 1
        # As if the worker had died before recording its progress: the task runs again from the start.
        psql(hookgate, f"UPDATE background_tasks SET status = 0, cursor = '', sent = 0 WHERE id = '{out['id']}'")
        again = eventually(finished)
        assert again["data"]["messagesSent"] == 0, again
        time.sleep(1)
        for s, app in zip(sinks, apps):
            assert len(s.received) == 1, "one message per application, however often the task ran"
            status, _, msgs = call(hookgate, "GET", f"/api/v1/app/{app}/msg", key)
            assert [m["eventId"] for m in msgs["data"]] == [out["id"]], msgs
        # A portal link cannot broadcast; a bad body is refused naming the field.
        token = portal_token(hookgate, key, apps[0])
        assert call(hookgate, "POST", "/api/v1/msg/broadcast", token, {"eventType": "x", "payload": {}})[0] == 403
        status, _, body = call(hookgate, "POST", "/api/v1/msg/broadcast", key,
                               {"eventType": "x", "payload": {}, "payloadRetentionPeriod": 0})
        assert status == 422 and "payloadRetentionPeriod" in str(body["detail"]), body
    finally:
        for s in sinks:
            s.server.shutdown()


def test_a_broadcast_over_the_daily_message_cap_waits_and_goes_on_where_it_stopped(hookgate):
    made = hookgate.admin("POST", "/admin/v1/tenant", {"name": "broadcast-cap"})
    key = made["apiKey"]
    sinks = [Sink() for _ in range(3)]
    try:
        for s in sinks:
            status, _, app = call(hookgate, "POST", "/api/v1/app", key, {"name": "cap"})
            assert call(hookgate, "POST", f"/api/v1/app/{app['id']}/endpoint", key, {"url": s.url})[0] == 201
        hookgate.admin("PATCH", f"/admin/v1/tenant/{made['id']}", {"quotas": {"messagesPerDay": 2}})
        time.sleep(1.5)  # quotas are cached for a second
        status, _, out = call(hookgate, "POST", "/api/v1/msg/broadcast", key,
                              {"eventType": "news.capped", "payload": {"n": 1}})
        assert status == 202, out

        def sent(n):
            def check():
                status, _, task = call(hookgate, "GET", f"/api/v1/background-task/{out['id']}", key)
                assert task["data"]["messagesSent"] == n, task
                return task
            return check

        held = eventually(sent(2))
        time.sleep(2)
        held = sent(2)()
        assert held["status"] == "running", "held back by the cap, not failed"
        assert sorted(len(s.received) for s in sinks) == [0, 1, 1], "two applications got it, the third waits"
        hookgate.admin("PATCH", f"/admin/v1/tenant/{made['id']}", {"quotas": None})
        done = eventually(sent(3), timeout=20)
        assert eventually(lambda: call(hookgate, "GET", f"/api/v1/background-task/{out['id']}", key)[2]["status"]
                          == "finished")
        assert done["data"]["messagesSent"] == 3
        for s in sinks:
            assert len(s.wait_for(1)) == 1
    finally:
        for s in sinks:
            s.server.shutdown()
