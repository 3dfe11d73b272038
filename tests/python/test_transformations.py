"""Endpoint transformations through the official Svix Python SDK: the handler
reshapes what is sent, the receiver verifies the signature over the transformed body
with `standardwebhooks`, `cancel` sends nothing, and a runaway handler fails its own
attempts while other endpoints' deliveries arrive on time."""
import json
import time
import urllib.request

import pytest
import standardwebhooks
from svix.api import (
    ApplicationIn,
    EndpointIn,
    EndpointTransformationPatch,
    MessageAttemptListByEndpointOptions,
    MessageIn,
)
from svix.exceptions import HttpError

from conftest import Sink, call, eventually

RESHAPE = """
function handler(webhook) {
  if (webhook.payload.skip) { webhook.cancel = true; return webhook; }
  webhook.payload = { text: webhook.variables.prefix + ' ' + webhook.eventType, total: webhook.payload.amount * 100 };
  webhook.method = 'PUT';
  webhook.url = webhook.url + '?via=transformation';
  return webhook;
}
"""


def allow(hookgate, tenant, on=True):
    hookgate.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"transformations": on})


def verify(received, secret):
    wh = standardwebhooks.Webhook(secret)
    headers = {k: received["headers"][k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")}
    return wh.verify(received["body"], headers)


def test_a_transformation_reshapes_what_is_sent_and_the_receiver_verifies_it(hookgate, tenant, svix, sink):
    allow(hookgate, tenant)
    app = svix.application.create(ApplicationIn(name="shop"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    secret = svix.endpoint.get_secret(app.id, ep.id).key
    svix.endpoint.transformation.patch(app.id, ep.id, EndpointTransformationPatch(
        code=RESHAPE, enabled=True, variables={"prefix": "paid:"}))
    got = svix.endpoint.transformation.get(app.id, ep.id)
    assert got.enabled and got.code == RESHAPE and got.variables == {"prefix": "paid:"} and got.updated_at

    msg = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"amount": 12}))
    r = sink.wait_for(1)[0]
    assert r["method"] == "PUT" and r["path"] == "/hook?via=transformation"
    assert json.loads(r["body"]) == {"text": "paid: order.paid", "total": 1200}
    assert r["headers"]["webhook-id"] == msg.id
    # Signed over the body as sent: the official verifier accepts it.
    assert verify(r, secret) == {"text": "paid: order.paid", "total": 1200}

    # Told to cancel: nothing goes out, and the delivery shows as canceled (4).
    skipped = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"skip": True, "amount": 1}))
    eventually(lambda: svix.endpoint.get_stats(app.id, ep.id).canceled == 1)
    time.sleep(0.5)
    assert len(sink.received) == 1
    status, _, dest = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg/{skipped.id}/endpoint", tenant["apiKey"])
    assert status == 200 and dest["data"][0]["status"] == 4, dest

    # Switched off (enabled: false), messages go as they were made.
    svix.endpoint.transformation.patch(app.id, ep.id, EndpointTransformationPatch(enabled=False))
    plain = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"amount": 3}))
    r = sink.wait_for(2)[1]
    assert r["method"] == "POST" and json.loads(r["body"]) == {"amount": 3} and r["headers"]["webhook-id"] == plain.id


def test_transformations_need_the_tenants_switch_and_code_that_runs(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="off"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    with pytest.raises(HttpError) as off:
        svix.endpoint.transformation.patch(app.id, ep.id, EndpointTransformationPatch(code=RESHAPE, enabled=True))
    assert off.value.status_code == 403
    assert svix.endpoint.transformation.get(app.id, ep.id).enabled is False

    allow(hookgate, tenant)
    path = f"/api/v1/app/{app.id}/endpoint/{ep.id}/transformation"
    for body, words in [
        ({"code": "function handler(w) { return w", "enabled": True}, "code"),
        ({"code": "const x = 1;", "enabled": True}, "handler"),
        ({"code": "", "enabled": True}, "code"),
        ({"code": "while (true) {}"}, "limit"),
        ({"code": RESHAPE, "enabled": True, "variables": {"": "x"}}, "variables"),
        ({"code": RESHAPE, "enabeld": True}, "enabeld"),
    ]:
        status, _, res = call(hookgate, "PATCH", path, tenant["apiKey"], body)
        assert status == 422 and words in json.dumps(res), (body, status, res)
    assert svix.endpoint.transformation.get(app.id, ep.id).enabled is False, "nothing half-written"

    # Turned off by the tenant itself, an enabled transformation stops applying at once;
    # on again, it applies again; turned off by the operator, it stops whatever the tenant says.
    svix.endpoint.transformation.patch(app.id, ep.id, EndpointTransformationPatch(code=RESHAPE, enabled=True,
                                                                                  variables={"prefix": "p"}))
    key = tenant["apiKey"]
    status, _, own = call(hookgate, "PUT", "/api/v1/settings/transformations", key, {"enabled": False})
    assert status == 200 and own == {"allowed": True, "enabled": False, "active": False}
    svix.message.create(app.id, MessageIn(event_type="a.b", payload={"amount": 1}))
    assert json.loads(sink.wait_for(1)[0]["body"]) == {"amount": 1}
    status, _, own = call(hookgate, "PUT", "/api/v1/settings/transformations", key, {"enabled": True})
    assert own["active"] is True
    svix.message.create(app.id, MessageIn(event_type="a.b", payload={"amount": 2}))
    assert json.loads(sink.wait_for(2)[1]["body"]) == {"text": "p a.b", "total": 200}
    allow(hookgate, tenant, on=False)
    svix.message.create(app.id, MessageIn(event_type="a.b", payload={"amount": 3}))
    assert json.loads(sink.wait_for(3)[2]["body"]) == {"amount": 3}


@pytest.mark.parametrize("runaway", [
    "function handler(w) { for (;;) {} }",
    "function handler(w) { const a = []; for (;;) { a.push('x'.repeat(1 << 20) + a.length); } }",
    # One native call that loops on its own, where QuickJS never checks its deadline:
    # the sandbox's process is killed at the wall limit.
    "function handler(w) { w.payload = Array.prototype.join.call({ length: 2 ** 53 }); return w; }",
])
def test_a_runaway_transformation_fails_its_own_attempt_while_others_arrive_on_time(hookgate, tenant, svix, runaway):
    allow(hookgate, tenant)
    bad_sink, good_sink = Sink(), Sink()
    try:
        app = svix.application.create(ApplicationIn(name="runaway"))
        bad = svix.endpoint.create(app.id, EndpointIn(url=bad_sink.url))
        svix.endpoint.create(app.id, EndpointIn(url=good_sink.url))
        svix.endpoint.transformation.patch(app.id, bad.id, EndpointTransformationPatch(code=runaway, enabled=True))
        n = 10
        started = time.time()
        for i in range(n):
            svix.message.create(app.id, MessageIn(event_type="load.test", payload={"i": i}))
        good_sink.wait_for(n, timeout=10)
        # Ten runaways at up to a second each, two at a time: the others are not held up.
        assert time.time() - started < 8, time.time() - started

        def failed_attempts():
            res = svix.message_attempt.list_by_endpoint(app.id, bad.id, MessageAttemptListByEndpointOptions(limit=50))
            return len(res.data) >= n and res.data
        attempts = eventually(failed_attempts, timeout=20)
        for a in attempts:
            assert a.status == 2 and a.response_status_code == 0
            assert "limit" in a.response or "memory" in a.response or "larger" in a.response, a.response
        assert bad_sink.received == []
        # The process is up and answering.
        with urllib.request.urlopen(hookgate.url + "/healthz", timeout=5) as res:
            assert res.status == 200
    finally:
        bad_sink.server.shutdown()
        good_sink.server.shutdown()


def test_a_large_body_goes_through_the_sandbox_whole(hookgate, tenant, svix, sink):
    allow(hookgate, tenant)
    app = svix.application.create(ApplicationIn(name="large"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    svix.endpoint.transformation.patch(app.id, ep.id, EndpointTransformationPatch(
        code="function handler(w) { w.payload.seen = w.payload.blob.length; return w; }", enabled=True))
    blob = "x" * 700_000
    svix.message.create(app.id, MessageIn(event_type="big.one", payload={"blob": blob}))
    got = json.loads(sink.wait_for(1, timeout=30)[0]["body"])
    assert got["seen"] == 700_000 and got["blob"] == blob
