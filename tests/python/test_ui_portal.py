"""The portal as a customer uses it, in Chromium at 1400 and 390 px (the browser,
the checks on every page and the screenshots are test_ui.py's): endpoint health
on the first screen with failures explained, the application's message log, the
event catalog, a read-only link that shows no control, and a test event whose
payload is edited and whose attempt shows inline."""
import json

from svix.api import AppPortalAccessIn, ApplicationIn, EndpointIn, EventTypeIn, MessageIn

from conftest import Sink, call, eventually, free_port
from test_ui import browser, portal_url, watch  # noqa: F401 (fixtures)

WIDTHS = [(1400, 900), (390, 844)]


def health_of(hookgate, key, app_id):
    status, _, body = call(hookgate, "GET", f"/api/v1/app/{app_id}/endpoint-health", key)
    assert status == 200, body
    return {x["endpointId"]: x for x in body["data"]}


def test_the_first_screen_shows_which_endpoints_fail_and_why_in_words(hookgate, tenant, svix, sink, watch):
    key = tenant["apiKey"]
    app = svix.application.create(ApplicationIn(name="health"))
    failing = Sink()
    failing.status = 500
    refused_url = f"http://127.0.0.1:{free_port()}/nobody-listens"
    try:
        good = svix.endpoint.create(app.id, EndpointIn(url=sink.url, description="the warehouse"))
        bad = svix.endpoint.create(app.id, EndpointIn(url=failing.url, description="answers 500"))
        gone = svix.endpoint.create(app.id, EndpointIn(url=refused_url, description="not running"))
        for i in range(2):
            svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": i}))
        # The route the first screen reads: failing since, failure rate, the last failure.
        health = eventually(lambda: (hl := health_of(hookgate, key, app.id))
                            and hl[bad.id]["failingSince"] and hl[gone.id]["failingSince"]
                            and hl[good.id]["recentAttempts"] >= 2 and hl)
        assert health[good.id]["failingSince"] is None and health[good.id]["recentFailures"] == 0
        assert health[bad.id]["lastFailure"]["responseStatusCode"] == 500
        assert health[gone.id]["lastFailure"]["responseStatusCode"] == 0
        assert "refused" in health[gone.id]["lastFailure"]["response"].lower()
        assert health[bad.id]["recentFailures"] >= 2

        url, _ = portal_url(svix, app.id)
        for width, height in WIDTHS:
            w = watch(viewport={"width": width, "height": height})
            page = w.page
            page.goto(url)
            card = lambda u: page.locator("article.endpoint-card", has=page.get_by_role("button", name=u))  # noqa: E731
            card(sink.url).get_by_text("Healthy").wait_for()
            assert "Failing" in card(failing.url).inner_text()
            assert "server error (HTTP 500)" in card(failing.url).inner_text()
            assert "failed" in card(failing.url).inner_text(), "the failure rate is shown"
            gone_card = card(refused_url)
            assert "refused the connection" in gone_card.inner_text()
            assert "Connection refused" not in gone_card.inner_text(), "the raw text waits behind a click"
            gone_card.get_by_text("Show the technical details").click()
            assert "refused" in gone_card.locator("details.raw pre").inner_text().lower()
            w.axe(f"the endpoint list with failing endpoints at {width} px")
            w.no_sideways(f"the endpoint list at {width} px")
            w.shot(f"portal-health-{width}")
            # The endpoint's own page says it too, and its chart labels its axis.
            page.get_by_role("button", name=failing.url).click()
            page.locator("figure.chart svg").wait_for()
            assert "HTTP 500" in page.locator("main").inner_text()
            labels = page.locator("figure.chart svg text").all_text_contents()
            assert "attempts" in labels and "0" in labels and len(labels) >= 4, labels
            size = page.evaluate("parseFloat(getComputedStyle(document.querySelector('figure.chart svg text')).fontSize)"
                                 " * document.querySelector('figure.chart svg').getBoundingClientRect().width"
                                 " / document.querySelector('figure.chart svg').viewBox.baseVal.width")
            assert size >= 10, f"the chart's text is drawn at {size:.1f} px at {width} px wide"
            w.no_sideways(f"an endpoint's overview at {width} px")
            w.shot(f"portal-endpoint-failing-{width}")
            w.clean()
    finally:
        failing.server.shutdown()


def test_the_message_log_pages_filters_and_finds_a_message_by_its_event_id(hookgate, tenant, svix, sink, watch):
    app = svix.application.create(ApplicationIn(name="log"))
    svix.event_type.create(EventTypeIn(name="order.paid", description="An order was paid",
                                       schemas={"1": {"type": "object", "properties": {"order": {"type": "integer"}},
                                                      "examples": [{"order": 42}]}}))
    svix.event_type.create(EventTypeIn(name="order.shipped", description="It left the warehouse"))
    svix.event_type.create(EventTypeIn(name="invoice.created", description="An invoice was made"))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    for i in range(29):
        svix.message.create(app.id, MessageIn(event_type="order.paid" if i % 3 else "invoice.created", payload={"n": i}))
    svix.message.create(app.id, MessageIn(event_type="order.shipped", payload={"n": 99}, event_id="evt-findme"))
    sink.wait_for(30)
    url, _ = portal_url(svix, app.id)
    w = watch(viewport={"width": 1400, "height": 900})
    page = w.page
    page.goto(url)
    page.get_by_role("button", name="Messages", exact=True).click()
    page.get_by_role("heading", name="Messages").wait_for()
    page.locator("details.message").nth(24).wait_for()
    assert page.locator("details.message").count() == 25
    assert "order.shipped" in page.locator("details.message summary").first.inner_text(), "newest first"
    page.get_by_role("button", name="Older →").click()
    page.get_by_role("button", name="← Newer").wait_for()
    assert page.locator("details.message").count() == 5
    page.get_by_role("button", name="← Newer").click()
    page.get_by_role("button", name="Older →").wait_for()
    assert page.locator("details.message").count() == 25
    page.get_by_label("Event type").select_option("invoice.created")
    page.get_by_role("button", name="Filter").click()
    eventually(lambda: page.locator("details.message").count() == 10
               and "loading" not in page.locator("main").inner_text().lower())
    assert all("invoice.created" in t for t in page.locator("details.message summary").all_inner_texts())
    # By the state of their deliveries: every one was delivered, none failed.
    page.get_by_label("Status").select_option(label="Failed")
    page.get_by_role("button", name="Filter").click()
    page.get_by_text("No messages match.").wait_for()
    page.get_by_label("Status").select_option(label="Delivered")
    page.get_by_role("button", name="Filter").click()
    eventually(lambda: page.locator("details.message").count() == 10
               and "loading" not in page.locator("main").inner_text().lower())
    w.axe("the message log")
    # Found by its eventId, opened to where it went and its attempt.
    page.get_by_label("Message id or event id").fill("evt-findme")
    page.get_by_role("button", name="Find").click()
    found = page.locator("details.message[open]")
    found.locator("section.delivery .attempt").first.wait_for()
    assert "evt-findme" in found.inner_text() and sink.url in found.inner_text() and "HTTP 200" in found.inner_text()
    page.get_by_label("Message id or event id").fill("evt-nobody")
    page.get_by_role("button", name="Find").click()
    page.get_by_text("No message has the id or event id").wait_for()
    # That search's 404 is the answer it shows; Chromium logs every 404 as an error.
    w.errors = [e for e in w.errors if "status of 404" not in e]
    w.shot("portal-message-log-1400")

    page.get_by_role("button", name="Event catalog").click()
    page.locator("section.catalog-group[aria-label='order'] h2").wait_for()
    assert page.locator("section.catalog-group").evaluate_all("s => s.map(x => x.getAttribute('aria-label'))") \
        == ["invoice", "order"], "grouped by the name's first part"
    assert page.locator("section.catalog-group[aria-label='order'] article.event-type").count() == 2
    page.get_by_text("Schema of order.paid (version 1)").click()
    assert '"order"' in page.locator("details[open] pre").first.inner_text()
    w.axe("the event catalog")
    w.shot("portal-catalog-1400")
    page.get_by_label("Search event types").fill("invoice")
    eventually(lambda: page.locator("article.event-type").count() == 1)
    assert page.locator("section.catalog-group[aria-label='order']").count() == 0
    w.clean()


def test_a_read_only_link_shows_no_control_that_changes_anything(hookgate, tenant, svix, sink, watch):
    app = svix.application.create(ApplicationIn(name="look only"))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"n": 1}))
    sink.wait_for(1)
    ro = svix.authentication.app_portal_access(app.id, AppPortalAccessIn(read_only=True)).url
    for width, height in WIDTHS:
        w = watch(viewport={"width": width, "height": height})
        page = w.page
        methods = []
        page.on("request", lambda r: r.url.startswith(hookgate.url + "/api/") and methods.append(r.method))
        page.goto(ro)
        page.get_by_text("Read-only link").wait_for()
        page.get_by_role("button", name=sink.url).wait_for()
        assert page.get_by_role("button", name="Add endpoint").count() == 0
        page.get_by_role("button", name=sink.url).click()
        for tab in ["Overview", "Messages", "Testing", "Transformation", "Settings"]:
            page.get_by_role("tab", name=tab).click()
            page.get_by_role("tab", name=tab, selected=True).wait_for()
            page.wait_for_load_state("networkidle")
            if tab == "Messages":
                page.locator("details.message summary").first.click()
                page.locator(".attempt").first.wait_for()
            text = page.locator("main").inner_text()
            for control in ["Recover failed messages", "Resend", "Send test event", "Save", "Try it",
                            "Reveal secret", "Rotate secret", "Add header", "Delete endpoint"]:
                assert page.get_by_role("button", name=control).count() == 0, f"{control} shown on {tab}"
            assert "whsec_" not in text
            if tab == "Testing":
                assert "cannot send test events" in text
        w.axe(f"a read-only endpoint's settings at {width} px")
        w.no_sideways(f"a read-only link at {width} px")
        w.shot(f"portal-read-only-{width}")
        assert methods and set(methods) == {"GET"}, f"a read-only link asked {set(methods)}"
        w.clean()
    # A full link opened in the same tab takes over at once, without a reload.
    full, _ = portal_url(svix, app.id)
    page.goto(full)
    page.get_by_role("button", name="Add endpoint").wait_for()
    assert page.get_by_text("Read-only link").is_hidden()
    assert ep.id


def test_a_test_event_is_sent_with_the_edited_payload_and_its_attempt_shows_inline(hookgate, tenant, svix, sink, watch):
    app = svix.application.create(ApplicationIn(name="testing"))
    svix.event_type.create(EventTypeIn(name="order.paid", description="paid",
                                       schemas={"1": {"type": "object", "examples": [{"order": 42}]}}))
    ep = svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    url, _ = portal_url(svix, app.id)
    w = watch(viewport={"width": 390, "height": 844})
    w.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=hookgate.url)
    page = w.page
    page.goto(url)
    page.get_by_role("button", name=sink.url).click()
    page.get_by_role("tab", name="Testing").click()
    page.get_by_label("Event type").select_option("order.paid")
    assert json.loads(page.get_by_label("Payload").input_value()) == {"order": 42}, "the example, to edit"
    page.get_by_label("Payload").fill('{"order": 7, "note": "edited"}')
    page.get_by_role("button", name="Send test event").click()
    inline = page.locator("[aria-live] .attempt")
    inline.wait_for()
    assert "Delivered" in inline.inner_text() and "HTTP 200" in inline.inner_text()
    assert json.loads(sink.wait_for(1)[0]["body"]) == {"order": 7, "note": "edited"}
    page.get_by_label("Payload").fill("[1, 2]")
    page.get_by_role("button", name="Send test event").click()
    page.get_by_text("must be a JSON object").wait_for()
    w.axe("the testing tab")
    w.no_sideways("the testing tab at 390 px")
    w.shot("portal-testing-390")
    # The API refuses a payload that is not an object, or too large, in words.
    key = tenant["apiKey"]
    for bad, word in [([1], "object"), ({"x": "y" * 70000}, "bytes")]:
        status, _, body = call(hookgate, "POST", f"/api/v1/app/{app.id}/endpoint/{ep.id}/send-example", key,
                               {"eventType": "order.paid", "payload": bad})
        assert status == 422 and word in json.dumps(body), body
    # Transformations, while the operator has not switched them on: why, and no Try.
    page.get_by_role("tab", name="Transformation").click()
    page.get_by_text("not switched on for this service").wait_for()
    assert page.get_by_role("button", name="Try it").is_disabled()
    # The secret, copied.
    page.get_by_role("tab", name="Settings").click()
    page.get_by_role("button", name="Reveal secret").click()
    page.get_by_role("button", name="Copy secret").click()
    page.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == svix.endpoint.get_secret(app.id, ep.id).key
    w.clean()


def test_a_content_filter_is_set_tried_and_shown_in_the_endpoints_settings(hookgate, tenant, svix, sink, watch):
    app = svix.application.create(ApplicationIn(name="filtering"))
    svix.event_type.create(EventTypeIn(name="order.paid", description="paid",
                                       schemas={"1": {"type": "object", "examples": [{"amount": 42}]}}))
    svix.endpoint.create(app.id, EndpointIn(url=sink.url))
    url, _ = portal_url(svix, app.id)
    w = watch(viewport={"width": 1400, "height": 900})
    page = w.page
    page.goto(url)
    page.get_by_role("button", name=sink.url).click()
    page.get_by_role("tab", name="Settings").click()
    page.get_by_label("Content filter").fill("amount >")
    # Tried on the event type's example, as delivery would judge it; a wrong filter says where.
    page.get_by_text("Try it on a payload").click()
    page.get_by_role("button", name="Try the filter").click()
    page.get_by_text("at 8: expected a value").wait_for()
    page.get_by_label("Content filter").fill("amount > 100")
    assert json.loads(page.get_by_label("Payload to try it on").input_value()) == {"amount": 42}
    page.get_by_role("button", name="Try the filter").click()
    page.get_by_text("This payload does not pass").wait_for()
    page.get_by_label("Payload to try it on").fill('{"amount": 250}')
    page.get_by_role("button", name="Try the filter").click()
    page.get_by_text("This payload passes").wait_for()
    w.axe("the filter's try")
    page.get_by_role("button", name="Save changes").click()
    page.get_by_text("Saved.").wait_for()
    key = tenant["apiKey"]
    status, _, body = call(hookgate, "GET", f"/api/v1/app/{app.id}/endpoint", key)
    assert status == 200 and body["data"][0]["filter"] == "amount > 100", body
    # Only what passes is sent.
    for amount in [42, 250]:
        svix.message.create(app.id, MessageIn(event_type="order.paid", payload={"amount": amount}))
    sink.wait_for(1)
    page.wait_for_timeout(1000)
    assert [json.loads(r["body"])["amount"] for r in sink.received] == [250], "the filtered message makes no delivery"
    page.get_by_role("tab", name="Settings").click()
    assert page.get_by_label("Content filter").input_value() == "amount > 100"
    w.shot("portal-filter-1400")
