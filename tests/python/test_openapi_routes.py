"""docs/openapi.yaml and the server's route table (src/server/routes.h, the one table
OpenAiApi::Handle dispatches through) name the same routes, and a live server answers each of them
(not 404/405) and answers another method on each path with 405 and an Allow header."""

import http.client
import json
import re

import pytest

from conftest import REPO, MODEL_NAME

yaml = pytest.importorskip("yaml", reason="PyYAML missing (scripts/setup.sh installs it)")

SPEC = REPO / "docs" / "openapi.yaml"
ROUTES_H = REPO / "src" / "server" / "routes.h"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
ROUTE_LINE = re.compile(r'^\s*\{"([A-Z]+)", "(/[^"]*)", RouteId::k[A-Za-z]+\},\s*$')


def spec_routes():
    spec = yaml.safe_load(SPEC.read_text())
    return {(m.upper(), path) for path, ops in spec["paths"].items() for m in ops if m in METHODS}


def table_routes():
    """The entries of kRoutes; every line between its braces must be one route."""
    text = ROUTES_H.read_text()
    start = text.index("kRoutes[] = {")
    body = text[text.index("\n", start) + 1:text.index("\n};", start)]
    routes = set()
    for line in body.splitlines():
        if not line.strip() or line.strip().startswith("//"):
            continue
        m = ROUTE_LINE.match(line)
        assert m, f"routes.h: a kRoutes line this test cannot read: {line!r}"
        routes.add((m.group(1), m.group(2)))
    return routes


def test_spec_and_route_table_name_the_same_routes():
    table, spec = table_routes(), spec_routes()
    assert ("POST", "/v1/chat/completions") in table and len(table) >= 9, table
    assert table - spec == set(), f"routes the server handles but docs/openapi.yaml lacks"
    assert spec - table == set(), f"routes in docs/openapi.yaml the server does not handle"


def concrete(path):
    return re.sub(r"\{[^}]+\}", MODEL_NAME, path)


@pytest.mark.parametrize("method,path", sorted(spec_routes()))
def test_live_server_answers_every_route(server, method, path):
    if path == "/v1/kv_events":  # an endless event stream: its first event is the snapshot
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", path, headers={"Authorization": f"Bearer {server.api_key}"})
        resp = conn.getresponse()
        line = resp.readline().decode()
        assert resp.status == 200 and line.startswith("data: "), line
        assert json.loads(line[len("data: "):])["type"] == "snapshot", line
        conn.close()
        return
    body = {} if method == "POST" else None
    status, _, reply = server.request(method, concrete(path), body)
    # {} is an invalid generation / detokenize body (400); GETs succeed.
    assert status in (200, 400), (status, reply)
    if status == 400:
        assert reply["error"]["type"] == "invalid_request_error", reply


@pytest.mark.parametrize("path", sorted({p for _, p in spec_routes()}))
def test_other_methods_are_405_with_allow(server, path):
    allowed = sorted(m for m, p in spec_routes() if p == path)
    other = "DELETE" if "DELETE" not in allowed else "PUT"
    status, headers, reply = server.request(other, concrete(path))
    assert status == 405, (status, reply)
    assert headers.get("Allow") == ", ".join(allowed), headers
    assert reply["error"]["type"] == "invalid_request_error", reply


def test_unknown_path_is_404(server):
    status, _, reply = server.request("GET", "/v1/nope")
    assert status == 404, reply
    assert "Unknown path" in reply["error"]["message"], reply
