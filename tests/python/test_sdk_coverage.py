"""How much of the official Svix Python SDK's surface Hookgate serves, measured from
the installed SDK's own route table: every (method, path) its API modules call is
sent with placeholder ids, and a route counts as served unless Hookgate answers that
no such route exists. The number is promised in README.md;
the test fails if it drops below it."""
import json
import re
from pathlib import Path

import svix

from conftest import ROOT, raw_call

ZERO = "0" * 26
PLACEHOLDERS = {
    "app_id": f"app_{ZERO}", "endpoint_id": f"ep_{ZERO}", "msg_id": f"msg_{ZERO}", "attempt_id": f"atmpt_{ZERO}",
    "source_id": f"src_{ZERO}", "task_id": f"qtask_{ZERO}", "event_type_name": "placeholder.type",
}


def sdk_routes():
    """(method, path) of every call in the SDK's API modules."""
    found = set()
    for f in sorted((Path(svix.__file__).parent / "api").glob("*.py")):
        for m in re.finditer(r'method="(\w+)",\s*path="([^"]+)"', f.read_text()):
            found.add((m.group(1).upper(), m.group(2)))
    return sorted(found)


def promised():
    """The number README.md promises: `serves N of the M routes`."""
    m = re.search(r"serves \*\*(\d+)\*\* of the (\d+) routes", (ROOT / "README.md").read_text())
    assert m, "README.md states the SDK coverage as `serves **N** of the M routes`"
    return int(m.group(1)), int(m.group(2))


def test_the_official_sdks_routes_are_served_as_many_as_the_readme_promises(hookgate, tenant):
    routes = sdk_routes()
    assert len(routes) > 100, f"the SDK's route table was not read: {len(routes)}"
    served, missing = [], []
    for method, path in routes:
        concrete = re.sub(r"\{(\w+)\}", lambda m: PLACEHOLDERS.get(m.group(1), "placeholder"), path)
        status, _, raw = raw_call(hookgate, method, concrete, key=tenant["apiKey"],
                                  body={} if method in ("POST", "PUT", "PATCH") else None)
        try:
            detail = json.loads(raw or b"null")
        except ValueError:
            detail = None
        gone = status == 404 and isinstance(detail, dict) and detail.get("detail") == "route not found"
        (missing if gone else served).append(f"{method} {path}")
    at_least, total = promised()
    report = ROOT / "target" / "sdk-coverage.txt"
    report.parent.mkdir(exist_ok=True)
    report.write_text(f"served {len(served)} of {len(routes)}\n\nnot served:\n" + "\n".join(missing) + "\n")
    assert total == len(routes), f"README counts {total} routes; the installed SDK has {len(routes)}"
    assert len(served) >= at_least, f"{len(served)} of {len(routes)} served, fewer than the {at_least} promised"
