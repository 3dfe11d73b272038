"""The web UI in a real browser: Debian's chromium (apt; .ci/run installs it),
driven by Playwright with `executable_path`, against a real Hookgate on loopback.

Each test watches the page: any dialog (an injected `alert`), any request that
is not to Hookgate itself, any script error or CSP violation fails it. axe-core
(from npm, tests/node) checks every view for serious accessibility violations.
Screenshots of the portal go to target/ui-screenshots/.
"""
import json
import shutil
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest
from svix.api import AppPortalAccessIn, ApplicationIn, EndpointIn, EventTypeIn, MessageIn

import openapi_check
from conftest import ADMIN_TOKEN, ROOT, call, eventually, raw_call
from test_ingress_providers import node_sign

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
AXE = ROOT / "tests" / "node" / "node_modules" / "axe-core" / "axe.min.js"
SHOTS = ROOT / "target" / "ui-screenshots"
HOSTILE = '<script>alert("x1")</script>"><img src=x onerror=alert("x2")>'


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed: apt-get install chromium (.ci/run does)")
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: npm ci in tests/node (make test does)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


class Watch:
    """A browser context that records what a page must never do."""

    def __init__(self, browser, hookgate, **options):
        self.hookgate = hookgate
        self.dialogs, self.foreign, self.errors = [], [], []
        # JSON answers the browser was given, each held to its schema in the API document.
        self.checked = 0
        self.closing = False
        self.context = browser.new_context(**options)
        # axe-core goes in by the DevTools protocol: page CSP does not apply to it.
        self.context.add_init_script(path=str(AXE))
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))

    def _route(self, route):
        url = route.request.url
        # `<img src=x>`, were it ever markup, would ask for …/x of this page.
        if url.startswith(self.hookgate.url + "/") and not urlparse(url).path.endswith("/x"):
            # Fetched here, not let through, so that what the browser is given is checked
            # against the API document like any answer the suite receives.
            from playwright.sync_api import Error as PlaywrightError

            try:
                res = route.fetch(max_redirects=0)
                body = res.body()
            except PlaywrightError as e:
                if self.closing or self.page.is_closed():
                    return  # the test is over: nothing waits for this answer
                # As a request let through would have failed: the page sees a network
                # error, and the test learns why.
                self.errors.append(f"{route.request.method} {url}: {e}")
                route.abort("failed")
                return
            parts = urlparse(url)
            # A mismatch is recorded: the test fails at its end (conftest's autouse fixture).
            held, _ = openapi_check.check_kept(self.hookgate.url, route.request.method,
                                               parts.path + (f"?{parts.query}" if parts.query else ""),
                                               res.status, {k.lower(): v for k, v in res.headers.items()}, body)
            self.checked += held
            route.fulfill(response=res)
        else:
            self.foreign.append(url)
            route.abort()

    def axe(self, label):
        found = self.page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']}))
            .violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
            .map(v => v.id + ': ' + v.nodes.map(n => n.target.join(' ')).slice(0, 3).join(', '))""")
        assert not found, f"axe-core on {label}: {found}"

    def no_sideways(self, label):
        """Nothing sticks out past the viewport's right edge (names what does)."""
        width = self.page.viewport_size["width"]
        out = self.page.evaluate("""(w) => [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > w + 0.5
                    && !(e.parentElement && e.parentElement.closest('.table-wrap, pre')))
            .map(e => e.tagName.toLowerCase() + (e.className ? '.' + e.className : '') + ' ('
                 + Math.round(e.getBoundingClientRect().right) + ' px)').slice(0, 5)""", width)
        assert self.page.evaluate("document.documentElement.scrollWidth") <= width and not out, \
            f"sideways scrolling at {width} px on {label}: {out}"

    def clean(self):
        assert not self.dialogs, f"a dialog opened: {self.dialogs}"
        assert not self.foreign, f"requests left Hookgate: {self.foreign}"
        assert not self.errors, f"script errors or CSP violations: {self.errors}"
        assert self.checked, "no JSON answer the browser was given was held to the API document"

    def shot(self, name):
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self):
        # Requests still out go unanswered, and their handlers' errors are dropped, so
        # that a later test's Playwright call does not raise them (seen once in CI:
        # "Fetch response has been disposed" while the next test opened its context).
        self.closing = True
        self.context.unroute_all(behavior="ignoreErrors")
        self.context.close()


@pytest.fixture
def watch(browser, hookgate):
    made = []

    def make(**options):
        w = Watch(browser, hookgate, **options)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


class AnsweringSink:
    """A loopback receiver that answers every request with `body`."""

    def __init__(self, body: bytes):
        self.received = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                data = self.rfile.read(int(self.headers.get("content-length", 0)))
                sink.received.append({"headers": {k.lower(): v for k, v in self.headers.items()}, "body": data})
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, n, timeout=20.0):
        deadline = time.time() + timeout
        while time.time() < deadline and len(self.received) < n:
            time.sleep(0.05)
        assert len(self.received) >= n, f"sink got {len(self.received)} of {n}"
        return self.received


def portal_url(svix, app_id):
    access = svix.authentication.app_portal_access(app_id, AppPortalAccessIn())
    return access.url, access.token


def open_messages(w, until_text, tries=60):
    """Opens the Messages tab and filters until `until_text` shows."""
    page = w.page
    page.get_by_role("tab", name="Messages").click()
    for _ in range(tries):
        page.get_by_role("button", name="Filter").click()
        page.wait_for_timeout(250)
        if page.locator("details.message summary", has_text=until_text).count():
            return
    raise AssertionError(f"no message showed {until_text!r}")


# --- the customer's portal ------------------------------------------------------------------------


def test_a_customer_adds_an_endpoint_sees_the_delivery_and_resends_it_with_the_same_webhook_id(
        hookgate, tenant, svix, sink, watch):
    app = svix.application.create(ApplicationIn(name="Acme shop"))
    svix.event_type.create(EventTypeIn(name="order.paid", description="An order was paid",
                                       schemas={"1": {"type": "object", "examples": [{"order": 42, "paid": True}]}}))
    url, token = portal_url(svix, app.id)
    assert url.startswith(f"{hookgate.url}/portal/{tenant['id']}/{app.id}#key=") and url.endswith(token)

    w = watch(viewport={"width": 1280, "height": 900})
    page = w.page
    page.goto(url)
    page.get_by_role("heading", name="Endpoints").wait_for()
    assert "key=" not in page.url, "the token stays out of the address bar"
    page.get_by_text("No endpoints yet").wait_for()
    w.axe("the empty endpoint list")

    page.get_by_role("button", name="Add endpoint").click()
    page.get_by_label("Endpoint URL").fill(sink.url)
    page.get_by_label("Description").fill("Orders to the warehouse")
    page.get_by_text("Example payload of order.paid").click()
    assert '"order": 42' in page.locator("details pre").first.inner_text()
    page.get_by_label("order.paid").check()
    w.axe("the endpoint form")
    page.get_by_role("button", name="Create endpoint").click()
    page.get_by_text("Endpoint created.").wait_for()
    ep = svix.endpoint.list(app.id).data[0]
    assert (ep.url, ep.description, ep.event_types) == (sink.url, "Orders to the warehouse", ["order.paid"])

    msg = svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"order": 7, "paid": True}))
    first = sink.wait_for(1)[0]
    assert first["headers"]["webhook-id"] == msg.id

    open_messages(w, "Delivered")
    row = page.locator("details.message", has_text=msg.id)
    row.locator("summary").click()
    attempt = row.locator(".attempt").first
    attempt.wait_for()
    assert "HTTP 200" in attempt.inner_text()
    headers = attempt.locator("table").inner_text()
    assert "webhook-id" in headers and msg.id in headers and "webhook-signature" in headers
    w.axe("the message log")
    w.shot("portal-message-log-light")

    row.get_by_role("button", name="Resend").click()
    row.get_by_text("Resend scheduled").wait_for()
    second = sink.wait_for(2)[1]
    assert second["headers"]["webhook-id"] == msg.id, "a resend keeps the webhook-id"
    assert second["body"] == first["body"]

    page.get_by_role("tab", name="Overview").click()
    page.locator("figure.chart svg").wait_for()
    assert "2 attempts delivered" in page.locator("figure.chart svg").get_attribute("aria-label")
    w.axe("the overview and its chart")
    w.shot("portal-chart-light")
    page.get_by_role("button", name="← All endpoints").click()
    page.get_by_role("button", name=sink.url).wait_for()
    w.axe("the endpoint list")
    w.shot("portal-endpoints-light")

    # The secret: revealed on request, and it is the one the API returns.
    page.get_by_role("button", name=sink.url).click()
    page.get_by_role("tab", name="Settings").click()
    page.get_by_role("button", name="Reveal secret").click()
    assert page.locator("#secret-value").inner_text() == svix.endpoint.get_secret(app.id, ep.id).key
    w.axe("the endpoint settings")
    w.clean()

    # Dark, as the viewer's system asks (the tenant's theme is `auto`).
    dark = watch(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    _, token = portal_url(svix, app.id)
    dark.page.goto(f"{hookgate.url}/portal/{tenant['id']}/{app.id}#key={token}")
    dark.page.get_by_role("button", name=sink.url).wait_for()
    assert dark.page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
    dark.axe("the endpoint list, dark")
    dark.shot("portal-endpoints-dark")
    dark.page.get_by_role("button", name=sink.url).click()
    dark.page.locator("figure.chart svg").wait_for()
    dark.shot("portal-chart-dark")
    open_messages(dark, "Delivered")
    dark.page.locator("details.message summary").first.click()
    dark.page.locator(".attempt").first.wait_for()
    dark.axe("the message log, dark")
    dark.shot("portal-message-log-dark")
    dark.clean()


def test_the_portal_works_at_360_pixels_wide_and_its_test_event_and_secret_rotation_go_through_the_api(
        hookgate, tenant, svix, sink, watch):
    app = svix.application.create(ApplicationIn(name="narrow"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url, description="phone"))
    old_secret = svix.endpoint.get_secret(app.id, ep.id).key
    url, _ = portal_url(svix, app.id)
    w = watch(viewport={"width": 360, "height": 740})
    page = w.page
    page.goto(url)
    page.get_by_role("button", name=sink.url).click()
    page.get_by_role("tab", name="Testing").click()
    page.get_by_role("button", name="Send test event").click()
    page.get_by_text("Test event sent").wait_for()
    got = sink.wait_for(1)[0]
    assert json.loads(got["body"]) == {"success": True}
    w.no_sideways("the test event's notice")
    open_messages(w, "Delivered")
    page.locator("details.message summary").first.click()
    page.locator(".attempt").first.wait_for()
    w.no_sideways("the message log")
    page.get_by_role("tab", name="Settings").click()
    page.get_by_role("button", name="Rotate secret…").click()
    page.get_by_role("button", name="Yes, rotate it").click()
    page.get_by_text("Rotated.").wait_for()
    assert svix.endpoint.get_secret(app.id, ep.id).key != old_secret
    w.no_sideways("the endpoint settings")
    w.axe("the settings at 360 px")
    w.shot("portal-settings-360px")
    w.clean()


def test_names_payloads_and_endpoint_responses_with_markup_render_as_text(hookgate, tenant, svix, watch):
    hostile_sink = AnsweringSink(HOSTILE.encode())
    svix.event_type.create(EventTypeIn(name="evil.type", description=HOSTILE,
                                       schemas={"1": {"examples": [{"html": HOSTILE}]}}))
    app = svix.application.create(ApplicationIn(name=HOSTILE))
    svix.endpoint.create(app.id, EndpointIn(url=hostile_sink.url, description=HOSTILE))
    msg = svix.message.create(app.id, MessageIn(event_type="evil.type", payload={"note": HOSTILE}))
    hostile_sink.wait_for(1)
    url, _ = portal_url(svix, app.id)
    # Without the page's CSP too: escaping, not the policy, is what must hold.
    w = watch(bypass_csp=True)
    page = w.page
    page.goto(url)
    page.get_by_text(HOSTILE).first.wait_for()
    page.get_by_role("button", name=hostile_sink.url).click()
    open_messages(w, "Delivered")
    page.locator("details.message summary").first.click()
    page.locator(".attempt").first.wait_for()
    assert HOSTILE in page.locator("pre.response").first.inner_text()
    assert json.loads(page.locator("details.message pre").first.inner_text()) == {"note": HOSTILE}
    page.get_by_role("tab", name="Settings").click()
    page.get_by_text("Example payload of evil.type").click()
    assert HOSTILE in page.locator("fieldset").inner_text()
    # The console's search shows the same message to the tenant.
    c = watch(bypass_csp=True)
    c.page.goto(f"{hookgate.url}/console")
    c.page.get_by_label("Admin token or tenant API key").fill(tenant["apiKey"])
    c.page.get_by_role("button", name="Sign in").click()
    c.page.get_by_role("tab", name="Search").click()
    c.page.get_by_label("Message id, event id or idempotency key").fill(msg.id)
    c.page.get_by_role("button", name="Search").click()
    c.page.locator("section.message").wait_for()
    assert HOSTILE in c.page.locator("section.message").inner_text()
    for p in (page, c.page):
        assert p.locator("img[src='x']").count() == 0
        assert p.evaluate("[...document.scripts].every(s => s.src.endsWith('.js') && !s.text)")
    w.clean()
    c.clean()
    hostile_sink.server.shutdown()


def test_a_portal_token_for_one_application_cannot_show_or_change_another(hookgate, tenant, svix, sink, watch):
    a = svix.application.create(ApplicationIn(name="A", uid="app-a-" + uuid.uuid4().hex[:6]))
    b = svix.application.create(ApplicationIn(name="B", uid="app-b-" + uuid.uuid4().hex[:6]))
    b_url = "http://127.0.0.1:9/b-secret-endpoint"
    b_ep = svix.endpoint.create(b.id, EndpointIn(url=b_url))
    _, token_a = portal_url(svix, a.id)
    w = watch()
    page = w.page
    # The page for B, opened with A's token: not there for it (as Svix answers a token
    # for another application: 404), and nothing of B shows.
    page.goto(f"{hookgate.url}/portal/{tenant['id']}/{b.id}#key={token_a}")
    page.get_by_role("alert").wait_for()
    assert "Not found" in page.get_by_role("alert").inner_text()
    assert b_url not in page.content()
    # Whatever the page's script is made to ask, by id or by uid.
    for method, path in [("GET", f"/api/v1/app/{b.id}/endpoint"), ("GET", f"/api/v1/app/{b.uid}/endpoint"),
                         ("PATCH", f"/api/v1/app/{b.id}/endpoint/{b_ep.id}"),
                         ("DELETE", f"/api/v1/app/{b.uid}/endpoint/{b_ep.id}"),
                         ("GET", f"/api/v1/app/{b.id}/endpoint/{b_ep.id}/secret"),
                         ("GET", f"/api/v1/app/{b.id}/endpoint/{b_ep.id}/stats/hourly"),
                         ("POST", f"/api/v1/app/{b.id}/endpoint/{b_ep.id}/send-example"),
                         ("GET", "/api/v1/search?q=" + b_ep.id), ("GET", "/api/v1/settings/portal"),
                         ("GET", "/api/v1/app")]:
        status = page.evaluate("""async ([m, p, t]) => (await fetch(p, {method: m, headers: {Authorization: 'Bearer ' + t,
            'Content-Type': 'application/json'}, body: m === 'GET' ? undefined : '{"disabled": true}'})).status""",
                               [method, path, token_a])
        # B's routes are not there for A's token (404); the tenant's own are refused (403).
        expected = 404 if path.startswith("/api/v1/app/") else 403
        assert status == expected, f"{method} {path} answered {status}"
    assert svix.endpoint.get(b.id, b_ep.id).disabled is False
    # A's own page works with the same token.
    page.goto(f"{hookgate.url}/portal/{tenant['id']}/{a.id}#key={token_a}")
    page.get_by_text("No endpoints yet").wait_for()
    assert b_url not in page.content()


def test_the_portal_is_framed_only_by_the_origins_its_tenant_lists(hookgate, tenant, svix, watch):
    app = svix.application.create(ApplicationIn(name="framed"))
    host = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    origin = f"http://127.0.0.1:{host.server_address[1]}"
    host.server_close()
    url, _ = portal_url(svix, app.id)
    status, headers, _ = raw_call(hookgate, "GET", url.split("#")[0].replace(hookgate.url, ""))
    assert status == 200 and "frame-ancestors 'none'" in headers["content-security-policy"]
    assert "script-src 'self';" in headers["content-security-policy"] and "unsafe" not in headers["content-security-policy"]

    status, _, saved = call(hookgate, "PUT", "/api/v1/settings/portal", tenant["apiKey"],
                            {"displayName": "Acme", "primaryColor": "#aa3300", "theme": "light",
                             "frameAncestors": [origin + "/"]})
    assert status == 200 and saved["frameAncestors"] == [origin], saved
    status, _, bad = call(hookgate, "PUT", "/api/v1/settings/portal", tenant["apiKey"],
                          {"frameAncestors": ["https://a.example; script-src *"]})
    assert status == 422 and "frameAncestors" in json.dumps(bad)
    status, headers, _ = raw_call(hookgate, "GET", url.split("#")[0].replace(hookgate.url, ""))
    assert headers["content-security-policy"].endswith(f"frame-ancestors {origin}")

    # A page on that origin embeds the portal; one on another origin cannot.
    def framing_page(port_origin):
        class Page(BaseHTTPRequestHandler):
            def do_GET(self):
                body = f'<!doctype html><title>host</title><iframe title="portal" src="{url}" width="900" height="600"></iframe>'.encode()
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass
        return Page

    results = {}
    for name, port in (("listed", int(origin.rsplit(":", 1)[1])), ("other", 0)):
        try:
            server = ThreadingHTTPServer(("127.0.0.1", port), framing_page(origin))
        except OSError:
            pytest.fail("the framing page's port was taken meanwhile")
        threading.Thread(target=server.serve_forever, daemon=True).start()
        w = watch()
        w.context.unroute("**/*")
        w.page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        frame = w.page.frame_locator("iframe")
        try:
            frame.get_by_text("No endpoints yet").wait_for(timeout=5000)
            results[name] = frame.locator("#brand").inner_text()
        except Exception:
            results[name] = None
        server.shutdown()
    assert results == {"listed": "Acme webhooks", "other": None}, results


# --- the console ----------------------------------------------------------------------------------


def test_the_operator_creates_a_tenant_and_disables_it_from_the_console_and_its_key_stops_working(
        hookgate, watch):
    w = watch()
    page = w.page
    page.goto(f"{hookgate.url}/console")
    w.axe("the sign-in page")
    page.get_by_label("Admin token or tenant API key").fill("wrong-token")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("alert").wait_for()
    w.errors.clear()  # the refused sign-in's 401 is logged by the browser
    page.get_by_label("Admin token or tenant API key").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Tenants").wait_for()
    name = "console-" + uuid.uuid4().hex[:6]
    page.get_by_label("New tenant's name").fill(name)
    page.get_by_role("button", name="Create tenant").click()
    key = page.locator("#new-api-key").inner_text()
    assert key.startswith("hgk_")
    assert call(hookgate, "GET", "/api/v1/app", key)[0] == 200
    row = page.locator("tr", has_text=name)
    row.locator("td").nth(7).wait_for()
    page.wait_for_function("() => ![...document.querySelectorAll('td')].some(td => td.textContent === '…')")
    w.axe("the tenant list")
    row.get_by_role("button", name="Disable").click()
    page.get_by_role("dialog").get_by_role("button", name=f"Disable {name}").click()
    page.get_by_text(f"{name} is disabled.").wait_for()
    assert page.locator("tr", has_text=name).get_by_text("Disabled").count() == 1
    status, _, body = call(hookgate, "GET", "/api/v1/app", key)
    assert status == 401, body
    # Keys are issued and revoked there too.
    page.locator("tr", has_text=name).get_by_role("button", name="Enable").click()
    page.get_by_text(f"{name} is enabled.").wait_for()
    assert call(hookgate, "GET", "/api/v1/app", key)[0] == 200
    page.get_by_role("button", name=name).click()
    page.get_by_role("tab", name="API keys").click()
    page.get_by_role("button", name="Revoke").first.click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke the key").click()
    page.get_by_text("revoked.").wait_for()
    assert call(hookgate, "GET", "/api/v1/app", key)[0] == 401
    w.axe("a tenant's keys")
    w.clean()


def test_the_search_finds_an_inbound_stripe_event_its_message_and_its_attempts_on_one_page(
        hookgate, tenant, svix, sink, watch):
    app = svix.application.create(ApplicationIn(name="stripe-in"))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    status, _, src = call(hookgate, "POST", "/api/v1/source", tenant["apiKey"],
                          {"name": "stripe", "provider": "stripe", "appId": app.id, "secret": "whsec_console_test"})
    assert status == 201, src
    stripe_id = "evt_1Console" + uuid.uuid4().hex[:10]
    body = json.dumps({"id": stripe_id, "object": "event", "type": "invoice.paid", "data": {"object": {}}}).encode()
    for _ in range(2):  # Stripe retries: the copy is caught as a duplicate
        sig = node_sign("stripe", "whsec_console_test", body)
        status, _, got = call(hookgate, "POST", f"/in/{src['id']}", raw=body,
                              headers={"Stripe-Signature": sig, "Content-Type": "application/json"})
        assert status in (200, 202), got
    delivered = sink.wait_for(1)[0]

    w = watch()
    page = w.page
    page.goto(f"{hookgate.url}/console")
    page.get_by_label("Admin token or tenant API key").fill(tenant["apiKey"])
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Applications", exact=True).wait_for()
    w.axe("the tenant's applications")
    page.get_by_role("tab", name="Sources").click()
    page.locator("details.source summary").first.click()
    # The key is stored derived per source, never the provider's id in clear.
    page.get_by_role("cell", name="invoice.paid").wait_for()
    event_row = page.locator("tr", has_text="invoice.paid")
    assert stripe_id not in event_row.inner_text()
    assert event_row.locator("td").nth(4).inner_text() == "1", "the retried copy is counted as a duplicate"
    w.axe("a source's inbound events")

    page.get_by_role("tab", name="Search").click()
    page.get_by_label("Message id, event id or idempotency key").fill(stripe_id)
    page.get_by_role("button", name="Search").click()
    inbound = page.locator("section.inbound")
    message = page.locator("section.message")
    message.wait_for()
    inbound.get_by_text("Payload as received").click()
    assert stripe_id in inbound.inner_text() and "invoice.paid" in inbound.inner_text()
    assert inbound.locator("td").nth(4).inner_text() == "1", "the duplicate caught, on the search page too"
    text = message.inner_text()
    assert delivered["headers"]["webhook-id"] in text, "the message the event became"
    assert sink.url in text and "HTTP 200" in text, "its delivery and its attempt"
    w.axe("the search results")
    w.shot("console-search")
    w.clean()


def test_a_customer_writes_tries_and_enables_a_transformation_in_the_portal(hookgate, tenant, svix, sink, watch):
    hookgate.admin("PATCH", f"/admin/v1/tenant/{tenant['id']}", {"transformations": True})
    app = svix.application.create(ApplicationIn(name="transform"))
    svix.event_type.create(EventTypeIn(name="invoice.paid", description="An invoice was paid",
                                       schemas={"1": {"type": "object", "examples": [{"amount": 7}]}}))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    url, _ = portal_url(svix, app.id)
    w = watch()
    page = w.page
    page.goto(url)
    page.get_by_role("button", name=sink.url).click()
    page.get_by_role("tab", name="Transformation").click()
    code = page.get_by_label("Code")
    code.wait_for()
    # A mistake first: trying it shows the error, nothing is saved.
    code.fill("function handler(webhook) { throw new Error('no total yet'); }")
    page.get_by_label("Try it on").select_option(label="Example of invoice.paid")
    page.get_by_role("button", name="Try it").click()
    page.locator("#tr-output").get_by_text("no total yet").wait_for()
    # Then code that works: the output shows what would be sent.
    code.fill("function handler(webhook) { webhook.payload = { total: webhook.payload.amount * 2, "
              "note: '<b>" + HOSTILE + "</b>' }; return webhook; }")
    page.get_by_role("button", name="Try it").click()
    page.locator("#tr-output").get_by_text("Would send: POST").wait_for()
    assert '"total": 14' in page.locator("#tr-output pre").inner_text()
    w.axe("the transformation editor")
    page.get_by_label("Enabled (applied to every delivery to this endpoint)").check()
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved and enabled.").wait_for()
    stored = svix.endpoint.transformation.get(app.id, svix.endpoint.list(app.id).data[0].id)
    assert stored.enabled and "total" in stored.code
    svix.message.create(app.id, MessageIn(event_type="invoice.paid", payload={"amount": 21}))
    got = sink.wait_for(1)[0]
    assert json.loads(got["body"])["total"] == 42
    w.shot("portal-transformation")
    w.clean()


def test_the_console_and_the_portal_show_an_applications_destinations_and_why_one_fails(hookgate, tenant, svix, watch):
    from brokers import second_database
    from svix.api import DestinationIn, PostgresConfigIn
    target = second_database()
    # A table that refuses every row: the destination keeps failing, with Postgres's reason.
    subprocess.run(["psql", target, "-qc", "CREATE TABLE refusing (id text PRIMARY KEY, event_type text NOT NULL, "
                     "event_id text, channels text[], payload jsonb, body bytea, content_type text NOT NULL, "
                     "created_at timestamptz NOT NULL, delivered_at timestamptz NOT NULL DEFAULT now(), "
                     "CONSTRAINT closed CHECK (false))"], check=True)
    app = svix.application.create(ApplicationIn(name="with-destinations"))
    svix.destination.create(app.id, DestinationIn(type="postgres", config=PostgresConfigIn(
        url=target, password="never-shown", table_name="refusing")))
    svix.destination.create(app.id, DestinationIn(type="pollingEndpoint", config={}))
    svix.message.create(app.id, MessageIn(event_type="e", payload={"n": 1}))
    eventually(lambda: any(d.status == "retrying" for d in svix.destination.list(app.id).data), timeout=20)

    w = watch()
    page = w.page
    page.goto(f"{hookgate.url}/console")
    page.get_by_label("Admin token or tenant API key").fill(tenant["apiKey"])
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Applications", exact=True).wait_for()
    card = page.locator("details.app", has_text="with-destinations")
    card.locator("summary").click()
    card.get_by_role("button", name="Open endpoints and messages").click()
    page.get_by_role("heading", name="Destinations").wait_for()
    pg = page.locator("details.destination", has_text="postgres")
    assert "Retrying" in pg.locator("summary").inner_text()
    pg.locator("summary").click()
    page.get_by_text("Failing:").wait_for()
    assert "closed" in pg.inner_text() and "refusing" in pg.inner_text(), pg.inner_text()
    assert "never-shown" not in page.content()
    poll = page.locator("details.destination", has_text="pollingEndpoint")
    assert "Enabled" in poll.inner_text()
    w.axe("an application's destinations")
    # The customer's portal shows them too, read only, with their attempts.
    url, _ = portal_url(svix, app.id)
    page.goto(url)
    page.get_by_role("heading", name="Destinations").wait_for()
    page.locator("details.destination summary", has_text="postgres").click()
    page.get_by_text("Failing:").wait_for()
    attempts = page.get_by_role("region", name="Recent attempts to postgres")
    assert "refused the row" in attempts.inner_text() and "never-shown" not in page.content()
    assert page.get_by_role("button", name="Add destination").count() == 0
    w.axe("the portal's destinations")
    w.clean()


def test_the_api_document_is_readable_in_the_browser_and_nothing_is_fetched_from_elsewhere(hookgate, watch):
    w = watch()
    w.page.goto(hookgate.url + "/docs/")
    # Swagger UI, from the binary, renders the served document: its tags and paths.
    w.page.wait_for_selector("text=/api/v1/app/{app_id}/msg", timeout=20000)
    for tag in ("Application", "Endpoint", "Message", "Ingest Source", "Admin"):
        assert w.page.locator(".opblock-tag", has_text=tag).count() >= 1, f"the tag {tag} is not shown"
    w.page.locator(".opblock-tag", has_text="Application").first.scroll_into_view_if_needed()
    w.shot("api-document")
    w.clean()
