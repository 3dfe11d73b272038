"""GET /openapi.json: one OpenAPI 3.1 document generated from the routes themselves
(utoipa), describing every route the binary serves, the Svix-shaped ones included.

Described and served are checked both ways here: every operation the document lists
is probed on the running binary (none may answer the fallback `route not found`), and
every route of the official Svix SDK that the binary serves is in the document. (That
no route is served undescribed holds by construction, since routes are registered
through utoipa-actix-web, and the Rust tidy test keeps it so.) Every response any
Python test receives is checked against the document strictly (openapi_check.py); the
walks below add Hookgate's own routes."""
import base64
import hashlib
import hmac as hmac_lib
import json
import re
import urllib.error
import urllib.request
import uuid

import pytest
import svix
from openapi_spec_validator import OpenAPIV31SpecValidator
from svix.api import AppPortalAccessIn, ApplicationIn, EndpointIn

from conftest import ADMIN_TOKEN, raw_call
from openapi_check import METHODS, resolve
from test_sdk_coverage import PLACEHOLDERS, sdk_routes

ZERO = "0" * 26
# A dummy for each path parameter: the handlers answer `… not found`, never `route not found`.
DUMMIES = {**PLACEHOLDERS, "tenant_id": f"tnt_{ZERO}", "key_id": f"key_{ZERO}", "event_id": f"evt_{ZERO}",
           "integ_id": f"integ_{ZERO}", "destination_id": f"ep_{ZERO}", "sink_id": f"ep_{ZERO}",
           "consumer_id": "placeholder", "token": "placeholder"}


@pytest.fixture(scope="module")
def doc(hookgate):
    status, headers, raw = raw_call(hookgate, "get", "/openapi.json")
    assert status == 200
    assert headers["content-type"].startswith("application/json")
    return json.loads(raw)


def call(hookgate, doc, method, template, path=None, token=None, **kw):
    """Makes the request (raw_call checks the answer against the document) and returns
    (status, headers, body): the parsed JSON, or the text."""
    status, headers, raw = raw_call(hookgate, method, path or template, key=token, **kw)
    if headers.get("content-type", "").startswith("application/json"):
        return status, headers, json.loads(raw)
    return status, headers, raw.decode() if raw else None


def operations(doc):
    for path, item in doc["paths"].items():
        for method in [m for m in item if m in METHODS]:
            yield method, path, item[method]


def shape(path):
    """A template with its parameter names erased: `/app/{}/msg/{}`."""
    return re.sub(r"\{[^}]*\}", "{}", path)


# --- the document itself -------------------------------------------------------------------------


def test_the_document_is_valid_openapi_3_1_and_describes_the_whole_api(doc):
    assert doc["openapi"].startswith("3.1"), doc["openapi"]
    OpenAPIV31SpecValidator(doc).validate()  # raises with what is wrong
    paths = set(doc["paths"])
    for needed in ("/api/v1/app", "/api/v1/app/{app_id}/msg", "/api/v1/app/{app_id}/endpoint",
                   "/api/v1/auth/app-portal-access/{app_id}", "/ingest/api/v1/source", "/admin/v1/tenant",
                   "/in/{source_id}", "/healthz", "/openapi.json", "/docs/"):
        assert needed in paths, f"{needed} is not described"
    assert len(list(operations(doc))) >= 150, "every route is described"


def test_every_operation_has_a_unique_id_a_tag_its_path_parameters_and_its_authentication(doc):
    ids = []
    assert doc["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert doc["security"] == [{"bearer": []}]
    for method, path, op in operations(doc):
        ids.append(op["operationId"])
        assert op.get("tags"), f"{method.upper()} {path} has no tag"
        params = [resolve(doc, p)["name"] for p in op.get("parameters", [])]
        for name in re.findall(r"\{([^}]+)\}", path):
            assert name in params, f"{method.upper()} {path} does not describe its path parameter {name}"
        public = path.startswith(("/in/", "/healthz", "/readyz", "/openapi.json", "/docs", "/api/v1/health",
                                  "/portal", "/console", "/ui/"))
        if public:
            assert op.get("security") == [{}], f"{method.upper()} {path} is public and should say so"
        else:
            assert "security" not in op, f"{method.upper()} {path} takes the bearer key"
        assert {"4XX", "5XX"} <= set(op["responses"]), f"{method.upper()} {path} lacks the error answers"
        for status, res in op["responses"].items():
            request_id = res.get("headers", {}).get("X-Request-Id", {})
            assert request_id.get("required") is True, f"{method.upper()} {path} {status}: no X-Request-Id"
        # Where a quota or rate can refuse, the 429 is described with its Retry-After.
        if (path.startswith(("/api/", "/ingest/")) and not public) or (method == "post" and path.startswith("/in/")):
            later = op["responses"].get("429", {})
            assert later.get("headers", {}).get("Retry-After", {}).get("required") is True, f"{method.upper()} {path}"
            assert later["headers"]["Retry-After"]["schema"] == {"type": "integer", "minimum": 1}
        else:
            # The operator has no quota; a public route outside the door, no rate.
            assert "429" not in op["responses"], f"{method.upper()} {path} answers no 429"
        if path.startswith("/in/") and method == "post":
            duplicate = op["responses"]["200"]["headers"]["Hookgate-Duplicate"]
            assert duplicate["schema"]["type"] == "boolean" and not duplicate.get("required")
        headers = [resolve(doc, p)["name"] for p in op.get("parameters", []) if resolve(doc, p)["in"] == "header"]
        if method == "post" and path.startswith(("/api/", "/admin/", "/ingest/")):
            assert "Idempotency-Key" in headers, f"POST {path} does not describe Idempotency-Key"
            for status in [s for s in op["responses"] if s.startswith("2")]:
                assert "Idempotent-Replayed" in op["responses"][status]["headers"], f"POST {path} {status}"
        ok = op["responses"].get("200", {}).get("content", {}).get("application/json", {}).get("schema", {})
        if method == "get" and ok.get("$ref", "").startswith("#/components/schemas/Page_"):
            query = {resolve(doc, p)["name"] for p in op.get("parameters", []) if resolve(doc, p)["in"] == "query"}
            assert {"limit", "iterator"} <= query, f"GET {path} lists but does not describe its paging"
        assert any(c[0] in "23" for c in op["responses"]), f"{method.upper()} {path} has no success answer"
    search = {p["name"]: p for p in doc["paths"]["/api/v1/search"]["get"]["parameters"]}
    assert search["q"]["in"] == "query" and search["q"]["required"] is True
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, f"operationIds used twice: {dupes}"


def test_every_described_operation_is_served(hookgate, doc, tenant):
    unserved = []
    for method, path, _ in operations(doc):
        concrete = re.sub(r"\{(\w+)\}", lambda m: DUMMIES.get(m.group(1), "placeholder"), path)
        token = ADMIN_TOKEN if path.startswith("/admin/") else tenant["apiKey"]
        status, _, raw = raw_call(hookgate, method, concrete, key=token,
                                  body={} if method in ("post", "put", "patch") else None)
        detail = json.loads(raw).get("detail") if raw[:1] == b"{" else None
        if status == 405 or (status == 404 and detail == "route not found"):
            unserved.append(f"{method.upper()} {path}")
    assert not unserved, f"described but not served: {unserved}"


def test_every_route_of_the_official_sdk_that_is_served_is_described(hookgate, doc, tenant):
    described = {(m.upper(), shape(p)) for m, p, _ in operations(doc)}
    undescribed = []
    for method, path in sdk_routes():
        concrete = re.sub(r"\{(\w+)\}", lambda m: PLACEHOLDERS.get(m.group(1), "placeholder"), path)
        status, _, raw = raw_call(hookgate, method, concrete, key=tenant["apiKey"],
                                  body={} if method in ("POST", "PUT", "PATCH") else None)
        detail = json.loads(raw).get("detail") if raw[:1] == b"{" else None
        served = not (status == 404 and detail == "route not found")
        if served and (method, shape(path)) not in described:
            undescribed.append(f"{method} {path}")
    assert not undescribed, f"served but not described: {undescribed}"


def test_the_page_is_served_by_the_binary_and_reads_this_document(hookgate):
    status, headers, page = raw_call(hookgate, "get", "/docs/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b"swagger" in page.lower()
    for ref in re.findall(rb'(?:src|href)="([^"]+)"', page):
        assert not ref.startswith((b"http:", b"https:", b"//")), f"the page loads {ref!r} from elsewhere"
    status, _, init = raw_call(hookgate, "get", "/docs/swagger-initializer.js")
    assert status == 200 and b"/openapi.json" in init


# --- documented responses, for real ----------------------------------------------------------------


def test_admin_tenant_responses_match_the_document(hookgate, doc):
    admin = ADMIN_TOKEN
    uid = "doc-" + uuid.uuid4().hex[:8]
    key = "create-" + uuid.uuid4().hex
    status, headers, created = call(hookgate, doc, "post", "/admin/v1/tenant", token=admin,
                                    body={"name": "Doc Co", "uid": uid}, headers={"Idempotency-Key": key})
    assert status == 201
    schema = resolve(doc, doc["paths"]["/admin/v1/tenant"]["post"]["responses"]["201"]["content"]["application/json"])
    parts = schema["schema"].get("allOf", [schema["schema"]])
    required = {r for part in parts for r in part.get("required", [])}
    assert {"id", "name", "apiKey", "apiKeyId"} <= required, required
    assert required <= set(created), "the documented required fields are all there"
    assert created["id"].startswith("tnt_") and created["apiKey"].startswith("hgk_" + created["id"] + "_")
    assert created["uid"] == uid and created["disabled"] is False

    status, headers, replay = call(hookgate, doc, "post", "/admin/v1/tenant", token=admin,
                                   body={"name": "Doc Co", "uid": uid}, headers={"Idempotency-Key": key})
    assert (status, headers.get("idempotent-replayed"), replay) == (201, "true", created)
    # Its answer is a credential: another body under the key is refused, not answered with it.
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


def test_the_checking_proxy_passes_described_answers_and_refuses_others(hookgate, doc, tenant):
    """The JavaScript SDK's answers are checked through `CheckingProxy`: shown here
    with a described answer from Hookgate, and an undescribed one from an impostor
    that answers on Hookgate's routes with a field the document does not have."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import openapi_check

    proxy = openapi_check.CheckingProxy(hookgate.url)
    try:
        req = urllib.request.Request(proxy.url + "/api/v1/app", headers={"Authorization": f"Bearer {tenant['apiKey']}"})
        with urllib.request.urlopen(req, timeout=10) as res:
            assert res.status == 200 and json.loads(res.read())["data"] == []
        # A redirect comes back as it is (checked as the 308 it is), and the client follows it.
        with urllib.request.urlopen(proxy.url + "/docs", timeout=10) as res:
            assert (res.status, res.url) == (200, proxy.url + "/docs/")
        assert proxy.forwarded == 3
    finally:
        proxy.close()

    class Impostor(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [], "done": True, "iterator": None, "prevIterator": None, "extra": 1}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Request-Id", "r1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    impostor = ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    impostor_url = f"http://127.0.0.1:{impostor.server_address[1]}"
    openapi_check.BASES.add(impostor_url)
    proxy = openapi_check.CheckingProxy(impostor_url)
    seen = len(openapi_check.MISMATCHES)
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(proxy.url + "/api/v1/app", timeout=10)
        assert refused.value.code == 502 and b"extra" in refused.value.read()
        assert len(openapi_check.MISMATCHES) == seen + 1 and "extra" in openapi_check.MISMATCHES[-1]
    finally:
        # The impostor's mismatch is this test's point, not a failure of it.
        del openapi_check.MISMATCHES[seen:]
        openapi_check.BASES.discard(impostor_url)
        proxy.close()
        impostor.shutdown()
        impostor.server_close()
