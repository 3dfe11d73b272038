"""Svix's ingest log (`GET /ingest/api/v1/source/{id}/log`): the requests a source refused,
with why, their headers (credentials redacted) and body, at most one a second per source."""
import json
import time

from svix.api import IngestSourceIn, SvixConfig

from conftest import call, eventually
from test_ingest import SENDER_SECRET, post_to, signed


def test_a_refused_request_is_logged_with_its_reason_headers_and_body_and_a_flood_is_not(svix, hookgate, tenant):
    src = svix.ingest.source.create(IngestSourceIn(name="Resend", type="resend", config=SvixConfig(secret=SENDER_SECRET)))
    body = json.dumps({"type": "email.sent", "data": {"id": "em_9"}}).encode()
    assert post_to(src.ingest_url, body, signed(body, "msg_log_1")) == 200, "an admitted one is not logged"
    forged = signed(body, "msg_log_2", "whsec_" + "Zm9yZ2VkLXNlY3JldC1mb3ItaW5nZXN0LXRlc3Rz")
    assert post_to(src.ingest_url, body, {**forged, "Authorization": "Bearer private-thing"}) == 401
    for i in range(20):
        post_to(src.ingest_url, body, forged)
    path = f"/ingest/api/v1/source/{src.id}/log"
    logged = eventually(lambda: (r := call(hookgate, "GET", path, key=tenant["apiKey"])[2])["data"] and r)
    time.sleep(0.5)
    logged = call(hookgate, "GET", path, key=tenant["apiKey"])[2]
    assert 1 <= len(logged["data"]) <= 2, f"a flood within a second is logged once: {len(logged['data'])}"
    first = logged["data"][-1]
    assert first["id"].startswith("log") and len(first["id"]) == 25 and first["source_id"] == src.id
    assert first["status_code"] == 401 and "signature" in first["error_text"].lower(), first
    assert first["headers"]["authorization"] == "[redacted]" and "private-thing" not in json.dumps(first)
    assert first["headers"]["svix-id"] == "msg_log_2"
    assert json.loads(first["payload"]) == {"type": "email.sent", "data": {"id": "em_9"}}

    time.sleep(1.1)
    assert post_to(src.ingest_url, b"{}", forged) == 401
    later = eventually(lambda: (r := call(hookgate, "GET", path + "?limit=1", key=tenant["apiKey"])[2])["data"][0]["id"] != first["id"] and r)
    assert later["data"][0]["payload"] == "{}", "newest first"
    assert not later["done"]
    older = call(hookgate, "GET", path + f"?limit=5&iterator={later['iterator']}", key=tenant["apiKey"])[2]
    assert older["data"][-1]["id"] == first["id"]
    assert call(hookgate, "GET", path + "?iterator=msg_x", key=tenant["apiKey"])[0] == 422


def test_another_tenants_source_log_is_not_found(svix, hookgate):
    src = svix.ingest.source.create(IngestSourceIn(name="Resend", type="resend", config=SvixConfig(secret=SENDER_SECRET)))
    other = hookgate.admin("POST", "/admin/v1/tenant", {"name": "other-log"})
    assert call(hookgate, "GET", f"/ingest/api/v1/source/{src.id}/log", key=other["apiKey"])[0] == 404


def test_a_source_keeps_its_newest_hundred_refusals(svix, hookgate, tenant):
    import subprocess
    src = svix.ingest.source.create(IngestSourceIn(name="Resend", type="resend", config=SvixConfig(secret=SENDER_SECRET)))
    db = hookgate.env["DATABASE_URL"]
    subprocess.run(["psql", db, "-qc",
                    f"INSERT INTO source_refusals (tenant_id, source_id, id, status_code, error_text, headers, payload) "
                    f"SELECT '{tenant['id']}', '{src.id}', 'log' || lpad(n::text, 22, '0'), 400, 'old', '{{}}', '' "
                    f"FROM generate_series(1, 150) n"], check=True)
    forged = signed(b"{}", "msg_trim", "whsec_" + "Zm9yZ2VkLXNlY3JldC1mb3ItaW5nZXN0LXRlc3Rz")
    assert post_to(src.ingest_url, b"{}", forged) == 401

    def count():
        return int(subprocess.run(["psql", db, "-Atc", f"SELECT count(*) FROM source_refusals WHERE source_id = '{src.id}'"],
                                  capture_output=True, text=True, check=True).stdout)
    eventually(lambda: count() == 100)
    newest = call(hookgate, "GET", f"/ingest/api/v1/source/{src.id}/log?limit=1", key=tenant["apiKey"])[2]["data"][0]
    assert newest["error_text"] != "old", "the refusal just made is kept"
