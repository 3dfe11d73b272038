"""An explicit `null` for an optional field reads as the field left out, as in Svix.

The official SDK sends `"metadata": null` (and `channels`, `secret`, …) whenever a
caller passes `None` for an optional field; Svix reads `null` as absent. Each body
below is built by the SDK's own model, every optional field set to `None`, and sent
as the SDK would send it."""
import json
from datetime import datetime, timedelta, timezone

import pytest
from svix.api import (
    AppPortalAccessIn,
    ApplicationIn,
    AppUsageStatsIn,
    BulkReplayIn,
    EndpointHeadersIn,
    EndpointIn,
    EndpointSecretRotateIn,
    EndpointUpsertIn,
    EventExampleIn,
    EventTypeIn,
    EventTypeUpsertIn,
    IntegrationIn,
    MessageIn,
    MessagePrecheckIn,
    OperationalWebhookEndpointIn,
    RecoverIn,
    ReplayIn,
)

from conftest import call


def all_none(model, **given):
    """`model` with `given` and every other field explicitly `None`, as JSON the SDK sends."""
    fields = {name: None for name in model.model_fields if name not in given}
    return json.loads(model(**given, **fields).model_dump_json(exclude_unset=True, by_alias=True))


def test_every_optional_field_sent_as_null_reads_as_left_out(hookgate, tenant, sink):
    key = tenant["apiKey"]
    since = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    until = datetime.now(timezone.utc).isoformat()

    def ok(method, path, body, expect=(200, 201, 202, 204)):
        status, _, answer = call(hookgate, method, path, key, body)
        assert status in expect, f"{method} {path} {json.dumps(body)}: {status} {answer}"
        return answer

    app = ok("POST", "/api/v1/app", all_none(ApplicationIn, name="nulls"))
    assert app["metadata"] == {}
    ok("PUT", f"/api/v1/app/{app['id']}", all_none(ApplicationIn, name="nulls"))
    ok("POST", "/api/v1/event-type", all_none(EventTypeIn, name="order.paid", description="Paid"))
    ok("PUT", "/api/v1/event-type/order.paid", all_none(EventTypeUpsertIn, description="Paid"))
    ep = ok("POST", f"/api/v1/app/{app['id']}/endpoint", all_none(EndpointIn, url=sink.url))
    assert ep["metadata"] == {} and ep["channels"] is None and not ep["disabled"]
    ok("PUT", f"/api/v1/app/{app['id']}/endpoint/{ep['id']}", all_none(EndpointUpsertIn, url=sink.url))
    ok("PUT", f"/api/v1/app/{app['id']}/endpoint/{ep['id']}/headers", all_none(EndpointHeadersIn, headers={"x-a": "1"}))
    ok("POST", f"/api/v1/app/{app['id']}/endpoint/{ep['id']}/secret/rotate", all_none(EndpointSecretRotateIn))
    msg = ok("POST", f"/api/v1/app/{app['id']}/msg", all_none(MessageIn, event_type="order.paid", payload={"n": 1}))
    assert msg["channels"] is None
    ok("POST", f"/api/v1/app/{app['id']}/msg/precheck/active", all_none(MessagePrecheckIn, event_type="order.paid"))
    ok("POST", f"/api/v1/app/{app['id']}/endpoint/{ep['id']}/send-example", all_none(EventExampleIn, event_type="order.paid"))
    ok("POST", f"/api/v1/app/{app['id']}/endpoint/{ep['id']}/recover", all_none(RecoverIn, since=since))
    ok("POST", f"/api/v1/app/{app['id']}/endpoint/{ep['id']}/replay-missing", all_none(ReplayIn, since=since))
    ok("POST", f"/api/v1/app/{app['id']}/endpoint/{ep['id']}/bulk-replay", all_none(BulkReplayIn, since=since))
    ok("POST", f"/api/v1/auth/app-portal-access/{app['id']}", all_none(AppPortalAccessIn))
    ok("POST", f"/api/v1/app/{app['id']}/integration", all_none(IntegrationIn, name="zap"))
    ok("POST", "/api/v1/operational-webhook/endpoint", all_none(OperationalWebhookEndpointIn, url=sink.url))
    ok("POST", "/api/v1/stats/usage/app", all_none(AppUsageStatsIn, since=since, until=until))
