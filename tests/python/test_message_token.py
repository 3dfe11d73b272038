"""Svix's `create-message-token`: a token that creates messages in one application and does
nothing else, used through the official SDK as a publishing service would."""
import json

from svix.api import ApplicationIn, EndpointIn, MessageIn, Svix, SvixOptions

from conftest import call


def mint(hookgate, key, app, **body):
    return call(hookgate, "POST", f"/api/v1/auth/app/{app}/create-message-token", key=key,
                body={"name": "publisher", **body})


def test_a_message_token_publishes_to_its_application_through_the_sdk_and_can_do_nothing_else(hookgate, tenant, svix, sink):
    app = svix.application.create(ApplicationIn(name="publishing", uid="pub-app")).id
    other = svix.application.create(ApplicationIn(name="other")).id
    svix.endpoint.create(app, EndpointIn(url=sink.url))
    status, _, out = mint(hookgate, tenant["apiKey"], "pub-app", expiry=3600)
    assert status == 200, out
    assert out["name"] == "publisher" and out["scopes"] == ["message.create"] and out["expiresAt"]

    publisher = Svix(out["token"], SvixOptions(server_url=hookgate.url, retry_schedule=[]))
    msg = publisher.message.create(app, MessageIn(event_type="order.paid", payload={"n": 1}))
    assert sink.wait_for(1)[0]["headers"]["webhook-id"] == msg.id
    # By uid too, as the path names the application.
    publisher.message.create("pub-app", MessageIn(event_type="order.paid", payload={"n": 2}))

    token = out["token"]
    for method, path, body in [
        ("GET", f"/api/v1/app/{app}/msg", None),
        ("GET", f"/api/v1/app/{app}/msg/{msg.id}", None),
        ("POST", f"/api/v1/app/{app}/endpoint", {"url": sink.url}),
        ("GET", f"/api/v1/app/{app}", None),
        ("GET", "/api/v1/app", None),
        ("GET", "/api/v1/event-type", None),
        ("POST", "/api/v1/msg/broadcast", {"eventType": "x", "payload": {}}),
        ("POST", f"/api/v1/auth/app/{app}/create-message-token", {"name": "again"}),
    ]:
        status, _, _ = call(hookgate, method, path, key=token, body=body)
        assert status == 403, f"{method} {path} answered {status}"
    status, _, _ = call(hookgate, "POST", f"/api/v1/app/{other}/msg", key=token, body={"eventType": "x", "payload": {}})
    assert status == 404, "another application is not this token's to know"


def test_a_message_token_ends_with_expire_all_of_its_application(hookgate, tenant, svix):
    app = svix.application.create(ApplicationIn(name="expiring")).id
    token = mint(hookgate, tenant["apiKey"], app)[2]["token"]
    body = {"eventType": "x", "payload": {}}
    assert call(hookgate, "POST", f"/api/v1/app/{app}/msg", key=token, body=body)[0] == 202
    assert call(hookgate, "POST", f"/api/v1/auth/app/{app}/expire-all", key=tenant["apiKey"], body={})[0] == 204
    assert call(hookgate, "POST", f"/api/v1/app/{app}/msg", key=token, body=body)[0] == 401


def test_a_message_token_is_minted_only_with_the_tenants_key_and_sane_settings(hookgate, tenant, svix):
    app = svix.application.create(ApplicationIn(name="minting")).id
    assert mint(hookgate, tenant["apiKey"], app, expiry=10)[0] == 422
    assert mint(hookgate, tenant["apiKey"], app, name="")[0] == 422
    status, _, portal = call(hookgate, "POST", f"/api/v1/auth/app-portal-access/{app}", key=tenant["apiKey"], body={})
    assert status == 200
    assert mint(hookgate, portal["token"], app)[0] == 403, "a portal token mints nothing"
    assert mint(hookgate, tenant["apiKey"], "app_" + "0" * 26)[0] == 404


def test_a_message_tokens_idempotency_keys_never_name_the_tenants_messages(hookgate, tenant, svix):
    """Before, a message token sending the Idempotency-Key the tenant had used got the
    tenant's message back (payload and all), and in the other order the tenant's message
    was never made."""
    app = svix.application.create(ApplicationIn(name="keys")).id
    token = mint(hookgate, tenant["apiKey"], app)[2]["token"]
    key = {"Idempotency-Key": "order-1001"}
    status, _, mine = call(hookgate, "POST", f"/api/v1/app/{app}/msg", key=tenant["apiKey"], headers=key,
                           body={"eventType": "x", "payload": {"secret": "tenant's"}})
    assert status == 202
    status, _, theirs = call(hookgate, "POST", f"/api/v1/app/{app}/msg", key=token, headers=key,
                             body={"eventType": "x", "payload": {"from": "token"}})
    assert status == 202 and theirs["id"] != mine["id"] and "secret" not in json.dumps(theirs)


def test_a_leaked_message_token_can_end_itself(hookgate, tenant, svix):
    app = svix.application.create(ApplicationIn(name="leaked")).id
    token = mint(hookgate, tenant["apiKey"], app)[2]["token"]
    assert call(hookgate, "POST", "/api/v1/auth/logout", key=token)[0] == 204
    assert call(hookgate, "POST", f"/api/v1/app/{app}/msg", key=token, body={"eventType": "x", "payload": {}})[0] == 401
