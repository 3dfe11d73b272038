"""Operational webhooks driven by the official Svix Python SDK
(`svix.operational_webhook.endpoint`), delivered through Hookgate's outbox and
verified with the SDK's own verifier, with the payload fields Svix's server sends."""
import base64
import json
import secrets
import time
import uuid

import pytest
from svix.api import (
    ApplicationIn,
    EndpointIn,
    MessageIn,
    OperationalWebhookEndpointHeadersIn,
    OperationalWebhookEndpointIn,
    OperationalWebhookEndpointSecretIn,
    OperationalWebhookEndpointUpsertIn,
    Svix,
    SvixOptions,
)
from svix.exceptions import HttpError
from svix.webhooks import Webhook

from conftest import Hookgate, Sink, call, eventually, free_port, fresh_database


def own_hookgate(hookgate, **settings):
    """A Hookgate of its own, on a fresh database, with `settings` added."""
    env = dict(hookgate.env)
    env["DATABASE_URL"] = fresh_database()
    env["HOOKGATE_LISTEN"] = f"127.0.0.1:{free_port()}"
    env["HOOKGATE_METRICS_LISTEN"] = f"127.0.0.1:{free_port()}"
    env["HOOKGATE_MASTER_KEY"] = base64.b64encode(secrets.token_bytes(32)).decode()
    env.update(settings)
    if "HOOKGATE_REDIS_PREFIX" in env:
        env["HOOKGATE_REDIS_PREFIX"] = "py-" + uuid.uuid4().hex[:8] + ":"
    return Hookgate(env)


@pytest.fixture
def quick_disable(hookgate):
    """A Hookgate of its own that disables an endpoint failing for a second."""
    hg = own_hookgate(hookgate, HOOKGATE_DISABLE_AFTER_SECS="1")
    yield hg
    hg.stop()


@pytest.fixture
def many_retries(hookgate):
    """A Hookgate of its own that retries five times, a second apart."""
    hg = own_hookgate(hookgate, HOOKGATE_RETRY_SCHEDULE="1,1,1,1,1")
    yield hg
    hg.stop()


def events_of(sink, secret):
    """Each request the sink got, verified with the Svix verifier, as parsed JSON."""
    out = []
    for r in list(sink.received):
        Webhook(secret).verify(r["body"], r["headers"])
        out.append(json.loads(r["body"]))
    return out


def test_an_endpoint_failing_until_disabled_yields_endpoint_disabled_and_message_attempt_exhausted(quick_disable):
    hg = quick_disable
    tenant = hg.admin("POST", "/admin/v1/tenant", {"name": "agency-client"})
    svix = Svix(tenant["apiKey"], SvixOptions(server_url=hg.url, retry_schedule=[]))
    ops, operator_ops, failing = Sink(), Sink(), Sink()
    failing.status = 500
    try:
        op = svix.operational_webhook.endpoint.create(
            OperationalWebhookEndpointIn(url=ops.url, uid="ops-inbox", metadata={"team": "ops"})
        )
        assert op.id.startswith("ep_") and op.uid == "ops-inbox" and op.metadata == {"team": "ops"}
        assert [e.id for e in svix.operational_webhook.endpoint.list().data] == [op.id]
        assert svix.operational_webhook.endpoint.get("ops-inbox").id == op.id
        secret = svix.operational_webhook.endpoint.get_secret(op.id).key
        assert secret.startswith("whsec_")
        # The operator's endpoint receives every tenant's events.
        status, _, operator_ep = call(
            hg, "POST", "/admin/v1/operational-webhook/endpoint",
            key="py-admin-token-0123456789abcdef", body={"url": operator_ops.url},
        )
        assert status == 201, operator_ep
        _, _, operator_secret = call(
            hg, "GET", f"/admin/v1/operational-webhook/endpoint/{operator_ep['id']}/secret",
            key="py-admin-token-0123456789abcdef",
        )
        # The hidden application is not one of the tenant's applications.
        assert svix.application.list().data == []

        app = svix.application.create(ApplicationIn(name="Customer", uid="cust-1"))
        ep = svix.endpoint.create(app.id, EndpointIn(url=failing.url, uid="cust-ep"))
        msg = svix.message.create(app.id, MessageIn(event_type="order.created", payload={"n": 1}, event_id="order-1"))

        def wanted(sink, key):
            seen = {e["type"]: e for e in events_of(sink, key)}
            if {"endpoint.created", "endpoint.disabled", "message.attempt.exhausted"} <= seen.keys():
                return seen
            return None

        seen = eventually(lambda: wanted(ops, secret), timeout=30)
        created = seen["endpoint.created"]["data"]
        assert created == {"appId": app.id, "appUid": "cust-1", "endpointId": ep.id, "endpointUid": "cust-ep"}
        disabled = seen["endpoint.disabled"]["data"]
        assert {k: disabled[k] for k in ("appId", "appUid", "endpointId", "endpointUid", "trigger")} == {
            "appId": app.id, "appUid": "cust-1", "endpointId": ep.id, "endpointUid": "cust-ep", "trigger": "automatic",
        }
        assert disabled["failSince"].endswith("Z")
        exhausted = seen["message.attempt.exhausted"]["data"]
        assert (exhausted["appId"], exhausted["appUid"], exhausted["msgId"], exhausted["msgEventId"]) == (
            app.id, "cust-1", msg.id, "order-1",
        )
        assert exhausted["endpointId"] == ep.id
        assert exhausted["lastAttempt"]["id"].startswith("atmpt_")
        assert exhausted["lastAttempt"]["responseStatusCode"] == 500
        assert exhausted["lastAttempt"]["timestamp"].endswith("Z")
        assert svix.endpoint.get(app.id, ep.id).disabled is True

        # The operator's copy: the same events, with the tenant named.
        theirs = eventually(lambda: wanted(operator_ops, operator_secret["key"]), timeout=30)
        assert theirs["endpoint.disabled"]["tenantId"] == tenant["id"]
        assert theirs["message.attempt.exhausted"]["data"] == exhausted
    finally:
        for s in (ops, operator_ops, failing):
            s.server.shutdown()


def test_operational_webhook_endpoints_are_managed_as_svix_does(svix, sink):
    op = svix.operational_webhook.endpoint.create(
        OperationalWebhookEndpointIn(url=sink.url, event_types=["endpoint.deleted"], headers={"x-team": "ops"})
    )
    assert op.event_types == ["endpoint.deleted"]
    assert svix.operational_webhook.endpoint.get_headers(op.id).headers == {"x-team": "ops"}
    svix.operational_webhook.endpoint.set_headers(op.id, OperationalWebhookEndpointHeadersIn(headers={"x-a": "1"}))
    assert svix.operational_webhook.endpoint.get_headers(op.id).headers == {"x-a": "1"}
    upserted = svix.operational_webhook.endpoint.upsert(
        op.id, OperationalWebhookEndpointUpsertIn(url=sink.url, description="ops", event_types=["endpoint.deleted"])
    )
    assert upserted.description == "ops"
    old = svix.operational_webhook.endpoint.get_secret(op.id).key
    svix.operational_webhook.endpoint.rotate_secret(op.id, OperationalWebhookEndpointSecretIn())
    new = svix.operational_webhook.endpoint.get_secret(op.id).key
    assert new != old
    # Only the subscribed event type arrives: a created endpoint says nothing, a
    # deleted one does, signed with the new secret.
    app = svix.application.create(ApplicationIn(name="C"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url.replace("/hook", "/customer"), uid="gone-soon"))
    svix.endpoint.delete(app.id, ep.id)
    got = sink.wait_for(1)
    Webhook(new).verify(got[0]["body"], got[0]["headers"])
    event = json.loads(got[0]["body"])
    assert event == {
        "type": "endpoint.deleted",
        "data": {"appId": app.id, "appUid": None, "endpointId": ep.id, "endpointUid": "gone-soon"},
    }
    assert got[0]["headers"]["x-a"] == "1"
    svix.operational_webhook.endpoint.delete(op.id)
    with pytest.raises(HttpError) as e:
        svix.operational_webhook.endpoint.get(op.id)
    assert e.value.status_code == 404


def test_a_message_failing_four_times_then_delivered_yields_failing_then_recovered(many_retries):
    hg = many_retries
    tenant = hg.admin("POST", "/admin/v1/tenant", {"name": "flaky-client"})
    svix = Svix(tenant["apiKey"], SvixOptions(server_url=hg.url, retry_schedule=[]))
    ops, flaky = Sink(), Sink()
    flaky.fail_first = 4
    try:
        op = svix.operational_webhook.endpoint.create(
            OperationalWebhookEndpointIn(url=ops.url, event_types=["message.attempt.failing", "message.attempt.recovered"])
        )
        secret = svix.operational_webhook.endpoint.get_secret(op.id).key
        app = svix.application.create(ApplicationIn(name="Flaky"))
        ep = svix.endpoint.create(app.id, EndpointIn(url=flaky.url))
        msg = svix.message.create(app.id, MessageIn(event_type="order.created", payload={"n": 2}))
        got = eventually(lambda: len(ops.received) >= 2 and events_of(ops, secret), timeout=30)
        assert [e["type"] for e in got] == ["message.attempt.failing", "message.attempt.recovered"]
        failing, recovered = got[0]["data"], got[1]["data"]
        for d in (failing, recovered):
            assert (d["appId"], d["appUid"], d["msgId"], d["msgEventId"], d["endpointId"]) == (
                app.id, None, msg.id, None, ep.id,
            )
        assert failing["lastAttempt"]["responseStatusCode"] == 500
        assert recovered["lastAttempt"]["responseStatusCode"] == 200
        assert recovered["lastAttempt"]["id"] != failing["lastAttempt"]["id"]
        assert len(flaky.received) == 5, "four failures, then the delivery"
    finally:
        for s in (ops, flaky):
            s.server.shutdown()


def test_a_burst_of_bad_signatures_and_a_quota_refusal_on_a_source_are_told_once_each(hookgate, tenant, svix, sink):
    op = svix.operational_webhook.endpoint.create(
        OperationalWebhookEndpointIn(url=sink.url, event_types=["source.signature_failures", "source.quota_exceeded"])
    )
    secret = svix.operational_webhook.endpoint.get_secret(op.id).key
    app = svix.application.create(ApplicationIn(name="In"))
    status, _, src = call(hookgate, "POST", "/api/v1/source", tenant["apiKey"], {
        "name": "hooks", "provider": "standard-webhooks", "appId": app.id,
        "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    })
    assert status == 201, src
    forged = {"webhook-id": "msg_x", "webhook-timestamp": "1", "webhook-signature": "v1,AAAA"}
    for _ in range(12):
        status, _, _ = call(hookgate, "POST", f"/in/{src['id']}", raw=b"{}", headers=forged)
        assert status == 401
    hookgate.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"quotas": {"inboundPerSecond": 1}})
    try:
        import standardwebhooks
        from datetime import datetime, timezone

        wh = standardwebhooks.Webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        statuses = []
        for i in range(4):
            now = datetime.now(timezone.utc)
            body = json.dumps({"type": "user.created", "n": i})
            headers = {"webhook-id": f"msg_q_{i}", "webhook-timestamp": str(int(now.timestamp())),
                       "webhook-signature": wh.sign(f"msg_q_{i}", now, body)}
            statuses.append(call(hookgate, "POST", f"/in/{src['id']}", raw=body.encode(), headers=headers)[0])
        assert 429 in statuses, statuses
    finally:
        hookgate.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"quotas": None})
    got = eventually(lambda: len(sink.received) >= 2 and events_of(sink, secret), timeout=20)
    by_type = {e["type"]: e["data"] for e in got}
    assert by_type["source.signature_failures"] == {
        "sourceId": src["id"], "sourceName": "hooks", "failures": 10, "windowSeconds": 60,
    }
    assert by_type["source.quota_exceeded"] == {
        "sourceId": src["id"], "sourceName": "hooks", "limit": "inboundPerSecond", "value": 1,
    }
    time.sleep(1.5)
    assert len(sink.received) == 2, "one notice each per window"


def test_a_destination_is_told_as_an_endpoint_is_when_created_updated_and_deleted(hookgate, tenant, svix, sink):
    """A destination is an endpoint row: its changes reach the operational webhooks
    as an endpoint's do (before, only its rotation and its disabling did)."""
    told = ["endpoint.created", "endpoint.updated", "endpoint.deleted"]
    op = svix.operational_webhook.endpoint.create(OperationalWebhookEndpointIn(url=sink.url, event_types=told))
    secret = svix.operational_webhook.endpoint.get_secret(op.id).key
    app = svix.application.create(ApplicationIn(name="D"))
    key = tenant["apiKey"]
    base = f"/api/v1/app/{app.id}/destination"
    status, _, dest = call(hookgate, "POST", base, key, {"type": "pollingEndpoint", "config": {}, "uid": "poll-1"})
    assert status == 201, dest
    status, _, patched = call(hookgate, "PATCH", f"{base}/{dest['id']}", key,
                              {"type": "pollingEndpoint", "config": {}, "eventTypes": ["order.paid"]})
    assert status == 200, patched
    status, _, _ = call(hookgate, "DELETE", f"{base}/{dest['id']}", key)
    assert status == 204
    got = eventually(lambda: (lambda e: e if len(e) >= 3 else None)(events_of(sink, secret)))
    # Three messages, each delivered on its own: in any order.
    assert sorted(e["type"] for e in got) == sorted(told), got
    for e in got:
        assert e["data"]["endpointId"] == dest["id"] and e["data"]["appId"] == app.id, e
    deleted = next(e for e in got if e["type"] == "endpoint.deleted")
    assert deleted["data"]["endpointUid"] == "poll-1", deleted
