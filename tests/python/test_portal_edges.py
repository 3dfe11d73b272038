"""The portal's routes at their edges: hostile dates answer 4xx, custom header
values stay out of the attempt log, and a test event needs a live endpoint."""

import uuid

from svix.api import AppPortalAccessIn, ApplicationIn, EndpointHeadersIn, EndpointIn, EndpointPatch, MessageGetOptions, MessageIn

from conftest import call, eventually


def test_dates_the_store_cannot_keep_answer_422_on_every_route_that_takes_one(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="dates"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    key = tenant["apiKey"]
    base = f"/api/v1/app/{app.id}"
    for path in [
        f"{base}/endpoint/{ep.id}/stats/hourly?until=-262143-01-01T00:00:00Z",
        f"{base}/endpoint/{ep.id}/stats/hourly?since=-5000-01-01T00:00:00Z&until=-5000-01-01T01:00:00Z",
        f"{base}/endpoint/{ep.id}/stats?since=-5000-01-01T00:00:00Z",
        f"{base}/msg?before=-5000-01-01T00:00:00Z",
        f"{base}/attempt/endpoint/{ep.id}?after=-5000-01-01T00:00:00Z",
    ]:
        status, _, body = call(hookgate, "GET", path, key)
        assert status == 422, (path, status, body)
        assert "1970" in str(body["detail"]), body
    status, _, body = call(hookgate, "POST", f"{base}/endpoint/{ep.id}/recover", key,
                           {"since": "-262143-01-01T00:00:00Z"})
    assert status == 422, body
    # The server is still there and answers a sane window.
    status, _, body = call(hookgate, "GET", f"{base}/endpoint/{ep.id}/stats/hourly", key)
    assert status == 200 and body["data"] == [], body


def test_a_custom_headers_value_reaches_the_endpoint_but_not_the_attempt_log(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="headers"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"X-Webhook-Token": "s3cret-token"}))
    msg = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 1}))
    got = sink.wait_for(1)[0]
    assert got["headers"]["x-webhook-token"] == "s3cret-token"
    key = tenant["apiKey"]

    def attempt():
        status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/attempt/msg/{msg.id}", key)
        assert status == 200 and body["data"], body
        return body["data"][0]

    shown = eventually(attempt)["requestHeaders"]
    assert shown["x-webhook-token"] == "[redacted]", shown
    assert shown["webhook-id"] == msg.id, "Hookgate's own headers are shown as sent"
    assert "s3cret-token" not in str(shown)
    status, _, body = call(hookgate, "PUT", f"/api/v1/app/{app.id}/endpoint/{ep.id}/headers", key,
                           {"headers": {"X-Big": "x" * 5000}})
    assert status == 422 and "X-Big" in str(body["detail"]), body


def test_a_test_event_to_a_disabled_endpoint_is_refused_in_words(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="disabled"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    svix.endpoint.patch(app.id, ep.id, EndpointPatch(disabled=True))
    status, _, body = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/send-example",
                           tenant["apiKey"], {})
    assert status == 422 and "disabled" in str(body["detail"]), body


def test_a_portal_token_cannot_erase_content_by_percent_encoding_the_path(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="erase"))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    msg = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"keep": "me"}))
    sink.wait_for(1)
    token = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    base = f"/api/v1/app/{app.id}/msg/{msg.id}"
    attempt = eventually(lambda: call(hookgate, "GET", f"/api/v1/app/{app.id}/attempt/msg/{msg.id}",
                                      tenant["apiKey"])[2]["data"])[0]
    for path in [f"{base}/content", f"{base}/conten%74", f"{base}/%63ontent",
                 f"{base}/attempt/{attempt['id']}/conten%74"]:
        status, _, body = call(hookgate, "DELETE", path, token)
        assert status == 403, (path, status, body)
    assert svix.message.get(app.id, msg.id, MessageGetOptions(with_content=True)).payload == {"keep": "me"}
    status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/attempt/msg/{msg.id}", tenant["apiKey"])
    assert body["data"][0]["response"] != "EXPUNGED", body
    # The tenant itself still can.
    status, _, _ = call(hookgate, "DELETE", f"{base}/conten%74", tenant["apiKey"])
    assert status == 204
    assert svix.message.get(app.id, msg.id, MessageGetOptions(with_content=True)).payload == {"expired": True}


def test_a_portal_token_sees_only_event_types_of_its_feature_flags(hookgate, tenant, svix):
    from svix.api import Svix, SvixOptions

    tag = uuid.uuid4().hex[:6]
    # `featureFlag` as the reference API names it (this SDK's model sends a list under another name).
    for name, flag in [(f"open.{tag}", None), (f"beta.{tag}", "beta"), (f"hidden.{tag}", "unreleased")]:
        status, _, body = call(hookgate, "POST", "/api/v1/event-type", tenant["apiKey"],
                               {"name": name, "description": name, "featureFlag": flag,
                                "schemas": {"1": {"examples": [{"secret": "plan"}]}}})
        assert status == 201, body
    app = svix.application.create(ApplicationIn(name="flags"))
    ep = svix.endpoint.create(app.id, EndpointIn(url="http://127.0.0.1:9/hook"))

    def names(token):
        client = Svix(token, SvixOptions(server_url=hookgate.url, retry_schedule=[]))
        return {e.name for e in client.event_type.list().data if e.name.endswith(tag)}

    flagged = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(feature_flags=["beta"])).token
    plain = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    assert names(flagged) == {f"open.{tag}", f"beta.{tag}"}
    assert names(plain) == {f"open.{tag}"}
    assert names(tenant["apiKey"]) == {f"open.{tag}", f"beta.{tag}", f"hidden.{tag}"}, "the tenant sees all"
    status, _, _ = call(hookgate, "GET", f"/api/v1/event-type/hidden.{tag}", flagged)
    assert status == 404
    status, _, body = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/send-example", flagged,
                           {"eventType": f"hidden.{tag}"})
    assert status == 404, body
    status, _, body = call(hookgate, "POST", f"/api/v1/auth/app-portal-access/{app.id}", tenant["apiKey"],
                           {"featureFlags": ["no,commas"]})
    assert status == 422 and "featureFlags" in str(body["detail"]), body


def test_a_customers_idempotency_key_does_not_block_the_tenants_own(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="keys"))
    other = svix.application.create(ApplicationIn(name="keys-other"))
    svix.endpoint.create(other.id, EndpointIn(url=sink.url))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    token = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    key = "order-" + uuid.uuid4().hex
    status, _, first = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/send-example", token, {},
                            headers={"Idempotency-Key": key})
    assert status == 202, first
    status, hdrs, again = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/send-example", token, {},
                               headers={"Idempotency-Key": key})
    assert status == 202 and again["id"] == first["id"] and hdrs.get("idempotent-replayed") == "true", \
        "a retried test event is the same test event"
    status, _, body = call(hookgate, "POST", f"/api/v1/app/{other.id}/msg", tenant["apiKey"],
                           {"eventType": "order.paid", "payload": {"n": 1}}, headers={"Idempotency-Key": key})
    assert status == 202, body


def test_a_read_only_portal_link_reads_but_changes_nothing_and_shows_no_secret(hookgate, tenant, svix, sink):
    from svix.api import Svix, SvixOptions

    app = svix.application.create(ApplicationIn(name="read-only"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    for access in [AppPortalAccessIn(read_only=True), AppPortalAccessIn(capabilities=["ViewBase"])]:
        token = svix.authentication.app_portal_access(app.id, access).token
        portal = Svix(token, SvixOptions(server_url=hookgate.url, retry_schedule=[]))
        assert [e.id for e in portal.endpoint.list(app.id).data] == [ep.id]
        for method, path, body in [
            ("POST", f"/api/v1/app/{app.id}/endpoint", {"url": sink.url}),
            ("PATCH", f"/api/v1/app/{app.id}/endpoint/{ep.id}", {"disabled": True}),
            ("DELETE", f"/api/v1/app/{app.id}/endpoint/{ep.id}", None),
            ("GET", f"/api/v1/app/{app.id}/endpoint/{ep.id}/secret", None),
            ("POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/send-example", {}),
        ]:
            status, _, answer = call(hookgate, method, path, token, body)
            assert status == 403 and "read-only" in answer["detail"], (method, path, status, answer)
    assert svix.endpoint.get(app.id, ep.id).disabled is False
    # Capabilities with ManageEndpoint, and no flags at all, make an ordinary token.
    full = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(capabilities=["ViewBase", "ManageEndpoint"]))
    status, _, _ = call(hookgate, "GET", f"/api/v1/app/{app.id}/endpoint/{ep.id}/secret", full.token)
    assert status == 200


def test_portal_links_see_custom_header_names_and_values_only_where_the_tenant_allows(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="headers"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    path = f"/api/v1/app/{app.id}/endpoint/{ep.id}/headers"
    assert call(hookgate, "PUT", path, tenant["apiKey"], {"headers": {"X-Partner-Token": "p4ss", "X-Env": "prod"}})[0] == 204
    status, _, own = call(hookgate, "GET", path, tenant["apiKey"])
    assert status == 200 and own["headers"] == {"X-Env": "prod", "X-Partner-Token": "p4ss"}, own
    read_only = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(read_only=True)).token
    managing = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    for token in (read_only, managing):
        status, _, seen = call(hookgate, "GET", path, token)
        assert status == 200 and seen["headers"] == {} and sorted(seen["sensitive"]) == ["X-Env", "X-Partner-Token"], seen
    # The tenant may let managing links see values; a read-only link still sees names.
    status, _, settings = call(hookgate, "GET", "/api/v1/settings/portal", tenant["apiKey"])
    assert status == 200 and settings["showHeaderValues"] is False
    assert call(hookgate, "PUT", "/api/v1/settings/portal", tenant["apiKey"], {"showHeaderValues": True})[0] == 200
    assert call(hookgate, "GET", path, managing)[2]["headers"] == {"X-Env": "prod", "X-Partner-Token": "p4ss"}
    assert call(hookgate, "GET", path, read_only)[2]["headers"] == {}
    assert call(hookgate, "PUT", "/api/v1/settings/portal", tenant["apiKey"], {"showHeaderValues": False})[0] == 200


def test_app_portal_access_creates_the_application_alongside_as_svix_does(hookgate, tenant, svix):
    uid = "customer-" + uuid.uuid4().hex[:8]
    access = svix.authentication.app_portal_access(uid, AppPortalAccessIn(application=ApplicationIn(name="Made here", uid=uid)))
    app = svix.application.get(uid)
    assert app.name == "Made here" and app.uid == uid
    assert f"/portal/{tenant['id']}/{app.id}#key=" in access.url
    # Once it exists, the argument is ignored.
    svix.authentication.app_portal_access(uid, AppPortalAccessIn(application=ApplicationIn(name="Other")))
    assert svix.application.get(uid).name == "Made here"
    status, _, _ = call(hookgate, "POST", "/api/v1/auth/app-portal-access/missing-" + uid, tenant["apiKey"], {})
    assert status == 404


def test_the_message_log_filters_by_the_state_of_a_messages_deliveries(hookgate, tenant, svix, sink):
    from svix.api import EventTypeIn
    from conftest import Sink
    svix.event_type.create(EventTypeIn(name="parcel.lost", description="fails at one endpoint"))
    svix.event_type.create(EventTypeIn(name="parcel.sent", description="goes to the good one only"))
    app = svix.application.create(ApplicationIn(name="by-status"))
    failing = Sink()
    failing.status = 500
    try:
        svix.endpoint.create(app.id, EndpointIn(url=sink.url))
        svix.endpoint.create(app.id, EndpointIn(url=failing.url, event_types=["parcel.lost"]))
        lost = svix.message.create(app.id, MessageIn(event_type="parcel.lost", payload={}))
        sent = [svix.message.create(app.id, MessageIn(event_type="parcel.sent", payload={"n": i})) for i in range(2)]
        key = tenant["apiKey"]

        def ids(status):
            code, _, page = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg?status={status}", key)
            assert code == 200, page
            return sorted(m["id"] for m in page["data"])

        # The retry schedule (1 s, 1 s) runs out: the lost parcel's delivery to the failing endpoint fails.
        eventually(lambda: ids(2) == [lost.id], timeout=20)
        assert ids(0) == sorted([lost.id] + [m.id for m in sent]), "each was delivered to the good endpoint"
        assert ids(1) == [] and ids(3) == []
        code, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/msg?status=9", key)
        assert code == 422 and "status" in str(body["detail"]), body
    finally:
        failing.server.shutdown()
