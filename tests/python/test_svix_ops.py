"""Svix's remaining operations (issue 44, item 5), driven on the wire to the shapes of Svix's
OpenAPI (the Python SDK 2.9 has none of these calls): a destination's attempts, headers,
secret, next and last acknowledged event, skip and force-retry; an endpoint's throttling
status and a transformation's simulation; an application's alert e-mail and attempt
statistics; event types exported as an OpenAPI document."""
import json
import time
import uuid

import standardwebhooks
from svix.api import AppPortalAccessIn, ApplicationIn, DestinationIn, EndpointIn, EventTypeIn, MessageIn

from conftest import Sink, call, eventually


def publish(svix, app_id, n, event_type="order.paid"):
    return [svix.message.create(app_id, MessageIn(event_type=event_type, payload={"n": i})).id for i in range(n)]


def fifo(svix, app_id, sink, **config):
    return svix.destination.create(app_id, DestinationIn(
        type="fifoEndpoint", config={"url": sink.url, **config}, batch_size=1, max_wait_secs=0))


def test_skip_moves_a_stuck_fifo_endpoint_past_a_message_and_next_and_last_acked_events_follow(
        hookgate, tenant, svix):
    key = tenant["apiKey"]
    sink = Sink()
    sink.status = 500  # every batch fails: the endpoint is stuck on its first message
    try:
        app = svix.application.create(ApplicationIn(name="skip"))
        dest = fifo(svix, app.id, sink)
        base = f"/api/v1/app/{app.id}/destination/{dest.id}"
        status, _, none = call(hookgate, "GET", f"{base}/last-acked-event", key)
        assert status == 404, none
        sent = publish(svix, app.id, 3)
        sink.wait_for(1)

        status, _, nxt = call(hookgate, "GET", f"{base}/next-event", key)
        assert status == 200 and nxt["eventType"] == "order.paid", nxt
        assert json.loads(nxt["payload"]) == {"n": 0}, "the first message waits"

        # Past the first message: the endpoint goes on with the second, and the first is never sent again.
        def skipped():
            status, _, body = call(hookgate, "POST", f"{base}/skip", key, {"iterator": sent[0]})
            assert status == 204, body
            return True
        eventually(skipped)
        # A skip is refused while a batch is in flight, so nothing of the first is on its way now.
        with sink._lock:
            marker = len(sink.received)
        sink.status = 200
        status, _, _ = call(hookgate, "POST", f"{base}/force-retry", key)
        assert status == 204

        def since_skip():
            with sink._lock:
                return [json.loads(r["body"])["data"][0]["id"] for r in sink.received[marker:]]

        def rest_delivered():
            ok = since_skip()
            return ok if sent[1] in ok and sent[2] in ok else None
        eventually(rest_delivered, timeout=30)

        # Acknowledged once the runner commits its turn (after the receiver answered).
        def acked():
            status, _, last = call(hookgate, "GET", f"{base}/last-acked-event", key)
            assert status == 200 and json.loads(last["payload"]) == {"n": 2}, last
            status, _, nothing = call(hookgate, "GET", f"{base}/next-event", key)
            assert status == 404, nothing
            return True
        eventually(acked)
        time.sleep(1.5)  # a retry of the schedule (1,1) would have come by now
        assert sent[0] not in since_skip(), "the skipped message is not sent once the receiver answers 200"

        # Skipping a message already past, or none of this endpoint's, says so.
        status, _, body = call(hookgate, "POST", f"{base}/skip", key, {"iterator": sent[0]})
        assert status == 422 and "not waiting" in str(body["detail"]), body
        status, _, body = call(hookgate, "POST", f"{base}/skip?iterator=garbage", key)
        assert status == 422 and "iterator" in str(body["detail"]), body

        # Attempts: the failed tries and the successes, as Svix's DestinationAttemptOut.
        status, _, page = call(hookgate, "GET", f"{base}/attempt?limit=50", key)
        assert status == 200 and page["data"], page
        first = page["data"][0]
        assert first["destinationId"] == dest.id and first["numEvents"] == 1
        assert {a["statusText"] for a in page["data"]} == {"success", "fail"}
        status, _, only_failed = call(hookgate, "GET", f"{base}/attempt?status=2", key)
        assert status == 200 and {a["status"] for a in only_failed["data"]} == {2}
        status, _, one = call(hookgate, "GET", f"{base}/attempt/{first['id']}", key)
        assert status == 200 and one == first
        status, _, _ = call(hookgate, "GET", f"{base}/attempt/atmpt_01H00000000000000000000000", key)
        assert status == 404
    finally:
        sink.server.shutdown()


def test_skip_with_no_iterator_passes_everything_logged(hookgate, tenant, svix):
    key = tenant["apiKey"]
    sink = Sink()
    sink.status = 500
    try:
        app = svix.application.create(ApplicationIn(name="skip-all"))
        dest = fifo(svix, app.id, sink)
        base = f"/api/v1/app/{app.id}/destination/{dest.id}"
        publish(svix, app.id, 4)
        sink.wait_for(1)
        eventually(lambda: call(hookgate, "POST", f"{base}/skip", key)[0] == 204)
        status, _, nothing = call(hookgate, "GET", f"{base}/next-event", key)
        assert status == 404, nothing
        sink.status = 200
        later = publish(svix, app.id, 1)
        eventually(lambda: any(json.loads(r["body"])["data"][0]["id"] == later[0] for r in sink.received), timeout=30)
    finally:
        sink.server.shutdown()


def test_a_fifo_endpoints_headers_and_secret_read_and_patch_as_svix_shapes_them(hookgate, tenant, svix):
    key = tenant["apiKey"]
    sink = Sink()
    try:
        app = svix.application.create(ApplicationIn(name="headers"))
        dest = fifo(svix, app.id, sink, headers={"X-Team": "ops", "Authorization": "Bearer s3cret"})
        base = f"/api/v1/app/{app.id}/destination/{dest.id}"
        status, _, got = call(hookgate, "GET", f"{base}/headers", key)
        assert status == 200 and got == {"headers": {"X-Team": "ops"}, "sensitive": ["Authorization"]}, got
        status, _, got = call(hookgate, "PATCH", f"{base}/headers", key,
                              {"headers": {"X-Team": None, "X-Region": "eu"}})
        assert status == 200 and got == {"headers": {"X-Region": "eu"}, "sensitive": ["Authorization"]}, got
        status, _, secret = call(hookgate, "GET", f"{base}/secret", key)
        assert status == 200 and secret["key"].startswith("whsec_")
        # What the receiver gets: the patched headers, the credential kept, signed with that secret.
        msg = publish(svix, app.id, 1)[0]
        r = sink.wait_for(1)[0]
        assert r["headers"]["x-region"] == "eu" and "x-team" not in r["headers"]
        assert r["headers"]["authorization"] == "Bearer s3cret"
        body = standardwebhooks.Webhook(secret["key"]).verify(
            r["body"], {k: r["headers"][k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")})
        assert body["data"][0]["id"] == msg
        status, _, bad = call(hookgate, "PATCH", f"{base}/headers", key, {"headers": {"svix-x": "1"}})
        assert status == 422, bad
        # Only the HTTP destination has headers of its own; a polling endpoint keeps no position.
        poller = svix.destination.create(app.id, DestinationIn(type="pollingEndpoint", config={}))
        status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/destination/{poller.id}/headers", key)
        assert status == 422 and "fifoEndpoint" in str(body["detail"]), body
        status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/destination/{poller.id}/next-event", key)
        assert status == 422 and "consumer" in str(body["detail"]), body
        # An HTTP endpoint is no destination, and another tenant's destination is not found.
        ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
        status, _, _ = call(hookgate, "GET", f"/api/v1/app/{app.id}/destination/{ep.id}/secret", key)
        assert status == 404
        other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other-" + uuid.uuid4().hex[:6]})
        for method, sub in (("GET", "headers"), ("GET", "secret"), ("GET", "attempt"), ("POST", "skip"),
                            ("POST", "force-retry"), ("GET", "next-event")):
            status, _, _ = call(hookgate, method, f"{base}/{sub}", other["apiKey"])
            assert status == 404, (sub, status)
    finally:
        sink.server.shutdown()


def test_a_queue_destinations_next_and_last_acked_events_and_force_retry(hookgate, tenant, svix, rabbitmq):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="queue"))
    queue = "q" + uuid.uuid4().hex[:8]
    rabbitmq.declare_queue(queue)
    dest = svix.destination.create(app.id, DestinationIn(
        type="rabbitMq", config={"uri": rabbitmq.uri, "routingKey": queue}))
    base = f"/api/v1/app/{app.id}/destination/{dest.id}"
    sent = publish(svix, app.id, 2)

    def acked():
        status, _, last = call(hookgate, "GET", f"{base}/last-acked-event", key)
        assert status == 200, last
        return last
    last = eventually(acked, timeout=30)
    assert last["eventType"] == "order.paid" and json.loads(last["payload"]) in ({"n": 0}, {"n": 1})
    eventually(lambda: call(hookgate, "GET", f"{base}/next-event", key)[0] == 404, timeout=30)
    status, _, _ = call(hookgate, "POST", f"{base}/force-retry", key)
    assert status == 204
    status, _, body = call(hookgate, "POST", f"{base}/skip", key, {"iterator": sent[0]})
    assert status == 422 and "cancel-msgs" in str(body["detail"]), body


def test_rate_limit_status_says_when_the_throttle_holds_deliveries_back(hookgate, tenant, svix, sink):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="throttle"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, throttle_rate=1))
    path = f"/api/v1/app/{app.id}/endpoint/{ep.id}/rate-limit-status"
    status, _, got = call(hookgate, "GET", path, key)
    assert status == 200 and got == {"status": "Ok", "throttledSince": None}, got
    for i in range(8):
        svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": i}))

    def limited():
        status, _, got = call(hookgate, "GET", path, key)
        assert status == 200 and got["status"] == "RateLimited" and got["throttledSince"], got
        return got
    eventually(limited, timeout=10)
    sink.wait_for(8, timeout=30)
    eventually(lambda: call(hookgate, "GET", path, key)[2]["status"] == "Ok", timeout=15)
    free = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    status, _, got = call(hookgate, "GET", f"/api/v1/app/{app.id}/endpoint/{free.id}/rate-limit-status", key)
    assert got["status"] == "Ok"


SIMULATE = """
function handler(webhook) {
  if (webhook.payload.skip) { webhook.cancel = true; return webhook; }
  webhook.payload = { text: webhook.variables.prefix + ' ' + webhook.eventType, total: webhook.payload.amount * 100 };
  webhook.method = 'PUT';
  return webhook;
}
"""


def test_simulate_returns_the_transformed_request_without_sending_it(hookgate, tenant, svix, sink):
    key = tenant["apiKey"]
    hookgate.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"transformations": True})
    app = svix.application.create(ApplicationIn(name="simulate"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    path = f"/api/v1/app/{app.id}/endpoint/{ep.id}/transformation/simulate"
    body = {"code": SIMULATE, "eventType": "invoice.paid", "payload": {"amount": 7}, "variables": {"prefix": "paid:"}}
    status, _, got = call(hookgate, "POST", path, key, body)
    assert status == 200, got
    assert got["cancel"] is False and got["method"] == "PUT" and got["url"] == sink.url
    assert json.loads(got["payload"]) == {"text": "paid: invoice.paid", "total": 700}
    status, _, got = call(hookgate, "POST", path, key, {**body, "payload": {"skip": True}})
    assert status == 200 and got["cancel"] is True, got
    status, _, got = call(hookgate, "POST", path, key, {**body, "code": "function handler(w) { throw new Error('no'); }"})
    assert status == 422 and "no" in str(got["detail"]), got
    status, _, got = call(hookgate, "POST", path, key, {**body, "payload": [1]})
    assert status == 422, got
    time.sleep(0.5)
    assert sink.received == [], "nothing is sent"


def test_alert_email_is_stored_and_bad_addresses_are_refused(hookgate, tenant, svix):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="alerts"))
    path = f"/api/v1/app/{app.id}/alert-email"
    status, _, _ = call(hookgate, "PATCH", path, key, {"email": "ops@example.com, oncall@example.org"})
    assert status == 204
    status, _, _ = call(hookgate, "PATCH", path, key, {"email": None})
    assert status == 204
    status, _, body = call(hookgate, "PATCH", path, key, {"email": "ops@example.com, not an address"})
    assert status == 422 and "not an address" in str(body["detail"]), body
    status, _, _ = call(hookgate, "PATCH", "/api/v1/app/app_01H00000000000000000000000/alert-email", key, {})
    assert status == 404
    # A portal token may not set it.
    portal = svix.authentication.app_portal_access(app.id, AppPortalAccessIn())
    status, _, _ = call(hookgate, "PATCH", path, portal.token, {"email": "x@example.com"})
    assert status == 403


def test_attempt_statistics_count_an_applications_attempts_by_outcome_and_event_type(hookgate, tenant, svix):
    key = tenant["apiKey"]
    ok, bad = Sink(), Sink()
    bad.status = 500
    try:
        app = svix.application.create(ApplicationIn(name="stats"))
        svix.endpoint.create(app.id, EndpointIn(url=ok.url))
        svix.endpoint.create(app.id, EndpointIn(url=bad.url))
        for et in ("order.paid", "order.paid", "user.signup"):
            svix.message.create(app.id, MessageIn(event_type=et, payload={}))
        ok.wait_for(3)
        bad.wait_for(9, timeout=30)  # three tries each (schedule 1,1)

        def stats(path):
            """One read; a 429 of the per-tenant rate (2 a second) is waited out."""
            def once():
                status, hdrs, got = call(hookgate, "GET", path, key)
                assert status != 429, got
                return status, got
            return eventually(once)

        def counted():
            status, got = stats(f"/api/v1/app/{app.id}/stats/attempts")
            assert status == 200, got
            assert got["total_success"] == 3 and got["total_failure"] == 9, got
            return got
        got = eventually(counted, timeout=20)
        assert got["by_event_type"]["order.paid"] == {"success": 2, "failure": 6, "canceled": 0}
        assert got["by_event_type"]["user.signup"] == {"success": 1, "failure": 3, "canceled": 0}
        status, only = stats(f"/api/v1/app/{app.id}/stats/attempts?event_types=user.signup")
        assert status == 200 and list(only["by_event_type"]) == ["user.signup"] and only["total_success"] == 1

        status, series = stats(f"/api/v1/stats/app/{app.id}/attempt?period=OneHour")
        assert status == 200 and series["period"] == "OneHour", series
        assert sum(series["data"]["successCount"]) == 3 and sum(series["data"]["failureCount"]) == 9
        assert len(series["data"]["successCount"]) == 7 * 24 or len(series["data"]["successCount"]) == 7 * 24 + 1
        status, body = stats(f"/api/v1/stats/app/{app.id}/attempt?period=Weekly")
        assert status == 422 and "period" in str(body["detail"]), body
        status, body = stats(f"/api/v1/stats/app/{app.id}/attempt?period=FiveMinutes&startDate=2020-01-01T00:00:00Z")
        assert status == 422, body

        # Rate-limited per tenant (before, unlimited): a burst is refused with Retry-After.
        answers = [call(hookgate, "GET", f"/api/v1/app/{app.id}/stats/attempts", key)[:2] for _ in range(6)]
        limited = [hdrs for status, hdrs in answers if status == 429]
        assert limited and all(int(h["retry-after"]) >= 1 for h in limited), [a[0] for a in answers]
    finally:
        ok.server.shutdown()
        bad.server.shutdown()


def test_event_types_export_as_an_openapi_documents_webhooks(hookgate, tenant, svix):
    key = tenant["apiKey"]
    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    svix.event_type.create(EventTypeIn(name="invoice.paid", description="An invoice was paid", schemas={"1": schema}))
    svix.event_type.create(EventTypeIn(name="user.gone", description="gone", deprecated=True))
    status, _, task = call(hookgate, "POST", "/api/v1/event-type/export/openapi", key)
    assert status == 202 and task["task"] == "sdk.generate" and task["status"] == "finished", task
    got = svix.background_task.get(task["id"])
    doc = got.data["openapi"]
    assert doc["openapi"].startswith("3.1")
    paid = doc["webhooks"]["invoice.paid"]["post"]
    assert paid["description"] == "An invoice was paid"
    assert paid["requestBody"]["content"]["application/json"]["schema"] == schema
    assert doc["webhooks"]["user.gone"]["post"]["deprecated"] is True
    # The document imports back as the same event types. (Before, only the 200 was checked.)
    status, _, imported = call(hookgate, "POST", "/api/v1/event-type/import/openapi", key,
                               {"spec": doc, "dryRun": True})
    assert status == 200, imported
    back = {t["name"]: t for t in imported["data"]["to_modify"]}
    assert set(back) == set(doc["webhooks"]) and {"invoice.paid", "user.gone"} <= set(back), back
    assert back["invoice.paid"]["description"] == "An invoice was paid"
    assert back["invoice.paid"]["schemas"] == {"1": schema}
    assert back["user.gone"]["deprecated"] is True and back["invoice.paid"]["deprecated"] is False


def test_an_ingest_source_patch_changes_name_uid_and_metadata_and_keeps_its_url(hookgate, tenant, svix):
    from svix.api import IngestSourceIn
    key = tenant["apiKey"]
    made = svix.ingest.source.create(IngestSourceIn(name="Anything", type="generic-webhook", metadata={"a": "b"}))
    path = f"/ingest/api/v1/source/{made.id}"
    status, _, got = call(hookgate, "PATCH", path, key, {"name": "Renamed", "uid": "renamed-src"})
    assert status == 200, got
    assert (got["name"], got["uid"], got["metadata"], got["ingestUrl"]) == ("Renamed", "renamed-src", {"a": "b"},
                                                                          made.ingest_url)
    status, _, got = call(hookgate, "PATCH", "/ingest/api/v1/source/renamed-src", key, {"metadata": {"c": "d"}, "uid": None})
    assert status == 200 and got["uid"] is None and got["metadata"] == {"c": "d"} and got["name"] == "Renamed", got
    status, _, body = call(hookgate, "PATCH", path, key, {"uid": "src_looks_like_an_id"})
    assert status == 422, body
    status, _, body = call(hookgate, "PATCH", path, key, {"name": "x"})
    assert status == 422 and "name" in str(body["detail"]), body
    status, _, body = call(hookgate, "PATCH", path, key, {"type": "stripe"})
    assert status == 422, body
    other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other-" + uuid.uuid4().hex[:6]})
    status, _, _ = call(hookgate, "PATCH", path, other["apiKey"], {"name": "Mine now"})
    assert status == 404
