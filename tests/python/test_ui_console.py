"""The console as an operator and a tenant use it, in Chromium at 1400 and 390 px
(the browser, the checks on every page and the screenshots are test_ui.py's): a
tenant's page with its usage against its quotas, settings and labelled keys,
its applications read as its customers see them (and nothing changeable), a
confirmation before disabling, the fleet's health, the audit log; and a tenant
creating an event type, an application and an endpoint and minting a read-only
portal link with an expiry."""
import time
import uuid

from svix.api import ApplicationIn, EndpointIn, MessageIn

from conftest import ADMIN_TOKEN, Sink, call, eventually, free_port
from test_ui import browser, watch  # noqa: F401 (fixtures)

WIDTHS = [(1400, 900), (390, 844)]


def sign_in(w, hookgate, credential, heading):
    page = w.page
    page.goto(f"{hookgate.url}/console")
    page.get_by_label("Admin token or tenant API key").fill(credential)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name=heading).first.wait_for()
    return page


def admin(hookgate, method, path, body=None):
    status, _, got = call(hookgate, method, path, ADMIN_TOKEN, body)
    return status, got


def test_the_operator_looks_into_a_tenant_sees_its_failing_endpoint_and_log_and_can_change_nothing_there(
        hookgate, tenant, svix, sink, watch):
    status, _ = admin(hookgate, "PATCH", f"/admin/v1/tenant/{tenant['id']}", {"quotas": {"messagesPerDay": 40}})
    assert status == 200
    app = svix.application.create(ApplicationIn(name="inspected-" + uuid.uuid4().hex[:6]))
    failing = Sink()
    failing.status = 500
    try:
        svix.endpoint.create(app.id, EndpointIn(url=sink.url, description="the warehouse"))
        svix.endpoint.create(app.id, EndpointIn(url=failing.url, description="answers 500"))
        for i in range(4):
            svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": i}, event_id=f"evt-look-{i}"))
        sink.wait_for(4)
        eventually(lambda: len(failing.received) >= 4)
        for width, height in WIDTHS:
            w = watch(viewport={"width": width, "height": height})
            page = sign_in(w, hookgate, ADMIN_TOKEN, "Tenants")
            page.get_by_role("button", name=tenant["name"], exact=True).first.click()
            page.get_by_role("heading", name="Against its quotas").wait_for()
            messages_today = page.locator(".figure", has_text="Messages today")
            assert "of 40" in messages_today.inner_text(), messages_today.inner_text()
            meter = messages_today.get_by_role("meter")
            assert int(meter.get_attribute("aria-valuenow")) >= 4
            w.axe(f"a tenant's overview at {width} px")
            w.no_sideways(f"a tenant's overview at {width} px")
            w.shot(f"console-tenant-overview-{width}")
            page.get_by_role("tab", name="Applications").click()
            page.get_by_role("button", name=app.name).click()
            card = page.locator("article.endpoint-card", has=page.get_by_role("button", name=failing.url))
            card.get_by_text("Failing", exact=True).wait_for()
            assert "server error (HTTP 500)" in card.inner_text()
            assert page.get_by_role("button", name="Add endpoint").count() == 0, "nothing to change here"
            # An endpoint's settings, read: no secret, no test, no transformation's code.
            page.get_by_role("button", name=failing.url).click()
            page.get_by_role("tablist", name="Endpoint sections").get_by_role("tab", name="Settings").click()
            page.get_by_role("region", name="Endpoint settings").wait_for()
            assert page.get_by_role("button", name="Reveal secret").count() == 0
            assert page.get_by_role("tab", name="Testing").count() == 0
            assert page.get_by_role("tab", name="Transformation").count() == 0
            page.get_by_role("button", name="← All endpoints").click()
            card.get_by_text("Failing", exact=True).wait_for()
            w.axe(f"a tenant's endpoints read by the operator at {width} px")
            w.no_sideways(f"a tenant's endpoints read by the operator at {width} px")
            w.shot(f"console-inspect-endpoints-{width}")
            page.get_by_role("button", name="Messages", exact=True).click()
            page.locator("details.message").nth(3).wait_for()
            page.get_by_label("Message id or event id").fill("evt-look-2")
            page.get_by_role("button", name="Find").click()
            found = page.locator("details.message[open]")
            found.locator("section.delivery .attempt").first.wait_for()
            assert "evt-look-2" in found.inner_text() and "HTTP 500" in found.inner_text()
            assert page.get_by_role("button", name="Resend").count() == 0
            w.no_sideways(f"a tenant's log read by the operator at {width} px")
            w.clean()
        # The tenant's audit log names each of these reads.
        status, _, log = call(hookgate, "GET", "/api/v1/audit?limit=250", tenant["apiKey"])
        assert status == 200
        reads = [e["path"] for e in log["data"] if e["actor"] == "operator" and e["method"] == "GET"]
        assert f"/api/v1/app/{app.id}/msg/evt-look-2" in reads and "/api/v1/app" in reads, reads
    finally:
        failing.server.shutdown()


def test_the_operator_edits_settings_labels_keys_and_must_confirm_before_disabling_a_tenant(hookgate, watch):
    name = "settings-" + uuid.uuid4().hex[:6]
    status, t = admin(hookgate, "POST", "/admin/v1/tenant", {"name": name})
    assert status == 201
    first_key = t["apiKey"]
    for width, height in WIDTHS:
        w = watch(viewport={"width": width, "height": height})
        page = sign_in(w, hookgate, ADMIN_TOKEN, "Tenants")
        page.get_by_role("button", name=name, exact=True).click()
        page.get_by_role("tab", name="Settings").click()
        page.get_by_label("Keep messages (days)").fill(str(10 + width % 7))
        page.get_by_label("Messages a day").fill("5000")
        page.get_by_label("Run endpoint transformations").check()
        w.axe(f"a tenant's settings at {width} px")
        w.no_sideways(f"a tenant's settings at {width} px")
        w.shot(f"console-tenant-settings-{width}")
        page.get_by_role("button", name="Save settings").click()
        page.get_by_text("Settings saved.").wait_for()
        _, got = admin(hookgate, "GET", f"/admin/v1/tenant/{t['id']}")
        assert got["retention"]["messageDays"] == 10 + width % 7
        assert got["quotas"]["messagesPerDay"] == 5000 and got["transformations"] is True
        assert got["quotas"]["apiRequestsPerSecond"] is None, "an empty field keeps the default"
        # A labelled key, shown once; then relabelled in its row.
        page.get_by_role("tab", name="API keys").click()
        label = f"deploy bot {width}"
        page.get_by_label("Label of the new key").fill(label)
        page.get_by_role("button", name="Issue a new key").click()
        new_key = page.locator("#new-api-key").inner_text()
        assert new_key.startswith("hgk_") and call(hookgate, "GET", "/api/v1/app", new_key)[0] == 200
        _, keys = admin(hookgate, "GET", f"/admin/v1/tenant/{t['id']}/api-key")
        kid = [k["id"] for k in keys["data"] if k["label"] == label][0]
        box = page.get_by_label(f"Label of key {kid}")
        assert box.input_value() == label
        box.fill(f"{label} (renamed)")
        page.locator("tr", has=box).get_by_role("button", name="Save label").click()
        page.get_by_text("relabelled.").wait_for()
        _, keys = admin(hookgate, "GET", f"/admin/v1/tenant/{t['id']}/api-key")
        assert f"{label} (renamed)" in [k["label"] for k in keys["data"]]
        w.axe(f"a tenant's keys at {width} px")
        w.shot(f"console-tenant-keys-{width}")
        # Disabling asks first: cancelled, nothing changes.
        page.get_by_role("button", name="Disable", exact=True).click()
        dialog = page.get_by_role("dialog", name=f"Disable {name}?")
        dialog.wait_for()
        assert "stop answering" in dialog.inner_text()
        w.axe(f"the confirmation at {width} px")
        w.shot(f"console-confirm-disable-{width}")
        dialog.get_by_role("button", name="Cancel").click()
        assert call(hookgate, "GET", "/api/v1/app", first_key)[0] == 200
        page.get_by_role("button", name="Disable", exact=True).click()
        page.get_by_role("dialog").get_by_role("button", name=f"Disable {name}").click()
        page.get_by_text(f"{name} is disabled.").wait_for()
        assert call(hookgate, "GET", "/api/v1/app", first_key)[0] == 401
        page.get_by_role("button", name="Enable", exact=True).click()
        page.get_by_text(f"{name} is enabled.").wait_for()
        assert call(hookgate, "GET", "/api/v1/app", first_key)[0] == 200
        # Each change is in the tenant's audit log, in the console too.
        page.get_by_role("tab", name="Audit log").click()
        log = page.get_by_role("region", name="Audit log")
        log.get_by_text("/api-key").first.wait_for()
        text = log.inner_text()
        assert "PATCH" in text and "The operator" in text
        w.axe(f"a tenant's audit log at {width} px")
        w.shot(f"console-audit-{width}")
        w.clean()


def test_the_fleet_health_page_shows_postgres_redis_the_backlog_and_the_workers(hookgate, tenant, svix, sink, watch):
    app = svix.application.create(ApplicationIn(name="backlog"))
    # One a second: a backlog that drains slowly enough to be seen at both widths.
    svix.endpoint.create(app.id, EndpointIn(url=sink.url, throttle_rate=1))
    for i in range(60):
        svix.message.create(app.id, MessageIn(event_type="e", payload={"n": i}))
    eventually(lambda: admin(hookgate, "GET", "/admin/v1/health")[1]["backlog"]["waiting"] >= 3)
    for width, height in WIDTHS:
        w = watch(viewport={"width": width, "height": height})
        page = sign_in(w, hookgate, ADMIN_TOKEN, "Tenants")
        page.get_by_role("button", name="Fleet health").click()
        page.get_by_role("heading", name="Delivery workers").wait_for()
        waiting = page.locator(".figure", has_text="Deliveries waiting").locator("strong").inner_text()
        assert int(waiting.replace(",", "")) >= 3
        assert "Up" in page.locator(".figure", has_text="Postgres").inner_text()
        def workers_listed():
            page.get_by_role("button", name="Refresh").click()
            page.get_by_role("heading", name="Delivery workers").wait_for()
            return page.get_by_role("region", name="Delivery workers").count() == 1
        eventually(workers_listed)
        assert page.get_by_role("region", name="Delivery workers").locator("tbody tr").count() >= 1
        w.axe(f"the fleet's health at {width} px")
        w.no_sideways(f"the fleet's health at {width} px")
        w.shot(f"console-fleet-{width}")
        w.clean()


def test_a_tenant_creates_an_event_type_an_application_an_endpoint_and_a_read_only_link_with_an_expiry(
        hookgate, tenant, sink, watch):
    suffix = uuid.uuid4().hex[:6]
    for width, height in WIDTHS:
        w = watch(viewport={"width": width, "height": height})
        page = sign_in(w, hookgate, tenant["apiKey"], "Applications")
        # An event type with its schema.
        page.get_by_role("tab", name="Event types").click()
        et = f"invoice.paid{width}{suffix}"
        page.get_by_label("Name", exact=True).fill(et)
        page.get_by_label("Description", exact=True).fill("An invoice was paid")
        page.get_by_label("JSON Schema (optional)").fill('{"type": "object", "properties": {"amount": {"type": "integer"}}}')
        page.get_by_role("button", name="Create event type").click()
        page.get_by_text(f"Created {et}.").wait_for()
        status, _, got = call(hookgate, "GET", f"/api/v1/event-type/{et}", tenant["apiKey"])
        assert status == 200 and got["schemas"]["1"]["properties"]["amount"]["type"] == "integer"
        # Its schema edited in its row.
        page.get_by_role("row", name=et).locator("summary").click()
        page.get_by_label(f"JSON Schema of {et}").fill('{"type": "object", "required": ["amount"]}')
        page.get_by_role("row", name=et).get_by_role("button", name="Save schema").click()
        page.get_by_text(f"The schema of {et} is saved.").wait_for()
        status, _, got = call(hookgate, "GET", f"/api/v1/event-type/{et}", tenant["apiKey"])
        assert got["schemas"]["1"] == {"type": "object", "required": ["amount"]}, got
        w.axe(f"event types at {width} px")
        w.no_sideways(f"event types at {width} px")
        # An application, then an endpoint in it through the portal's own form.
        page.get_by_role("tab", name="Applications").click()
        name = f"shop {width} {suffix}"
        page.get_by_label("Name", exact=True).fill(name)
        page.get_by_role("button", name="Create application").click()
        page.get_by_text(f"Created {name}.").wait_for()
        card = page.locator("details.app", has_text=name)
        card.locator("summary").click()
        w.axe(f"an application's card at {width} px")
        w.no_sideways(f"the applications at {width} px")
        w.shot(f"console-tenant-apps-{width}")
        # A read-only link valid for an hour.
        card.get_by_label("Read-only").check()
        card.get_by_label("Valid for").select_option(label="1 hour")
        minted_at = time.time()
        card.get_by_role("button", name="Make a portal link").click()
        link = card.locator("code.any").inner_text()
        assert "/portal/" in link and "#key=" in link
        token = link.split("#key=")[1]
        status, _, me = call(hookgate, "GET", "/api/v1/auth/whoami", token)
        assert status == 200 and me["readOnly"] is True
        status, _, _ = call(hookgate, "POST", f"/api/v1/app/{me['appId']}/endpoint", token, {"url": sink.url})
        assert status == 403
        # The fourth line of the token's claims is its expiry (Unix seconds).
        expiry = int(bytes.fromhex(token.split("_")[1]).decode().split("\n")[3])
        assert 3500 < expiry - minted_at < 3700, (expiry, minted_at)
        card.get_by_role("button", name="Open endpoints and messages").click()
        page.get_by_role("button", name="Add endpoint").click()
        page.get_by_label("Endpoint URL").fill(sink.url)
        page.get_by_role("button", name="Create endpoint").click()
        page.get_by_role("tab", name="Settings").wait_for()
        status, _, eps = call(hookgate, "GET", f"/api/v1/app/{me['appId']}/endpoint", tenant["apiKey"])
        assert [e["url"] for e in eps["data"]] == [sink.url]
        w.no_sideways(f"an application's endpoint in the console at {width} px")
        w.shot(f"console-tenant-endpoint-{width}")
        # The tenant's own audit log lists what it did, by key.
        page.get_by_role("tab", name="Audit log").click()
        page.get_by_role("region", name="Audit log").get_by_text("/api/v1/event-type").first.wait_for()
        w.axe(f"the tenant's audit log at {width} px")
        w.clean()
