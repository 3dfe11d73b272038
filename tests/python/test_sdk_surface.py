"""The rest of the official Svix Python SDK's surface that Hookgate serves, driven
through the SDK itself: message precheck and content expunges, endpoint attempt
stats, usage statistics (as background tasks), app-portal token expiry and
logout, application integrations (whose keys open their application), event
types imported from an OpenAPI document, and the ingest endpoint's
transformation and consumer portal."""
import json
import time
from datetime import datetime, timedelta, timezone

import pytest
from svix.api import (
    AppPortalAccessIn,
    ApplicationIn,
    ApplicationTokenExpireIn,
    AppUsageStatsIn,
    BulkExpungeContentsIn,
    EndpointIn,
    EventTypeImportOpenApiIn,
    EventTypeIn,
    IngestEndpointIn,
    IngestEndpointTransformationPatch,
    IngestSourceConsumerPortalAccessIn,
    IngestSourceIn,
    IntegrationIn,
    IntegrationUpdate,
    MessageIn,
    MessagePrecheckIn,
    Svix,
    SvixOptions,
)
from svix.api.endpoint import EndpointGetAttemptStatsOptions
from svix.api.message import MessageGetOptions
from svix.exceptions import HttpError, HTTPValidationError

from conftest import call, event_types, eventually, raw_call


def as_client(hookgate, token):
    return Svix(token, SvixOptions(server_url=hookgate.url, retry_schedule=[]))


def finished(svix, task_id, timeout=30.0):
    def done():
        t = svix.background_task.get(task_id)
        return t if t.status != "running" else None
    return eventually(done, timeout=timeout)


def test_precheck_says_whether_a_message_would_reach_an_endpoint_by_the_fan_out_rule(svix, sink):
    app = svix.application.create(ApplicationIn(name="pre"))
    check = lambda t, ch=None: svix.message.precheck(app.id, MessagePrecheckIn(event_type=t, channels=ch)).active
    assert not check("order.paid"), "no endpoint yet"
    event_types(svix, "order.paid")
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, event_types=["order.paid"], channels=["eu"]))
    assert check("order.paid", ["eu"])
    assert not check("order.paid"), "the endpoint takes channel eu only"
    assert not check("order.refunded", ["eu"]), "nor another type"
    from svix.api import EndpointPatch
    svix.endpoint.patch(app.id, ep.id, EndpointPatch(disabled=True))
    assert not check("order.paid", ["eu"]), "a disabled endpoint gets nothing"
    with pytest.raises(HTTPValidationError):
        svix.message.precheck(app.id, MessagePrecheckIn(event_type="bad name"))


def test_bulk_expunge_erases_named_payloads_and_expunge_all_is_a_task_that_counts_them(svix, hookgate, tenant, sink):
    content = lambda m: svix.message.get(app.id, m.id, MessageGetOptions(with_content=True)).payload
    app = svix.application.create(ApplicationIn(name="gdpr"))
    made = [svix.message.create(app.id, MessageIn(event_type="a.b", payload={"n": i, "pii": "x"},
                                                  event_id=f"evt-{i}")) for i in range(5)]
    out = svix.message.bulk_expunge_content(app.id, BulkExpungeContentsIn(ids=[made[0].id, "evt-1", "msg_nope"]))
    assert {k: str(v) for k, v in out.results.items()} == {
        made[0].id: "expunged", "evt-1": "expunged", "msg_nope": "not-found"}
    assert content(made[0]) == {"expired": True}
    assert content(made[1]) == {"expired": True}
    assert content(made[2])["pii"] == "x", "an unnamed one is kept"

    from svix.api.message import MessageExpungeAllContentsOptions
    once = MessageExpungeAllContentsOptions(idempotency_key="purge-1")
    task = svix.message.expunge_all_contents(app.id, once)
    assert str(task.task) == "application.purge_content" and task.id.startswith("qtask_")
    assert svix.message.expunge_all_contents(app.id, once).id == task.id, "a retry starts no second purge"
    done = finished(svix, task.id)
    assert str(done.status) == "finished" and done.data["messagesPurged"] == 3, done.data
    for m in made:
        assert content(m) == {"expired": True}
    later = svix.message.create(app.id, MessageIn(event_type="a.b", payload={"after": True}))
    assert content(later) == {"after": True}, "a message made after keeps its payload"
    # A portal link may not erase.
    portal = svix.authentication.app_portal_access(app.id, AppPortalAccessIn())
    with pytest.raises(HttpError) as e:
        as_client(hookgate, portal.token).message.expunge_all_contents(app.id)
    assert e.value.status_code == 403


def test_attempt_stats_count_an_endpoints_successes_and_failures_in_the_window(svix, sink):
    app = svix.application.create(ApplicationIn(name="stats"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    for i in range(3):
        svix.message.create(app.id, MessageIn(event_type="a.b", payload={"i": i}))
    sink.wait_for(3)
    sink.status = 500
    svix.message.create(app.id, MessageIn(event_type="a.b", payload={"fail": True}))
    stats = eventually(lambda: (s := svix.endpoint.get_attempt_stats(app.id, ep.id)).fail >= 1 and s)
    assert stats.success == 3 and stats.canceled == 0
    old = EndpointGetAttemptStatsOptions(since=datetime.now(timezone.utc) - timedelta(days=3),
                                         until=datetime.now(timezone.utc) - timedelta(days=2))
    empty = svix.endpoint.get_attempt_stats(app.id, ep.id, old)
    assert (empty.success, empty.fail) == (0, 0)


def test_usage_statistics_are_tasks_whose_data_counts_deliveries_and_subscriptions(svix, sink):
    a = svix.application.create(ApplicationIn(name="one", uid="stats-one"))
    b = svix.application.create(ApplicationIn(name="two"))
    svix.endpoint.create(a.id, EndpointIn(url=sink.url))
    event_types(svix, "user.signup", "user.deleted")
    svix.endpoint.create(a.id, EndpointIn(url=sink.url, event_types=["user.signup", "user.deleted"]))
    svix.endpoint.create(b.id, EndpointIn(url=sink.url, event_types=["user.signup"]))
    svix.message.create(a.id, MessageIn(event_type="user.signup", payload={}))
    svix.message.create(b.id, MessageIn(event_type="user.signup", payload={}))
    svix.message.create(b.id, MessageIn(event_type="other", payload={}))
    now = datetime.now(timezone.utc)
    out = svix.statistics.aggregate_app_stats(AppUsageStatsIn(
        since=now - timedelta(hours=1), until=now + timedelta(minutes=1), app_ids=["stats-one", b.id, "app_missing"]))
    assert str(out.task) == "application.stats" and out.unresolved_app_ids == ["app_missing"]
    data = finished(svix, out.id).data
    got = {s["appId"]: (s["appUid"], s["messageDestinations"]) for s in data["appStats"]}
    assert got == {a.id: ("stats-one", 2), b.id: (None, 1)}, data
    with pytest.raises(HTTPValidationError):
        svix.statistics.aggregate_app_stats(AppUsageStatsIn(since=now - timedelta(hours=1), until=now,
                                                            app_ids=["nothing-here"]))

    agg = svix.statistics.aggregate_event_types()
    assert str(agg.task) == "event-type.aggregate"
    rows = {r["appId"]: r for r in finished(svix, agg.id).data["event_types"]}
    assert rows[a.id]["explicitlySubscribedEventTypes"] == ["user.deleted", "user.signup"]
    assert rows[a.id]["hasCatchAllEndpoint"] is True
    assert rows[b.id] == {"appId": b.id, "explicitlySubscribedEventTypes": ["user.signup"], "hasCatchAllEndpoint": False}


def test_a_tenant_past_its_hourly_statistics_tasks_is_told_when_to_come_back(hookgate, tenant):
    import subprocess

    path = "/api/v1/stats/usage/event-types"
    started = time.time()
    for _ in range(30):
        status, _, body = raw_call(hookgate, "PUT", path, tenant["apiKey"])
        assert status == 202, body
    status, headers, body = raw_call(hookgate, "PUT", path, tenant["apiKey"])
    assert status == 429 and json.loads(body)["code"] == "rate_limited", body
    # The oldest of the hour's tasks leaves it in about an hour: that is when to retry.
    wait = int(headers["retry-after"])
    assert 3600 - (time.time() - started) - 5 <= wait <= 3600, wait
    # Made 50 minutes older, it leaves in about 10: the answer follows the oldest task.
    subprocess.run(["psql", hookgate.env["DATABASE_URL"], "-qc",
                    "UPDATE background_tasks SET created_at = created_at - interval '50 minutes' "
                    f"WHERE id = (SELECT id FROM background_tasks WHERE tenant_id = '{tenant['id']}' "
                    "ORDER BY created_at LIMIT 1)"], check=True)
    status, headers, body = raw_call(hookgate, "PUT", path, tenant["apiKey"])
    assert status == 429, body
    assert 600 - (time.time() - started) - 5 <= int(headers["retry-after"]) <= 600, headers["retry-after"]


def test_expire_all_and_logout_refuse_portal_tokens_before_they_expire(svix, hookgate, tenant):
    app = svix.application.create(ApplicationIn(name="portal"))
    other = svix.application.create(ApplicationIn(name="other"))
    reads = lambda tok, a=app.id: raw_call(hookgate, "GET", f"/api/v1/app/{a}/endpoint", tok)[0]
    kept = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(session_id="user-2")).token
    gone = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(session_id="user-1")).token
    plain = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    elsewhere = svix.authentication.app_portal_access(other.id, AppPortalAccessIn()).token
    assert {reads(kept), reads(gone), reads(plain), reads(elsewhere, other.id)} == {200}

    svix.authentication.expire_all(app.id, ApplicationTokenExpireIn(session_ids=["user-1"]))
    assert reads(gone) == 401 and reads(kept) == 200 and reads(plain) == 200, "only that session"

    # Expiring later: the tokens work until then.
    svix.authentication.expire_all(app.id, ApplicationTokenExpireIn(expiry=2))
    assert reads(kept) == 200
    eventually(lambda: reads(kept) == 401 and reads(plain) == 401, timeout=6)
    assert reads(elsewhere, other.id) == 200, "another application's tokens live on"
    fresh = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    assert reads(fresh) == 200, "a token made after expire-all lives"

    # Logout: a token ends itself and no other.
    second = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    as_client(hookgate, fresh).authentication.logout()
    assert reads(fresh) == 401 and reads(second) == 200
    with pytest.raises(HttpError) as e:
        svix.authentication.logout()
    assert e.value.status_code == 403, "an API key does not log out"
    with pytest.raises(HTTPValidationError):
        svix.authentication.expire_all(app.id, ApplicationTokenExpireIn(expiry=400_000))
    # A portal token may not expire the application's tokens.
    status, _, _ = raw_call(hookgate, "POST", f"/api/v1/auth/app/{app.id}/expire-all", second, {})
    assert status == 403
    # A read-only link may still end itself; one spelling of a token only.
    viewer = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(read_only=True)).token
    as_client(hookgate, viewer).authentication.logout()
    assert reads(viewer) == 401
    head, claims, mac = second.split("_")
    assert reads(f"{head}_{claims.upper()}_{mac}") == 401, "an upper-cased token is not the token"


def test_an_integration_key_opens_its_application_only_until_rotated_or_deleted(svix, hookgate, tenant, sink):
    app = svix.application.create(ApplicationIn(name="zap"))
    other = svix.application.create(ApplicationIn(name="other"))
    made = svix.integration.create(app.id, IntegrationIn(name="Zapier", feature_flags=["beta"]))
    assert made.id.startswith("integ_") and made.feature_flags == ["beta"]
    assert svix.integration.get(app.id, made.id).name == "Zapier"
    assert [i.id for i in svix.integration.list(app.id).data] == [made.id]
    updated = svix.integration.update(app.id, made.id, IntegrationUpdate(name="Zapier 2"))
    assert updated.name == "Zapier 2" and updated.feature_flags == []
    # The key (deprecated in the SDK, served as before) opens the application's routes.
    status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/integration/{made.id}/key", tenant["apiKey"])
    assert status == 200 and body["key"].startswith("integsk_")
    key = body["key"]
    tool = as_client(hookgate, key)
    ep = tool.endpoint.create(app.id, EndpointIn(url=sink.url))
    assert [e.id for e in svix.endpoint.list(app.id).data] == [ep.id]
    assert raw_call(hookgate, "GET", f"/api/v1/app/{other.id}/endpoint", key)[0] == 404, "not another application"
    assert raw_call(hookgate, "GET", "/api/v1/app", key)[0] == 403, "nor the tenant's list"
    assert raw_call(hookgate, "GET", f"/api/v1/app/{app.id}/integration", key)[0] == 403, "nor its own integrations"

    rotated = svix.integration.rotate_key(app.id, made.id)
    assert rotated.key != key and rotated.key.startswith("integsk_")
    assert raw_call(hookgate, "GET", f"/api/v1/app/{app.id}/endpoint", key)[0] == 401, "the old key is refused"
    assert raw_call(hookgate, "GET", f"/api/v1/app/{app.id}/endpoint", rotated.key)[0] == 200
    svix.integration.delete(app.id, made.id)
    assert raw_call(hookgate, "GET", f"/api/v1/app/{app.id}/endpoint", rotated.key)[0] == 401
    with pytest.raises(HttpError) as e:
        svix.integration.get(app.id, made.id)
    assert e.value.status_code == 404
    # Another tenant sees none of it.
    stranger = hookgate.admin("POST", "/admin/v1/tenant", {"name": "stranger"})
    assert raw_call(hookgate, "GET", f"/api/v1/app/{app.id}/integration", stranger["apiKey"])[0] == 404
    with pytest.raises(HTTPValidationError):
        svix.integration.create(app.id, IntegrationIn(name="x", feature_flags=["no spaces"]))

    # A key lives while the API key that made it does: revoking a leaked API key
    # revokes the integrations it made.
    second = hookgate.admin("POST", f"/admin/v1/tenant/{tenant['id']}/api-key")
    by_second = as_client(hookgate, second["apiKey"]).integration.create(app.id, IntegrationIn(name="Temp"))
    status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/integration/{by_second.id}/key", tenant["apiKey"])
    assert raw_call(hookgate, "GET", f"/api/v1/app/{app.id}/endpoint", body["key"])[0] == 200
    hookgate.admin("DELETE", f"/admin/v1/tenant/{tenant['id']}/api-key/{second['id']}")
    assert raw_call(hookgate, "GET", f"/api/v1/app/{app.id}/endpoint", body["key"])[0] == 401


OPENAPI = """
openapi: 3.1.0
info: {title: Shop, version: "1"}
webhooks:
  order.paid:
    post:
      description: An order was paid
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Order'}
            example: {id: o_1, total: 12}
  order.legacy:
    post:
      summary: Old
      deprecated: true
      requestBody:
        content:
          application/json:
            schema: {type: object}
components:
  schemas:
    Order:
      type: object
      properties:
        id: {type: string}
        total: {type: integer}
"""


def test_event_types_are_imported_from_an_openapi_documents_webhooks(svix):
    svix.event_type.create(EventTypeIn(name="order.stale", description="gone soon"))
    svix.event_type.create(EventTypeIn(name="order.paid", description="old", archived=True))
    dry = svix.event_type.import_openapi(EventTypeImportOpenApiIn(spec_raw=OPENAPI, dry_run=True))
    assert dry.data.modified == [] and sorted(t.name for t in dry.data.to_modify) == ["order.legacy", "order.paid"]
    assert svix.event_type.get("order.paid").description == "old", "a dry run changes nothing"

    out = svix.event_type.import_openapi(EventTypeImportOpenApiIn(spec_raw=OPENAPI, replace_all=True))
    assert sorted(out.data.modified) == ["order.legacy", "order.paid"]
    paid = svix.event_type.get("order.paid")
    assert paid.description == "An order was paid" and not paid.archived, "imported, and brought back"
    assert paid.schemas["1"]["properties"]["total"] == {"type": "integer"}, "its $ref inlined"
    assert paid.schemas["1"]["examples"] == [{"id": "o_1", "total": 12}]
    assert svix.event_type.get("order.legacy").deprecated
    assert svix.event_type.get("order.stale").archived, "replaceAll archived what the document does not name"

    as_json = svix.event_type.import_openapi(EventTypeImportOpenApiIn(spec={"webhooks": {"ping": {"post": {
        "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}}}}}}))
    assert as_json.data.modified == ["ping"]
    with pytest.raises(HttpError) as e:
        svix.event_type.import_openapi(EventTypeImportOpenApiIn())
    assert e.value.status_code == 400
    with pytest.raises(HTTPValidationError):
        svix.event_type.import_openapi(EventTypeImportOpenApiIn(spec={"openapi": "3.1.0"}))


def test_an_ingest_endpoints_transformation_and_the_sources_consumer_portal(svix, hookgate, tenant, sink):
    hookgate.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"transformations": True})
    src = svix.ingest.source.create(IngestSourceIn(name="Generic", type="generic-webhook"))
    ep = svix.ingest.endpoint.create(src.id, IngestEndpointIn(url=sink.url))
    assert svix.ingest.endpoint.transformation.get(src.id, ep.id).enabled is False
    code = "function handler(webhook) { webhook.payload = {wrapped: webhook.payload}; return webhook; }"
    svix.ingest.endpoint.transformation.patch(src.id, ep.id, IngestEndpointTransformationPatch(code=code, enabled=True))
    got = svix.ingest.endpoint.transformation.get(src.id, ep.id)
    assert got.enabled and got.code == code
    status, _, _ = raw_call(hookgate, "POST", src.ingest_url.replace(hookgate.url, ""), None,
                            {"hello": "world"})
    assert status in (200, 202, 204), status
    received = sink.wait_for(1)
    assert json.loads(received[0]["body"]) == {"wrapped": {"hello": "world"}}

    portal = svix.ingest.authentication.consumer_portal_access(src.id, IngestSourceConsumerPortalAccessIn(
        read_only=True, expiry=3600))
    assert portal.token and portal.url.endswith(portal.token)
    status, _, shown = call(hookgate, "GET", f"/api/v1/source/{src.id}", tenant["apiKey"])
    assert status == 200, shown
    status, _, eps = call(hookgate, "GET", f"/api/v1/app/{shown['appId']}/endpoint", portal.token)
    assert status == 200 and [e["id"] for e in eps["data"]] == [ep.id]
    status, _, _ = raw_call(hookgate, "POST", f"/api/v1/app/{shown['appId']}/endpoint", portal.token, {"url": sink.url})
    assert status == 403, "read-only"
    with pytest.raises(HTTPValidationError):
        svix.ingest.authentication.consumer_portal_access(src.id, IngestSourceConsumerPortalAccessIn(expiry=60))


def test_an_environment_moves_to_another_tenant_with_its_secrets_sealed_in_transit(svix, hookgate, tenant, sink):
    import standardwebhooks
    from svix.api import EndpointHeadersIn, EndpointHeadersPatchIn, EnvironmentIn

    svix.event_type.create(EventTypeIn(name="invoice.paid", description="Paid", schemas={"1": {"type": "object"}}))
    app = svix.application.create(ApplicationIn(name="Acme", uid="acme", metadata={"tier": "gold"}))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, uid="main", event_types=["invoice.paid"],
                                                 channels=["eu"], throttle_rate=7, metadata={"k": "v"}))
    svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"X-Api-Key": "hunter2"}))
    secret = svix.endpoint.get_secret(app.id, ep.id).key

    # Through the SDK: the document parses as Svix's EnvironmentOut.
    assert [t.name for t in svix.environment.export().event_types] == ["invoice.paid"]
    status, _, doc = call(hookgate, "POST", "/api/v1/environment/export", tenant["apiKey"])
    assert status == 200
    text = json.dumps(doc)
    assert "hunter2" not in text and secret.split("_", 1)[1] not in text, "nothing in clear"
    [exported] = doc["applications"]
    assert exported["id"] == app.id and exported["endpoints"][0]["secret"]["sealed"]

    target = hookgate.admin("POST", "/admin/v1/tenant", {"name": "moved"})
    # Through the API, a tenant opens only what it exported itself: another
    # tenant holding this document cannot take its secrets. Nothing is half-written.
    status, _, err = call(hookgate, "POST", "/api/v1/environment/import", target["apiKey"], doc)
    assert status == 422 and "another tenant" in json.dumps(err), err
    assert call(hookgate, "GET", "/api/v1/app", target["apiKey"])[2]["data"] == []
    assert call(hookgate, "GET", "/api/v1/event-type", target["apiKey"])[2]["data"] == []

    # The operator moves it: `hookgate import environment`. A sealed value opens
    # only for the entry and URL it was sealed for.
    import subprocess
    import tempfile

    from conftest import BIN

    def operator_import(document):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(document, f)
        done = subprocess.run([str(BIN), "import", "environment", "--file", f.name, "--tenant", target["id"]],
                              env=hookgate.env, capture_output=True, text=True, timeout=60)
        return done.returncode, (json.loads(done.stdout) if done.returncode == 0 else done.stderr)

    moved_url = json.loads(text)
    moved_url["applications"][0]["endpoints"][0]["url"] = sink.url + "/elsewhere"
    rc, err = operator_import(moved_url)
    assert rc != 0 and "does not open" in err, err
    assert call(hookgate, "GET", "/api/v1/app", target["apiKey"])[2]["data"] == []

    rc, out = operator_import(doc)
    assert rc == 0, out
    assert out["applications"] == {"created": 1, "updated": 0} and out["endpoints"] == {"created": 1, "updated": 0}
    moved = as_client(hookgate, target["apiKey"])
    got = moved.endpoint.get("acme", "main")
    assert (got.id, got.url, got.event_types, got.channels, got.throttle_rate, got.metadata) == (
        ep.id, sink.url, ["invoice.paid"], ["eu"], 7, {"k": "v"})
    assert moved.endpoint.get_headers("acme", "main").sensitive == ["X-Api-Key"], "a credential, shown by name"
    assert moved.event_type.get("invoice.paid").schemas == {"1": {"type": "object"}}

    # The customer's receiver verifies the target's message with the secret it had.
    msg = moved.message.create("acme", MessageIn(event_type="invoice.paid", payload={"n": 1}, channels=["eu"]))
    r = sink.wait_for(1)[0]
    assert r["headers"]["webhook-id"] == msg.id and r["headers"]["x-api-key"] == "hunter2"
    wh = standardwebhooks.Webhook(secret)
    assert wh.verify(r["body"], {k: r["headers"][k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")})

    # Again: updated, not duplicated; a header set here since is kept.
    moved.endpoint.patch_headers("acme", "main", EndpointHeadersPatchIn(headers={"X-Extra": "kept"}))
    rc, again = operator_import(doc)
    assert again["applications"] == {"created": 0, "updated": 1} and again["endpoints"] == {"created": 0, "updated": 1}
    assert len(moved.application.list().data) == 1 and len(moved.endpoint.list("acme").data) == 1
    assert moved.endpoint.get_headers("acme", "main").headers == {"X-Extra": "kept"}
    # The exporting tenant re-imports its own document through the API.
    status, _, own = call(hookgate, "POST", "/api/v1/environment/import", tenant["apiKey"], doc)
    assert status == 200 and own["endpoints"] == {"created": 0, "updated": 1}, own
    # The SDK's own import takes Svix's shape.
    moved.environment.import_(EnvironmentIn(event_types=[EventTypeIn(name="invoice.void", description="Void")],
                                            settings={"customColor": "#ff0000"}))
    assert moved.event_type.get("invoice.void").description == "Void"
    # A URL a created endpoint could not have is refused by name.
    bad = json.loads(text)
    bad["applications"][0]["endpoints"][0].update(url="ftp://127.0.0.1/hook", secret=None, headers=None)
    status, _, err = call(hookgate, "POST", "/api/v1/environment/import", target["apiKey"], bad)
    assert status == 422 and "`url`" in json.dumps(err), err


def test_without_a_transit_key_an_export_leaves_secrets_out_and_an_import_refuses_sealed_ones(hookgate, tenant, sink):
    from conftest import Hookgate, fresh_database, free_port

    svix_key = tenant["apiKey"]
    app = call(hookgate, "POST", "/api/v1/app", svix_key, {"name": "a"})[2]
    call(hookgate, "POST", f"/api/v1/app/{app['id']}/endpoint", svix_key, {"url": sink.url})
    sealed = call(hookgate, "POST", "/api/v1/environment/export", svix_key)[2]

    env = dict(hookgate.env, DATABASE_URL=fresh_database(), HOOKGATE_LISTEN=f"127.0.0.1:{free_port()}",
               HOOKGATE_METRICS_LISTEN=f"127.0.0.1:{free_port()}")
    env.pop("HOOKGATE_TRANSIT_KEY")
    keyless = Hookgate(env)
    try:
        other = keyless.admin("POST", "/admin/v1/tenant", {"name": "keyless"})["apiKey"]
        status, _, err = call(keyless, "POST", "/api/v1/environment/import", other, sealed)
        assert status == 422 and "HOOKGATE_TRANSIT_KEY" in json.dumps(err), err
        app2 = call(keyless, "POST", "/api/v1/app", other, {"name": "b"})[2]
        call(keyless, "POST", f"/api/v1/app/{app2['id']}/endpoint", other, {"url": sink.url})
        plain = call(keyless, "POST", "/api/v1/environment/export", other)[2]
        assert plain["applications"][0]["endpoints"][0]["secret"] is None
        assert any("HOOKGATE_TRANSIT_KEY" in n for n in plain["notCarried"])
    finally:
        keyless.stop()


def test_hookgate_import_svix_copies_an_environment_so_receivers_keep_verifying(svix, hookgate, tenant, sink):
    """`hookgate import svix` against a server serving Svix's API (a Hookgate
    tenant here): the target's messages verify with the source's secrets, and a
    second run updates instead of duplicating."""
    import subprocess

    import standardwebhooks
    from svix.api import EndpointHeadersIn

    from conftest import BIN

    svix.event_type.create(EventTypeIn(name="order.paid", description="Paid", schemas={"1": {"type": "object"}}))
    app = svix.application.create(ApplicationIn(name="Shop", uid="shop", metadata={"plan": "pro"}))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, event_types=["order.paid"], throttle_rate=9))
    svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"X-Team": "orders", "Authorization": "Bearer s3"}))
    secret = svix.endpoint.get_secret(app.id, ep.id).key
    target = hookgate.admin("POST", "/admin/v1/tenant", {"name": "from-svix"})

    def run():
        done = subprocess.run([str(BIN), "import", "svix", "--url", hookgate.url, "--token", tenant["apiKey"],
                               "--tenant", target["id"]], env=hookgate.env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first = run()
    assert first["applications"] == {"created": 1, "updated": 0} and first["endpoints"] == {"created": 1, "updated": 0}
    assert any("Authorization" in n for n in first["notCarried"]), "the hidden header's value is reported"
    moved = as_client(hookgate, target["apiKey"])
    got = moved.endpoint.get("shop", ep.id)
    assert (got.url, got.event_types, got.throttle_rate) == (sink.url, ["order.paid"], 9)
    assert moved.endpoint.get_headers("shop", ep.id).headers == {"X-Team": "orders"}
    assert moved.event_type.get("order.paid").schemas == {"1": {"type": "object"}}

    msg = moved.message.create("shop", MessageIn(event_type="order.paid", payload={"total": 5}))
    r = sink.wait_for(1)[0]
    assert r["headers"]["webhook-id"] == msg.id and r["headers"]["x-team"] == "orders"
    wh = standardwebhooks.Webhook(secret)
    assert wh.verify(r["body"], {k: r["headers"][k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")})

    again = run()
    assert again["applications"] == {"created": 0, "updated": 1} and again["endpoints"] == {"created": 0, "updated": 1}
    assert len(moved.application.list().data) == 1 and len(moved.endpoint.list("shop").data) == 1

    # A token the source refuses: the command fails, naming why, and writes nothing.
    bad = subprocess.run([str(BIN), "import", "svix", "--url", hookgate.url, "--token", "hgk_nope",
                          "--tenant", target["id"]], env=hookgate.env, capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "401" in bad.stderr, bad.stderr
