"""GET /openapi.json: a valid OpenAPI 3.0 document that lists Hookgate's own routes and
describes what they really answer.

The document is fetched from the running binary. Real requests are then made and
each response is checked against the schema the document gives for its status code,
strictly (no undocumented fields), so that the document cannot drift from the code
silently in either direction."""
import base64
import copy
import hashlib
import hmac as hmac_lib
import json
import urllib.request
import uuid
from pathlib import Path

import pytest
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from openapi_spec_validator import OpenAPIV30SpecValidator
from svix.api import AppPortalAccessIn, ApplicationIn, EndpointIn

from conftest import ADMIN_TOKEN, raw_call

ROOT = Path(__file__).resolve().parents[2]
DOC_FILE = ROOT / "crates" / "gateway" / "src" / "openapi.json"

# Every route of Hookgate's own (non-Svix) API, as the handlers register them
# (crates/gateway/src/routes/{admin,health}.rs, crates/ingress/src/{api/*,receive}.rs).
ROUTES = [
    ("post", "/admin/v1/tenant"),
    ("get", "/admin/v1/tenant"),
    ("get", "/admin/v1/tenant/{id}"),
    ("patch", "/admin/v1/tenant/{id}"),
    ("delete", "/admin/v1/tenant/{id}"),
    ("post", "/admin/v1/tenant/{id}/api-key"),
    ("delete", "/admin/v1/tenant/{id}/api-key/{key_id}"),
    ("delete", "/admin/v1/tenant/{id}/app/{app_id}"),
    ("get", "/admin/v1/tenant/{id}/stats"),
    ("get", "/admin/v1/tenant/{id}/api-key"),
    ("get", "/api/v1/search"),
    ("get", "/api/v1/usage"),
    ("get", "/admin/v1/tenant/{id}/usage"),
    ("get", "/api/v1/settings/portal"),
    ("put", "/api/v1/settings/portal"),
    ("get", "/api/v1/settings/transformations"),
    ("put", "/api/v1/settings/transformations"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/openapi.json"),
    ("post", "/api/v1/source"),
    ("get", "/api/v1/source"),
    ("get", "/api/v1/source/{id}"),
    ("patch", "/api/v1/source/{id}"),
    ("delete", "/api/v1/source/{id}"),
    ("get", "/api/v1/source/{id}/secret"),
    ("post", "/api/v1/source/{id}/secret/rotate"),
    ("get", "/api/v1/source/{id}/event"),
    ("get", "/api/v1/source/{id}/event/{event_id}"),
    ("post", "/api/v1/source/{id}/event/{event_id}/replay"),
    ("post", "/in/{source_id}"),
]
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


# --- fetching and checking -----------------------------------------------------------------


@pytest.fixture(scope="module")
def doc(hookgate):
    status, headers, raw = raw_call(hookgate, "get", "/openapi.json")
    assert status == 200
    assert headers["content-type"].startswith("application/json")
    served = json.loads(raw)
    on_disk = json.loads(DOC_FILE.read_text())
    assert served == on_disk, (
        f"{hookgate.url}/openapi.json is not {DOC_FILE.relative_to(ROOT)}: target/debug/hookgate is older than "
        "the document (rebuild it: cargo build --bin hookgate)"
    )
    return served


def resolve(doc, node):
    """`node` with every local `$ref` replaced by what it points at (the document has no cycles)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = doc
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            return resolve(doc, target)
        return {k: resolve(doc, v) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(doc, v) for v in node]
    return node


def strict(schema):
    """A copy of `schema` in which objects allow no undocumented properties: allOf of
    objects is merged into one object, and every object with `properties` and no
    `additionalProperties` gets `additionalProperties: false`."""
    schema = copy.deepcopy(schema)

    def walk(s):
        if isinstance(s, list):
            return [walk(x) for x in s]
        if not isinstance(s, dict):
            return s
        s = {k: walk(v) for k, v in s.items()}
        if "allOf" in s and all(isinstance(p, dict) and (p.get("type") == "object" or "properties" in p)
                                for p in s["allOf"]):
            merged = {"type": "object", "properties": {}, "required": []}
            for part in s.pop("allOf"):
                merged["properties"].update(part.get("properties", {}))
                merged["required"] += [r for r in part.get("required", []) if r not in merged["required"]]
            s = {**merged, **{k: v for k, v in s.items() if k not in ("type",)}}
        if s.get("type") == "object" and "properties" in s and "additionalProperties" not in s:
            s["additionalProperties"] = False
        return s

    return walk(schema)


def operation(doc, method, path):
    assert path in doc["paths"], f"{path} is not documented"
    item = doc["paths"][path]
    assert method in item, f"{method.upper()} {path} is not documented"
    return item[method]


def check(doc, method, path, status, headers, raw):
    """Asserts that the response is one `method path` documents: its status code is
    listed, its content type and body match the documented schema strictly, and its
    documented headers (other than the replay marker) are sent. Returns the body."""
    op = operation(doc, method, path)
    assert str(status) in op["responses"], (
        f"{method.upper()} {path} answered {status}, which is not documented: {raw[:300]!r}"
    )
    res = resolve(doc, op["responses"][str(status)])
    for name in res.get("headers", {}):
        if name.lower() != "idempotent-replayed":
            assert name.lower() in headers, f"{method.upper()} {path} {status}: header {name} is documented, not sent"
    content = res.get("content")
    if not content:
        assert raw == b"", f"{method.upper()} {path} {status} documents no body but sent {raw[:200]!r}"
        return None
    ctype = headers.get("content-type", "")
    media = next((m for t, m in content.items() if ctype.split(";")[0].strip() == t.split(";")[0].strip()), None)
    assert media is not None, f"{method.upper()} {path} {status}: content type {ctype!r} is not one of {list(content)}"
    if not ctype.startswith("application/json"):
        return raw.decode()
    body = json.loads(raw)
    validator = OAS30Validator(strict(media["schema"]), format_checker=oas30_format_checker)
    errors = [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in validator.iter_errors(body)]
    assert not errors, f"{method.upper()} {path} {status} does not match its documented schema:\n" + "\n".join(
        errors
    ) + f"\nbody: {json.dumps(body)[:1000]}"
    return body


def call(hookgate, doc, method, template, path=None, token=None, **kw):
    """Makes the request and checks the response against the document."""
    status, headers, raw = raw_call(hookgate, method, path or template, key=token, **kw)
    body = check(doc, method, template, status, headers, raw)
    return status, headers, body


# --- the document itself -------------------------------------------------------------------------


def test_the_document_is_valid_openapi_3_0_3(doc):
    assert doc["openapi"] == "3.0.3"
    OpenAPIV30SpecValidator(doc).validate()  # raises with what is wrong


def test_every_route_of_hookgates_own_api_is_documented(doc):
    documented = {(m, p) for p, item in doc["paths"].items() for m in item if m in METHODS}
    missing = [f"{m.upper()} {p}" for m, p in ROUTES if (m, p) not in documented]
    assert not missing, f"undocumented routes: {missing}"
    extra = sorted(f"{m.upper()} {p}" for m, p in documented - set(ROUTES))
    assert not extra, f"documented routes this test does not know: {extra}"
    # The Svix-compatible routes are left to Svix's document, and the description says so.
    assert not [p for p in doc["paths"] if p.startswith(("/api/v1/app", "/api/v1/event-type", "/api/v1/auth"))]
    description = doc["info"]["description"]
    for prefix in ("/api/v1/app", "/api/v1/event-type", "/api/v1/auth/app-portal-access"):
        assert prefix in description
    assert "Svix" in description


def test_every_operation_has_an_id_and_every_authenticated_one_a_security_scheme(doc):
    schemes = doc["components"]["securitySchemes"]
    for name in ("adminToken", "apiKey"):
        assert (schemes[name]["type"], schemes[name]["scheme"]) == ("http", "bearer"), name
    ids = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            ids.append(op["operationId"])
            wanted = [{"adminToken": []}] if path.startswith("/admin/") else (
                [{"apiKey": []}] if path.startswith("/api/v1/") else [])
            assert op["security"] == wanted, f"{method.upper()} {path}"
            params = [resolve(doc, p)["name"] for p in item.get("parameters", []) + op.get("parameters", [])]
            if method == "post" and path.startswith(("/admin/", "/api/")):
                assert "Idempotency-Key" in params, f"{method.upper()} {path} lacks the Idempotency-Key header"
            if method == "get" and path.endswith(("/tenant", "/source", "/event")):
                assert {"limit", "iterator"} <= set(params), f"{method.upper()} {path} lacks pagination"
            for name in [p.strip("{}") for p in path.split("/") if p.startswith("{")]:
                assert name in params, f"{method.upper()} {path} does not describe its path parameter {name}"
    assert len(ids) == len(set(ids)), "operationIds are unique"


def test_every_documented_route_is_served(hookgate, doc, tenant):
    """The reverse of the list above: no documented route answers the fallback
    `route not found` (the ids are dummies, so the handlers answer `… not found`)."""
    zero = "0" * 26
    for path, item in doc["paths"].items():
        for method in [m for m in item if m in METHODS]:
            own = "src" if path.startswith("/api/v1/source") else "tnt"
            concrete = (path.replace("{id}", f"{own}_{zero}").replace("{key_id}", f"key_{zero}")
                        .replace("{event_id}", f"evt_{zero}").replace("{source_id}", f"src_{zero}")
                        .replace("{app_id}", f"app_{zero}"))
            assert "{" not in concrete, f"{path}: a path parameter this test does not know"
            token = ADMIN_TOKEN if path.startswith("/admin/") else tenant["apiKey"] if path.startswith("/api/") else None
            status, _, raw = raw_call(hookgate, method, concrete, key=token)
            assert status != 405, f"{method.upper()} {path}: 405"
            if status == 404:
                assert json.loads(raw)["detail"] != "route not found", f"{method.upper()} {path} is not served"


# --- documented responses, for real ----------------------------------------------------------------


def test_admin_tenant_responses_match_the_document(hookgate, doc):
    admin = ADMIN_TOKEN
    uid = "doc-" + uuid.uuid4().hex[:8]
    key = "create-" + uuid.uuid4().hex
    status, headers, created = call(hookgate, doc, "post", "/admin/v1/tenant", token=admin,
                                    body={"name": "Doc Co", "uid": uid}, headers={"Idempotency-Key": key})
    assert status == 201
    required = set(resolve(doc, doc["components"]["schemas"]["Tenant"])["required"]) | {"apiKey", "apiKeyId"}
    assert required <= set(created), "the documented required fields are all there"
    assert created["id"].startswith("tnt_") and created["apiKey"].startswith("hgk_" + created["id"] + "_")
    assert created["uid"] == uid and created["disabled"] is False

    status, headers, replay = call(hookgate, doc, "post", "/admin/v1/tenant", token=admin,
                                   body={"name": "Doc Co", "uid": uid}, headers={"Idempotency-Key": key})
    assert (status, headers.get("idempotent-replayed"), replay) == (201, "true", created)
    status, _, reused = call(hookgate, doc, "post", "/admin/v1/tenant", token=admin,
                             body={"name": "Other"}, headers={"Idempotency-Key": key})
    assert (status, reused["code"]) == (422, "idempotency_key_reused") and isinstance(reused["detail"], str)

    status, _, invalid = call(hookgate, doc, "post", "/admin/v1/tenant", token=admin, body={"name": "x", "nope": 1})
    assert status == 422 and invalid["code"] == "validation"
    assert {"loc", "msg", "type"} <= set(invalid["detail"][0]) and "nope" in invalid["detail"][0]["msg"]
    status, _, conflict = call(hookgate, doc, "post", "/admin/v1/tenant", token=admin, body={"name": "y", "uid": uid})
    assert (status, conflict["code"]) == (409, "conflict")
    status, _, bad = call(hookgate, doc, "post", "/admin/v1/tenant", token=admin, raw=b'{"name":')
    assert status == 400
    status, _, unauth = call(hookgate, doc, "post", "/admin/v1/tenant", body={"name": "z"})
    assert (status, unauth["code"]) == (401, "authentication_failed")
    status, _, unauth = call(hookgate, doc, "get", "/admin/v1/tenant", token="not-the-admin-token")
    assert status == 401

    status, _, page = call(hookgate, doc, "get", "/admin/v1/tenant", "/admin/v1/tenant?limit=1", token=admin)
    assert status == 200 and len(page["data"]) == 1
    if not page["done"]:
        status, _, nxt = call(hookgate, doc, "get", "/admin/v1/tenant",
                              f"/admin/v1/tenant?limit=1&iterator={page['iterator']}", token=admin)
        assert status == 200 and nxt["data"][0]["id"] > page["data"][0]["id"]
    status, _, bad_query = call(hookgate, doc, "get", "/admin/v1/tenant", "/admin/v1/tenant?limit=many", token=admin)
    assert (status, bad_query["code"]) == (422, "validation")

    one = "/admin/v1/tenant/{id}"
    status, _, got = call(hookgate, doc, "get", one, f"/admin/v1/tenant/{uid}", token=admin)
    assert status == 200 and got["id"] == created["id"], "the uid works as the id"
    status, _, patched = call(hookgate, doc, "patch", one, f"/admin/v1/tenant/{created['id']}", token=admin,
                              body={"name": "Doc Co 2", "uid": None})
    assert status == 200 and (patched["name"], patched["uid"]) == ("Doc Co 2", None)
    status, _, patched = call(hookgate, doc, "patch", one, f"/admin/v1/tenant/{created['id']}", token=admin,
                              body={"retention": {"inboundDays": 7, "messageDays": None}})
    assert status == 200 and patched["retention"]["effective"]["inboundDays"] == 7
    status, _, invalid = call(hookgate, doc, "patch", one, f"/admin/v1/tenant/{created['id']}", token=admin,
                              body={"retention": {"inboundDays": 91}})
    assert (status, invalid["code"]) == (422, "validation") and "inboundDays" in invalid["detail"][0]["msg"]

    # Erasing one of its customers: a real application, then one that is not there.
    erase = "/admin/v1/tenant/{id}/app/{app_id}"
    status, _, raw = raw_call(hookgate, "post", "/api/v1/app", key=created["apiKey"], body={"name": "Customer"})
    assert status == 201
    app = json.loads(raw)["id"]
    assert call(hookgate, doc, "delete", erase, f"/admin/v1/tenant/{created['id']}/app/{app}", token=admin)[0] == 204
    status, _, missing = call(hookgate, doc, "delete", erase, f"/admin/v1/tenant/{created['id']}/app/{app}",
                              token=admin)
    assert (status, missing["code"]) == (404, "not_found")

    keys = "/admin/v1/tenant/{id}/api-key"
    status, _, issued = call(hookgate, doc, "post", keys, f"/admin/v1/tenant/{created['id']}/api-key", token=admin)
    assert status == 201 and issued["id"].startswith("key_") and issued["apiKey"].startswith("hgk_")
    revoke = "/admin/v1/tenant/{id}/api-key/{key_id}"
    path = f"/admin/v1/tenant/{created['id']}/api-key/{issued['id']}"
    assert call(hookgate, doc, "delete", revoke, path, token=admin)[0] == 204
    assert call(hookgate, doc, "delete", revoke, path, token=admin)[0] == 404
    status, _, _ = call(hookgate, doc, "get", "/api/v1/source", token=issued["apiKey"])
    assert status == 401, "a revoked key stops working"

    assert call(hookgate, doc, "delete", one, f"/admin/v1/tenant/{created['id']}", token=admin)[0] == 204
    status, _, gone = call(hookgate, doc, "get", one, f"/admin/v1/tenant/{created['id']}", token=admin)
    assert (status, gone["code"]) == (404, "not_found")


def test_health_metrics_and_the_document_itself_match_the_document(hookgate, doc):
    assert call(hookgate, doc, "get", "/healthz")[2] == {"status": "ok"}
    status, _, ready = call(hookgate, doc, "get", "/readyz")
    assert status == 200 and ready["postgres"] == "up"
    # /metrics is not on this API's port (its listener is HOOKGATE_METRICS_LISTEN)...
    assert raw_call(hookgate, "get", "/metrics")[0] == 404
    # ...but on its own, in the Prometheus text format.
    with urllib.request.urlopen(hookgate.metrics_url, timeout=10) as res:
        text = res.read().decode()
        assert "# TYPE hookgate_http_requests_total counter" in text
        assert res.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert call(hookgate, doc, "get", "/openapi.json")[0] == 200


def test_sources_and_ingress_responses_match_the_document(hookgate, doc, tenant, svix, sink):
    key = tenant["apiKey"]
    status, _, empty = call(hookgate, doc, "get", "/api/v1/source", token=key)
    assert status == 200 and empty["data"] == [] and empty["done"] is True
    status, _, _ = call(hookgate, doc, "get", "/api/v1/source")
    assert status == 401

    app = svix.application.create(ApplicationIn(name="doc", uid="doc-app"))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    status, headers, src = call(hookgate, doc, "post", "/api/v1/source", token=key,
                                body={"name": "doc", "provider": "none", "allowUnverified": True, "appId": "doc-app",
                                      "idempotency": {"jsonPointer": "/id"}, "eventTypePath": "/kind"},
                                headers={"Idempotency-Key": "src-" + uuid.uuid4().hex})
    assert status == 201 and src["id"].startswith("src_") and src["appId"] == app.id
    assert src["url"] == f"{hookgate.url}/in/{src['id']}"
    status, _, hm = call(hookgate, doc, "post", "/api/v1/source", token=key,
                         body={"name": "hm", "provider": "hmac", "hmac": {"header": "X-Sig", "encoding": "base64"},
                               "appId": app.id, "mode": "sync", "retention": 7})
    assert status == 201 and hm["hmac"]["encoding"] == "base64" and hm["mode"] == "sync"
    status, _, invalid = call(hookgate, doc, "post", "/api/v1/source", token=key,
                              body={"name": "x", "provider": "carrier-pigeon", "appId": app.id})
    assert (status, invalid["code"]) == (422, "validation")
    status, _, page = call(hookgate, doc, "get", "/api/v1/source", token=key)
    assert status == 200 and {s["id"] for s in page["data"]} == {src["id"], hm["id"]} and page["done"] is True
    status, _, stripe = call(hookgate, doc, "post", "/api/v1/source", token=key,
                             body={"name": "st", "provider": "stripe", "appId": app.id, "idempotency": None})
    assert status == 201 and stripe["idempotency"] is None and stripe["provider"] == "stripe"
    status, _, err = call(hookgate, doc, "post", "/api/v1/source", token=key,
                          body={"name": "st", "provider": "stripe", "appId": app.id, "idempotency": "provider"})
    assert status == 422 and "idempotency" in str(err["detail"])

    one = "/api/v1/source/{id}"
    assert call(hookgate, doc, "get", one, f"/api/v1/source/{src['id']}", token=key)[2] == src
    status, _, patched = call(hookgate, doc, "patch", one, f"/api/v1/source/{hm['id']}", token=key,
                              body={"eventTypePath": "/type", "retention": 3})
    assert status == 200 and (patched["eventTypePath"], patched["retention"]) == ("/type", 3)
    status, _, secret = call(hookgate, doc, "get", "/api/v1/source/{id}/secret",
                             f"/api/v1/source/{hm['id']}/secret", token=key)
    assert status == 200 and secret["key"].startswith("hgsec_")
    assert call(hookgate, doc, "get", "/api/v1/source/{id}/secret",
                f"/api/v1/source/{src['id']}/secret", token=key)[2] == {"key": None}
    status, _, rotated = call(hookgate, doc, "post", "/api/v1/source/{id}/secret/rotate",
                              f"/api/v1/source/{hm['id']}/secret/rotate", token=key,
                              body={"key": "new-hmac-secret", "gracePeriodSeconds": 0})
    assert (status, rotated) == (200, {"key": "new-hmac-secret"})
    status, _, refused = call(hookgate, doc, "post", "/api/v1/source/{id}/secret/rotate",
                              f"/api/v1/source/{src['id']}/secret/rotate", token=key)
    assert status == 422

    # The provider-facing door.
    receive = "/in/{source_id}"
    url = f"/in/{src['id']}"
    event = json.dumps({"id": "doc-1", "kind": "doc.made"}).encode()
    ctype = {"Content-Type": "application/json"}
    status, headers, first = call(hookgate, doc, "post", receive, url, raw=event, headers=ctype)
    assert (status, first["status"], headers["hookgate-duplicate"]) == (200, "accepted", "false")
    status, headers, again = call(hookgate, doc, "post", receive, url, raw=event, headers=ctype)
    assert (status, again["status"], headers["hookgate-duplicate"]) == (200, "duplicate", "true")
    assert again["eventId"] == first["eventId"] and again["key"] == first["key"]
    status, _, missing = call(hookgate, doc, "post", receive, url, raw=b'{"kind": "x"}', headers=ctype)
    assert (status, missing["code"]) == (400, "idempotency_key_missing") and "/id" in missing["detail"]
    status, _, toobig = call(hookgate, doc, "post", receive, url, raw=b"x" * (1024 * 1024 + 1))
    assert (status, toobig["code"]) == (413, "payload_too_large")
    status, _, nosig = call(hookgate, doc, "post", receive, f"/in/{hm['id']}", raw=event)
    assert (status, nosig["code"]) == (401, "invalid_signature")
    status, _, unknown = call(hookgate, doc, "post", receive, "/in/src_00000000000000000000000000", raw=event)
    assert (status, unknown["code"]) == (404, "not_found")

    def hmac_post(body: bytes):
        sig = base64.b64encode(hmac_lib.new(b"new-hmac-secret", body, hashlib.sha256).digest()).decode()
        return call(hookgate, doc, "post", receive, f"/in/{hm['id']}", raw=body, headers={"X-Sig": sig, **ctype})

    sink.status = 500
    status, _, failed = hmac_post(json.dumps({"type": "sync.one"}).encode())
    assert (status, failed["code"]) == (502, "forward_failed"), "a sync source answers 502 when an endpoint fails"
    sink.status = 200
    status, _, synced = hmac_post(json.dumps({"type": "sync.one"}).encode())
    assert (status, synced["status"]) == (200, "accepted"), "released by the 502, so the retry is admitted"

    # Inbound events.
    status, _, events = call(hookgate, doc, "get", "/api/v1/source/{id}/event",
                             f"/api/v1/source/{src['id']}/event?limit=10", token=key)
    assert status == 200 and [e["id"] for e in events["data"]] == [first["eventId"]]
    assert events["data"][0]["eventType"] == "doc.made" and events["data"][0]["msgId"].startswith("msg_")
    evt = "/api/v1/source/{id}/event/{event_id}"
    status, _, full = call(hookgate, doc, "get", evt, f"/api/v1/source/{src['id']}/event/{first['eventId']}",
                           token=key)
    assert status == 200 and full["payload"] == {"id": "doc-1", "kind": "doc.made"}
    assert full["contentType"] == "application/json" and full["duplicates"] >= 1
    status, _, nf = call(hookgate, doc, "get", evt, f"/api/v1/source/{src['id']}/event/evt_00000000000000000000000000",
                         token=key)
    assert status == 404
    replay = "/api/v1/source/{id}/event/{event_id}/replay"
    status, _, replayed = call(hookgate, doc, "post", replay,
                               f"/api/v1/source/{src['id']}/event/{first['eventId']}/replay", token=key)
    assert status == 202 and replayed["msgId"] == full["msgId"]
    status, _, sync_events = call(hookgate, doc, "get", "/api/v1/source/{id}/event",
                                  f"/api/v1/source/{hm['id']}/event", token=key)
    assert [e["status"] for e in sync_events["data"]] == ["completed"] and sync_events["data"][0]["msgId"] is None
    status, _, forwarded = call(hookgate, doc, "post", replay,
                                f"/api/v1/source/{hm['id']}/event/{synced['eventId']}/replay", token=key)
    assert (status, forwarded) == (200, {"forwarded": True})

    # An app-portal token is not a tenant key: 403 on these routes.
    portal = svix.authentication.app_portal_access(app.id, AppPortalAccessIn()).token
    status, _, forbidden = call(hookgate, doc, "get", "/api/v1/source", token=portal)
    assert (status, forbidden["code"]) == (403, "forbidden")

    assert call(hookgate, doc, "delete", one, f"/api/v1/source/{src['id']}", token=key)[0] == 204
    assert call(hookgate, doc, "get", one, f"/api/v1/source/{src['id']}", token=key)[0] == 404
    status, _, gone = call(hookgate, doc, "post", receive, url, raw=event, headers=ctype)
    assert status == 404, "a deleted source's URL answers 404"


def test_the_web_uis_own_routes_answer_as_documented(hookgate, doc, tenant):
    tid, key = tenant["id"], tenant["apiKey"]
    status, _, stats = call(hookgate, doc, "get", "/admin/v1/tenant/{id}/stats", f"/admin/v1/tenant/{tid}/stats",
                            token=ADMIN_TOKEN)
    assert status == 200 and stats["failureRate"] == 0 and stats["oldestPending"] is None
    status, _, keys = call(hookgate, doc, "get", "/admin/v1/tenant/{id}/api-key", f"/admin/v1/tenant/{tid}/api-key",
                           token=ADMIN_TOKEN)
    assert status == 200 and [k["id"] for k in keys["data"]] == [tenant["apiKeyId"]]
    status, _, found = call(hookgate, doc, "get", "/api/v1/search", "/api/v1/search?q=nothing-here", token=key)
    assert status == 200 and found == {"query": "nothing-here", "inbound": [], "messages": []}
    status, _, _ = call(hookgate, doc, "get", "/api/v1/search", "/api/v1/search?q=" + "x" * 300, token=key)
    assert status == 422
    status, _, settings = call(hookgate, doc, "get", "/api/v1/settings/portal", token=key)
    assert status == 200 and settings["frameAncestors"] == [] and settings["theme"] == "auto"
    status, _, saved = call(hookgate, doc, "put", "/api/v1/settings/portal", token=key,
                            body={"displayName": "Docs", "theme": "dark", "frameAncestors": ["https://a.example"]})
    assert status == 200 and saved["frameAncestors"] == ["https://a.example"]
    status, _, bad = call(hookgate, doc, "put", "/api/v1/settings/portal", token=key, body={"primaryColor": "red"})
    assert status == 422 and "primaryColor" in json.dumps(bad)
    status, _, switch = call(hookgate, doc, "get", "/api/v1/settings/transformations", token=key)
    assert status == 200 and switch == {"allowed": False, "enabled": True, "active": False}
    status, _, switch = call(hookgate, doc, "put", "/api/v1/settings/transformations", token=key, body={"enabled": False})
    assert status == 200 and switch == {"allowed": False, "enabled": False, "active": False}
    status, _, bad = call(hookgate, doc, "put", "/api/v1/settings/transformations", token=key, body={"enable": True})
    assert status == 422
