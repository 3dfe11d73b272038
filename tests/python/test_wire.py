"""Where Hookgate's wire answered other than Svix's, now answered as Svix does,
through the official SDK where it has the call."""
from datetime import datetime, timedelta, timezone

import pytest
from svix.api import (
    AppPortalAccessIn,
    ApplicationIn,
    EndpointHeadersIn,
    EndpointIn,
    EndpointPatch,
    EventTypeIn,
    MessageIn,
    RecoverIn,
    Svix,
    SvixOptions,
)
from svix.api.message import message_in_raw
from svix.exceptions import HttpError, HTTPValidationError

from conftest import call


def test_custom_headers_with_a_reserved_prefix_are_refused_naming_it(svix, sink):
    app = svix.application.create(ApplicationIn(name="headers"))
    for name in ["svix-custom", "X-Svix-Thing", "x-amzn-trace-id"]:
        # Before, each was accepted and sent.
        with pytest.raises(HTTPValidationError) as e:
            svix.endpoint.create(app.id, EndpointIn(url=sink.url, headers={name: "1"}))
        assert name in str(e.value.detail[0].msg) and "reserved" in str(e.value.detail[0].msg)
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    with pytest.raises(HTTPValidationError):
        svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"X-Amzn-Whatever": "1"}))
    svix.endpoint.set_headers(app.id, ep.id, EndpointHeadersIn(headers={"X-Team": "orders"}))
    assert svix.endpoint.get_headers(app.id, ep.id).headers == {"X-Team": "orders"}


def test_a_recovery_reaches_back_fourteen_days_at_most(svix, sink):
    app = svix.application.create(ApplicationIn(name="recover"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    old = datetime.now(timezone.utc) - timedelta(days=15)
    # Before, a recovery of any age was started.
    with pytest.raises(HTTPValidationError) as e:
        svix.endpoint.recover(app.id, ep.id, RecoverIn(since=old))
    assert "14 days" in str(e.value.detail[0].msg)
    assert svix.endpoint.recover(app.id, ep.id, RecoverIn(since=old + timedelta(days=2))).id


def test_the_deprecated_rate_limit_is_answered_beside_throttle_rate(hookgate, tenant, sink):
    key = tenant["apiKey"]
    status, _, app = call(hookgate, "POST", "/api/v1/app", key, {"name": "rates", "rateLimit": 7})
    assert status == 201 and app["throttleRate"] == 7 and app["rateLimit"] == 7, app
    status, _, ep = call(hookgate, "POST", f"/api/v1/app/{app['id']}/endpoint", key, {"url": sink.url, "rateLimit": 3})
    assert status == 201 and ep["throttleRate"] == 3 and ep["rateLimit"] == 3, ep


def test_an_unknown_key_is_refused_in_svixs_words(hookgate):
    status, _, body = call(hookgate, "GET", "/api/v1/app", "hgk_tnt_nope_0000")
    assert status == 401 and body["detail"] == "Invalid token", body


def test_a_portal_token_finds_no_other_application(svix, hookgate):
    mine = svix.application.create(ApplicationIn(name="Mine"))
    other = svix.application.create(ApplicationIn(name="Other"))
    token = svix.authentication.app_portal_access(mine.id, AppPortalAccessIn()).token
    portal = Svix(token, SvixOptions(server_url=hookgate.url, retry_schedule=[]))
    # Before, 403: the token told that the application exists.
    for look in (lambda: portal.application.get(other.id), lambda: portal.endpoint.list(other.id)):
        with pytest.raises(HttpError) as e:
            look()
        assert e.value.status_code == 404
    with pytest.raises(HttpError) as e:
        portal.application.get("app_2bQJtPwGkJ1eZ4d8Xq9cV3mNoRs")
    assert e.value.status_code == 404, "a missing one answers the same"


def test_dashboard_access_mints_a_portal_token_for_the_application(hookgate, tenant, svix):
    app = svix.application.create(ApplicationIn(name="dash"))
    # Before, 404: the route was not served.
    status, _, out = call(hookgate, "POST", f"/api/v1/auth/dashboard-access/{app.id}", tenant["apiKey"])
    assert status == 200 and out["token"] and out["token"] in out["url"], out
    portal = Svix(out["token"], SvixOptions(server_url=hookgate.url, retry_schedule=[]))
    assert portal.application.get(app.id).id == app.id


def test_an_application_made_alongside_must_carry_the_paths_uid(hookgate, tenant, svix):
    key = tenant["apiKey"]
    body = {"eventType": "x.y", "payload": {}, "application": {"name": "A", "uid": "other-uid"}}
    # Before, 202 and an application under `other-uid`; a retry then got a 409 about an eventId.
    status, _, out = call(hookgate, "POST", "/api/v1/app/inline-uid/msg", key, body)
    assert status == 422 and "uid" in out["detail"][0]["msg"], out
    status, _, out = call(hookgate, "POST", "/api/v1/app/inline-uid/msg", key, {**body, "application": {"name": "A"}})
    assert status == 422, out
    status, _, _ = call(hookgate, "GET", "/api/v1/app/other-uid", key)
    assert status == 404, "nothing was written"
    status, _, out = call(hookgate, "POST", "/api/v1/app/inline-uid/msg", key,
                          {**body, "application": {"name": "A", "uid": "inline-uid"}})
    assert status == 202, out
    # An existing application ignores the body's, as Svix does.
    status, _, out = call(hookgate, "POST", "/api/v1/app/inline-uid/msg", key, body)
    assert status == 202, out
    portal = {"application": {"name": "P", "uid": "nope"}}
    status, _, out = call(hookgate, "POST", "/api/v1/auth/app-portal-access/portal-uid", key, portal)
    assert status == 422, out
    status, _, out = call(hookgate, "POST", "/api/v1/auth/app-portal-access/portal-uid", key,
                          {"application": {"name": "P", "uid": "portal-uid"}})
    assert status == 200 and svix.application.get("portal-uid").name == "P"


def test_filter_types_must_name_event_types_the_tenant_has(svix, sink):
    app = svix.application.create(ApplicationIn(name="types"))
    svix.event_type.create(EventTypeIn(name="order.paid", description="paid"))
    svix.event_type.create(EventTypeIn(name="order.old", description="old", archived=True))
    # Before, both were accepted, and the endpoint silently subscribed to nothing.
    for bad in (["order.typo"], ["order.paid", "order.old"]):
        with pytest.raises(HTTPValidationError) as e:
            svix.endpoint.create(app.id, EndpointIn(url=sink.url, event_types=bad))
        assert bad[-1] in str(e.value.detail[0].msg)
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, event_types=["order.paid"]))
    with pytest.raises(HTTPValidationError):
        svix.endpoint.patch(app.id, ep.id, EndpointPatch(event_types=["nope.nope"]))
    assert svix.endpoint.patch(app.id, ep.id, EndpointPatch(description="kept")).event_types == ["order.paid"]


def test_an_event_type_schema_that_is_no_json_schema_is_refused(hookgate, tenant, svix):
    key = tenant["apiKey"]
    bad = {"name": "bad-schema", "description": "I have a bad schema", "schemas": {"1": {"readOnly": 15}}}
    # Before, 201: any JSON was kept as a schema.
    status, _, out = call(hookgate, "POST", "/api/v1/event-type", key, bad)
    assert status == 422 and "schemas.1" in out["detail"][0]["msg"], out
    status, _, out = call(hookgate, "POST", "/api/v1/event-type", key,
                          {**bad, "schemas": {"1": {"$ref": "file:///etc/hostname"}}})
    assert status == 422 and "not loaded" in out["detail"][0]["msg"], out
    good = {"1": {"type": "object", "properties": {"id": {"type": "string"}}}}
    made = svix.event_type.create(EventTypeIn(name="good-schema", description="d", schemas=good))
    assert made.schemas == good


def test_a_raw_payload_is_sent_byte_for_byte_with_its_content_type(svix, sink):
    app = svix.application.create(ApplicationIn(name="raw"))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    raw = '{"b":  2,   "a": 1}'
    # Before, the receiver got `{}` (the SDK's placeholder payload).
    svix.message.create(app.id, message_in_raw(event_type="x.raw", payload=raw))
    svix.message.create(app.id, message_in_raw(event_type="x.raw", payload="plain words", content_type="text/plain"))
    got = sink.wait_for(2)
    by_type = {r["headers"]["content-type"]: r["body"] for r in got}
    assert by_type["application/json"] == raw.encode()
    assert by_type["text/plain"] == b"plain words"


def test_whoami_names_the_tenant_and_a_portal_tokens_application(hookgate, tenant, svix):
    # Before, 404: the route was not served.
    status, _, me = call(hookgate, "GET", "/api/v1/auth/whoami", tenant["apiKey"])
    assert (status, me["envId"], me["appId"], me["permissionSource"]) == (200, tenant["id"], None, "GlobalAuthToken")
    app = svix.application.create(ApplicationIn(name="who"))
    token = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    status, _, me = call(hookgate, "GET", "/api/v1/auth/whoami", token)
    assert (status, me["envId"], me["appId"], me["permissionSource"]) == (200, tenant["id"], app.id, "SvixJwt")
    assert call(hookgate, "GET", "/api/v1/auth/whoami", "hgk_tnt_nope_0000")[0] == 401


def test_a_portal_token_cannot_learn_of_event_types_behind_a_flag_it_lacks(hookgate, tenant, svix, sink):
    made = call(hookgate, "POST", "/api/v1/event-type", tenant["apiKey"],
                {"name": "beta.launch", "description": "b", "featureFlag": "beta"})
    assert made[0] == 201, made
    app = svix.application.create(ApplicationIn(name="flags"))
    token = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    status, _, out = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint", token,
                          {"url": sink.url, "filterTypes": ["beta.launch", "nope"]})
    # Before this check learned flags, the answer named only `nope`: `beta.launch` existed.
    assert status == 422 and "beta.launch" in out["detail"][0]["msg"], out
    flagged = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(feature_flags=["beta"])).token
    status, _, out = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint", flagged,
                          {"url": sink.url, "filterTypes": ["beta.launch"]})
    assert status == 201, out
    # The unflagged page sends the list back unchanged: a save, not a new subscription.
    status, _, saved = call(hookgate, "PATCH", f"/api/v1/app/{app.id}/endpoint/{out['id']}", token,
                            {"description": "renamed", "filterTypes": ["beta.launch"]})
    assert status == 200 and saved["description"] == "renamed", saved
    assert call(hookgate, "GET", "/api/v1/event-type/beta.launch/retry-schedule", token)[0] == 403


def test_an_event_type_name_that_would_read_as_a_prev_iterator_is_refused(hookgate, tenant):
    status, _, out = call(hookgate, "POST", "/api/v1/event-type", tenant["apiKey"], {"name": "-c", "description": "d"})
    assert status == 422 and "-" in out["detail"][0]["msg"], out


def test_two_first_messages_to_a_new_application_uid_are_both_accepted(hookgate, tenant):
    from concurrent.futures import ThreadPoolExecutor
    body = {"eventType": "x.y", "payload": {}, "application": {"name": "N", "uid": "race-uid"}}
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: call(hookgate, "POST", "/api/v1/app/race-uid/msg", tenant["apiKey"], body),
                            range(4)))
    # Before, the losers of the race to make the application got 409 about an eventId.
    assert [s for s, _, _ in got] == [202] * 4, got
    status, _, msgs = call(hookgate, "GET", "/api/v1/app/race-uid/msg", tenant["apiKey"])
    assert len(msgs["data"]) == 4


def test_feature_flags_sent_as_the_sdk_sends_them_hide_an_event_type(hookgate, tenant, svix):
    from svix.api import EventTypePatch
    # Before, `featureFlags` (the SDK's field) was ignored: the type was visible to every token.
    made = svix.event_type.create(EventTypeIn(name="gamma.one", description="g", feature_flags=["gamma"]))
    assert made.feature_flags == ["gamma"]
    app = svix.application.create(ApplicationIn(name="gamma"))
    plain = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    assert call(hookgate, "GET", "/api/v1/event-type/gamma.one", plain)[0] == 404
    flagged = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(feature_flags=["gamma"])).token
    assert call(hookgate, "GET", "/api/v1/event-type/gamma.one", flagged)[0] == 200
    assert svix.event_type.patch("gamma.one", EventTypePatch(description="g2")).feature_flags == ["gamma"]
    status, _, out = call(hookgate, "PATCH", "/api/v1/event-type/gamma.one", tenant["apiKey"], {"featureFlags": []})
    assert status == 200 and out["featureFlags"] == [] and out.get("featureFlag") is None, out
    status, _, _ = call(hookgate, "POST", "/api/v1/event-type", tenant["apiKey"],
                        {"name": "gamma.two", "description": "g", "featureFlags": ["a", "b"]})
    assert status == 422, "one flag per type here"


def test_counts_of_active_applications_and_endpoints_and_the_environment_settings(hookgate, tenant, svix, sink):
    key = tenant["apiKey"]
    a = svix.application.create(ApplicationIn(name="active"))
    b = svix.application.create(ApplicationIn(name="quiet"))
    svix.application.create(ApplicationIn(name="empty"))
    svix.endpoint.create(a.id, EndpointIn(url=sink.url))
    svix.endpoint.create(a.id, EndpointIn(url=sink.url, disabled=True))
    svix.endpoint.create(b.id, EndpointIn(url=sink.url, disabled=True))
    # Before, 404: none of the three was served.
    assert call(hookgate, "GET", "/api/v1/app/stats/count-active", key)[2] == {"count": 1}
    assert call(hookgate, "GET", "/api/v1/stats/endpoint/count", key)[2] == {"active": 1, "disabled": 2}
    assert call(hookgate, "PUT", "/api/v1/settings/portal", key, {"displayName": "Acme", "primaryColor": "#112233"})[0] == 200
    status, _, s = call(hookgate, "GET", "/api/v1/environment/settings", key)
    assert status == 200 and (s["displayName"], s["customColor"]) == ("Acme", "#112233"), s
    other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other-counts"})
    assert call(hookgate, "GET", "/api/v1/stats/endpoint/count", other["apiKey"])[2] == {"active": 0, "disabled": 0}
