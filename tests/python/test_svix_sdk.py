"""Hookgate driven by the official Svix Python SDK through every operation that
docs/guarantees.md (API compatibility) lists as served, with deliveries verified by the
official verifiers (svix.webhooks and standardwebhooks)."""
import time
from datetime import datetime, timedelta, timezone

import pytest
import standardwebhooks
from svix.api import (
    AppPortalAccessIn,
    ApplicationIn,
    ApplicationListOptions,
    ApplicationPatch,
    EndpointHeadersIn,
    EndpointHeadersPatchIn,
    EndpointIn,
    EndpointPatch,
    EndpointSecretRotateIn,
    EndpointUpsertIn,
    EventTypeIn,
    EventTypePatch,
    EventTypeUpsertIn,
    MessageAttemptListByMsgOptions,
    MessageGetOptions,
    MessageIn,
    MessageListOptions,
    RecoverIn,
)
from svix.exceptions import HttpError, HTTPValidationError
from svix.webhooks import Webhook, WebhookVerificationError

from conftest import event_types, eventually


def test_health_answers(svix):
    assert svix.health.get() is None


def test_the_health_ping_svixs_server_answers_is_answered_204_without_a_key(hookgate):
    from conftest import call

    status, _, body = call(hookgate, "GET", "/api/v1/health/ping")
    assert status == 204 and body is None, (status, body)


def test_applications_list_create_get_update_patch_delete(svix):
    created = svix.application.create(ApplicationIn(name="Shop", uid="shop-1", metadata={"tier": "gold"}))
    assert created.id.startswith("app_")
    assert created.metadata == {"tier": "gold"}
    assert svix.application.get("shop-1").id == created.id, "uid works as an alternative id"
    same = svix.application.get_or_create(ApplicationIn(name="Shop", uid="shop-1"))
    assert same.id == created.id
    upserted = svix.application.upsert(created.id, ApplicationIn(name="Shop 2", throttle_rate=10))
    assert (upserted.name, upserted.throttle_rate, upserted.uid) == ("Shop 2", 10, None)
    fresh = svix.application.upsert("made-by-put", ApplicationIn(name="New"))
    assert fresh.uid == "made-by-put"
    patched = svix.application.patch(created.id, ApplicationPatch(name="Shop 3"))
    assert (patched.name, patched.throttle_rate) == ("Shop 3", 10)
    page = svix.application.list(ApplicationListOptions(limit=1))
    assert len(page.data) == 1 and not page.done
    rest = svix.application.list(ApplicationListOptions(limit=10, iterator=page.iterator))
    assert {a.id for a in page.data + rest.data} == {created.id, fresh.id}
    svix.application.delete(created.id)
    with pytest.raises(HttpError) as e:
        svix.application.get(created.id)
    assert e.value.status_code == 404


def test_endpoints_every_operation(svix, sink):
    app = svix.application.create(ApplicationIn(name="A"))
    event_types(svix, "user.created")
    ep = svix.endpoint.create(
        app.id, EndpointIn(url=sink.url, uid="ep-1", event_types=["user.created"], description="first")
    )
    assert ep.id.startswith("ep_") and ep.event_types == ["user.created"]
    assert svix.endpoint.get(app.id, "ep-1").id == ep.id
    assert [e.id for e in svix.endpoint.list(app.id).data] == [ep.id]
    up = svix.endpoint.upsert(app.id, ep.id, EndpointUpsertIn(url=sink.url, description="second"))
    assert up.description == "second" and up.event_types is None
    patched = svix.endpoint.patch(app.id, ep.id, EndpointPatch(throttle_rate=100))
    assert patched.throttle_rate == 100 and patched.description == "second"

    secret = svix.endpoint.get_secret(app.id, ep.id).key
    assert secret.startswith("whsec_")
    rotated = svix.endpoint.rotate_secret(app.id, ep.id, EndpointSecretRotateIn())
    assert svix.endpoint.get_secret(app.id, ep.id).key == rotated.key != secret

    svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"X-A": "1", "X-B": "2"}))
    svix.endpoint.patch_headers(app.id, ep.id, EndpointHeadersPatchIn(headers={"X-C": "3"}, delete_headers=["X-B"]))
    assert svix.endpoint.get_headers(app.id, ep.id).headers == {"X-A": "1", "X-C": "3"}

    svix.message.create(app.id, MessageIn(event_type="user.created", payload={"id": 1}))
    sink.wait_for(1)
    stats = eventually(lambda: (s := svix.endpoint.get_stats(app.id, ep.id)).success == 1 and s)
    assert stats.fail == 0
    recovered = svix.endpoint.recover(app.id, ep.id, RecoverIn(since=datetime.now(timezone.utc) - timedelta(hours=1)))
    assert recovered.task == "endpoint.recover"

    svix.endpoint.delete(app.id, ep.id)
    with pytest.raises(HttpError) as e:
        svix.endpoint.get(app.id, ep.id)
    assert e.value.status_code == 404


def test_event_types_every_operation(svix):
    et = svix.event_type.create(EventTypeIn(name="invoice.paid", description="Paid"))
    assert et.name == "invoice.paid"
    assert svix.event_type.get("invoice.paid").description == "Paid"
    assert svix.event_type.upsert("invoice.paid", EventTypeUpsertIn(description="Paid!")).description == "Paid!"
    assert svix.event_type.patch("invoice.paid", EventTypePatch(deprecated=True)).deprecated is True
    assert "invoice.paid" in [e.name for e in svix.event_type.list().data]
    svix.event_type.delete("invoice.paid")
    assert "invoice.paid" not in [e.name for e in svix.event_type.list().data], "archived"


def test_messages_are_delivered_signed_and_verify_with_the_official_verifiers(svix, sink):
    app = svix.application.create(ApplicationIn(name="A"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    secret = svix.endpoint.get_secret(app.id, ep.id).key
    msg = svix.message.create(app.id, MessageIn(event_type="order.created", payload={"order": 7}, event_id="o-7"))
    assert msg.id.startswith("msg_")
    assert svix.message.get(app.id, msg.id, MessageGetOptions(with_content=True)).payload == {"order": 7}
    got = sink.wait_for(1)[0]
    assert got["headers"]["webhook-id"] == msg.id
    Webhook(secret).verify(got["body"], got["headers"])  # svix-* headers; raises if wrong
    assert standardwebhooks.Webhook(secret).verify(got["body"], got["headers"]) == {"order": 7}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(got["body"] + b" ", got["headers"])

    with pytest.raises(HttpError) as e:
        svix.message.create(app.id, MessageIn(event_type="order.created", payload={}, event_id="o-7"))
    assert e.value.status_code == 409
    assert svix.message.get(app.id, msg.id).event_id == "o-7"
    listed = svix.message.list(app.id, MessageListOptions(event_types=["order.created"]))
    assert [m.id for m in listed.data] == [msg.id]


def test_message_attempts_every_operation(svix, sink):
    sink.fail_first = 1
    app = svix.application.create(ApplicationIn(name="A"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    msg = svix.message.create(app.id, MessageIn(event_type="x", payload={"a": 1}))
    sink.wait_for(2)
    attempts = eventually(lambda: (a := svix.message_attempt.list_by_msg(app.id, msg.id)).data and len(a.data) == 2 and a)
    assert [a.status for a in attempts.data] == [0, 2]
    assert {a.msg_id for a in attempts.data} == {msg.id}
    one = svix.message_attempt.get(app.id, msg.id, attempts.data[0].id)
    assert one.response_status_code == 200
    failed_only = svix.message_attempt.list_by_msg(app.id, msg.id, MessageAttemptListByMsgOptions(status=2))
    assert len(failed_only.data) == 1
    assert len(svix.message_attempt.list_by_endpoint(app.id, ep.id).data) == 2
    dest = svix.message_attempt.list_attempted_destinations(app.id, msg.id)
    assert [d.id for d in dest.data] == [ep.id]
    sent = svix.message_attempt.list_attempted_messages(app.id, ep.id)
    assert [m.id for m in sent.data] == [msg.id]

    svix.message_attempt.resend(app.id, msg.id, ep.id)
    got = sink.wait_for(3)
    assert {r["headers"]["webhook-id"] for r in got} == {msg.id}, "one stable id on every try and resend"


def test_app_portal_access_is_scoped_to_one_application(svix, hookgate):
    from svix.api import Svix, SvixOptions

    mine = svix.application.create(ApplicationIn(name="Mine"))
    other = svix.application.create(ApplicationIn(name="Other"))
    access = svix.authentication.app_portal_access(mine.id, AppPortalAccessIn())
    portal = Svix(access.token, SvixOptions(server_url=hookgate.url, retry_schedule=[]))
    assert portal.application.get(mine.id).id == mine.id
    assert portal.endpoint.list(mine.id).data == []
    with pytest.raises(HttpError) as e:
        portal.endpoint.list(other.id)
    # As Svix answers it: another application is not this token's to know of.
    assert e.value.status_code == 404


def test_another_tenants_ids_answer_404(svix, hookgate):
    from svix.api import Svix, SvixOptions

    app = svix.application.create(ApplicationIn(name="Private"))
    other_tenant = hookgate.admin("POST", "/admin/v1/tenant", {"name": "intruder"})
    intruder = Svix(other_tenant["apiKey"], SvixOptions(server_url=hookgate.url, retry_schedule=[]))
    with pytest.raises(HttpError) as e:
        intruder.application.get(app.id)
    assert e.value.status_code == 404


def test_expunging_content_and_payload_retention_through_the_official_sdk(svix, sink):
    app = svix.application.create(ApplicationIn(name="A"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    msg = svix.message.create(app.id, MessageIn(event_type="x", payload={"ssn": "123"}, payload_retention_period=5))
    sink.wait_for(1)
    attempt = eventually(lambda: next(iter(svix.message_attempt.list_by_msg(app.id, msg.id).data), None))
    svix.message.expunge_content(app.id, msg.id)
    assert svix.message.get(app.id, msg.id, MessageGetOptions(with_content=True)).payload == {"expired": True}
    with pytest.raises(HttpError) as e:
        svix.message_attempt.resend(app.id, msg.id, ep.id)
    assert e.value.status_code == 409, "expunged content cannot be sent again"
    svix.message_attempt.expunge_content(app.id, msg.id, attempt.id)
    assert svix.message_attempt.get(app.id, msg.id, attempt.id).response == "EXPUNGED"
    with pytest.raises(HTTPValidationError) as e:
        svix.message.create(app.id, MessageIn(event_type="x", payload={}, payload_retention_period=4))
    assert "payloadRetentionPeriod" in e.value.detail[0].msg, "5 to 90 days, as Svix's"


def test_send_example_goes_to_that_endpoint_only_and_verifies(svix, sink):
    from svix.api import EventExampleIn, EventTypeIn

    app = svix.application.create(ApplicationIn(name="examples"))
    svix.event_type.create(EventTypeIn(name="invoice.sent", description="An invoice went out",
                                       schemas={"1": {"type": "object", "examples": [{"invoice": 1}, {"invoice": 2}]}}))
    event_types(svix, "other.type")
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, event_types=["other.type"]))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url + "?second"))
    secret = svix.endpoint.get_secret(app.id, ep.id).key
    msg = svix.endpoint.send_example(app.id, ep.id, EventExampleIn(event_type="invoice.sent", example_index=1))
    assert msg.event_type == "invoice.sent" and msg.payload == {"invoice": 2}
    ping = svix.endpoint.send_example(app.id, ep.id, EventExampleIn(event_type="svix.ping"))
    assert ping.payload == {"success": True}
    got = sink.wait_for(2)
    time.sleep(0.5)
    assert len(sink.received) == 2, "the example goes to its endpoint only, past its event-type filter"
    assert all(r["path"] == "/hook" for r in got)
    for r in got:
        Webhook(secret).verify(r["body"], {k: v for k, v in r["headers"].items() if k.startswith("webhook-")})
    assert {r["headers"]["webhook-id"] for r in got} == {msg.id, ping.id}
    with pytest.raises(HttpError) as missing:
        svix.endpoint.send_example(app.id, ep.id, EventExampleIn(event_type="no.such.type"))
    assert missing.value.status_code == 404
