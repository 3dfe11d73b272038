"""How much of Svix's published API Hookgate serves, measured against the operations of
Svix's OpenAPI document (tests/vectors/svix-operations.json, data only). Every operation
outside the groups Hookgate leaves out on purpose (docs/api-surface.md, "Not served") is
sent with placeholder ids; it counts as served unless Hookgate answers that no such route
exists (404 `route not found`, or 405 for a path served under other methods). The number
is promised in README.md; the test fails if it drops below it."""
import json
import re

from conftest import ROOT, raw_call

ZERO = "0" * 26
PLACEHOLDERS = {
    "app_id": f"app_{ZERO}", "endpoint_id": f"ep_{ZERO}", "msg_id": f"msg_{ZERO}", "attempt_id": f"atmpt_{ZERO}",
    "source_id": f"src_{ZERO}", "task_id": f"qtask_{ZERO}", "event_type_name": "placeholder.type",
    "integ_id": f"integ_{ZERO}", "destination_id": f"ep_{ZERO}", "sink_id": f"ep_{ZERO}",
}

# Groups left out on purpose, with the reason in docs/api-surface.md: streams and their sinks,
# connectors, auto-configuration, MCP tokens, and the organisation's and management routes.
LEFT_OUT_TAGS = {"Connector", "Webhooks AutoConfig", "Organization", "Stream", "Stream Authentication",
                 "Stream Event Type", "Sink", "Webhook Sink", "Event"}
LEFT_OUT_PATHS = re.compile(
    r"^/api/v1/(stream|connector|management/)|^/api/v1/app/\{app_id\}/stream/"
    r"|mcp-token|org-group-admin-token|one-time-token|/connector/")


def operations():
    doc = json.loads((ROOT / "tests" / "vectors" / "svix-operations.json").read_text())
    return doc["operations"]


def in_scope(op):
    return op["tag"] not in LEFT_OUT_TAGS and not LEFT_OUT_PATHS.search(op["path"])


def promised():
    m = re.search(r"serves \*\*(\d+)\*\* of its (\d+) operations", (ROOT / "README.md").read_text())
    assert m, "README.md states the coverage of Svix's API as `serves **N** of its M operations`"
    return int(m.group(1)), int(m.group(2))


def test_the_operations_of_svixs_api_are_served_as_many_as_the_readme_promises(hookgate, tenant):
    ops = [op for op in operations() if in_scope(op)]
    assert len(operations()) > 200 and len(ops) > 100, "the fixture was not read"
    served, missing = [], []
    for op in ops:
        concrete = re.sub(r"\{(\w+)\}", lambda m: PLACEHOLDERS.get(m.group(1), "placeholder"), op["path"])
        method = op["method"]
        status, _, raw = raw_call(hookgate, method, concrete, key=tenant["apiKey"],
                                  body={} if method in ("POST", "PUT", "PATCH") else None)
        try:
            detail = json.loads(raw or b"null")
        except ValueError:
            detail = None
        gone = status == 405 or (status == 404 and isinstance(detail, dict) and detail.get("detail") == "route not found")
        (missing if gone else served).append(f"{method} {op['path']}  ({op['operationId']})")
    report = ROOT / "target" / "svix-api-coverage.txt"
    report.parent.mkdir(exist_ok=True)
    report.write_text(f"served {len(served)} of {len(ops)}\n\nnot served:\n" + "\n".join(missing) + "\n")
    at_least, total = promised()
    assert total == len(ops), f"README counts {total} operations; the fixture has {len(ops)} in scope"
    assert len(served) >= at_least, f"{len(served)} of {len(ops)} served, fewer than the {at_least} promised"
