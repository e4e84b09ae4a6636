"""``/docs``: the interactive reference of the REST API, served entirely by this server.

Swagger UI's files come from the ``swagger-ui-bundle`` package, and only the three the page
uses are served (not the vendor's sample pages). The bundled Swagger UI (4.x) reads OpenAPI
3.0, while the app describes itself in 3.1 (``/openapi.json``, unchanged for programs), so
the page reads ``/docs/openapi.json``, the same description written in 3.0's terms. The page
gets the same protection as the web page: no inline script, nothing loaded from elsewhere,
never shown in another site's frame.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from swagger_ui_bundle import swagger_ui_path

HERE = Path(__file__).parent
#: The Swagger UI files the page loads, and their types.
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>slm API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/slm-docs.js"></script>
</body>
</html>
"""


def add_docs(app: FastAPI) -> None:
    """Serve ``/docs``, its description and its assets on ``app``."""

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(PAGE, headers=HEADERS)

    @app.get("/docs/openapi.json", include_in_schema=False)
    def description() -> JSONResponse:
        return JSONResponse(openapi_30(app.openapi()), headers=HEADERS)

    @app.get("/docs/assets/{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        if name == "slm-docs.js":
            return FileResponse(HERE / "static" / "docs.js", headers=HEADERS,
                                media_type="text/javascript")  # fmt: skip
        if name not in ASSETS:
            return JSONResponse(
                {"error": {"type": "not_found", "message": "Not Found", "field": None}},
                status_code=404,
            )
        path = Path(swagger_ui_path) / name
        return FileResponse(path, headers=HEADERS, media_type=ASSETS[name])


def openapi_30(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (OpenAPI 3.1) in OpenAPI 3.0's terms: a type that may be null becomes
    ``nullable``, ``const`` an enum of one, a list of ``examples`` its first ``example``,
    numeric exclusive bounds the 3.0 flags."""
    converted = _schema(document)
    assert isinstance(converted, dict)
    converted["openapi"] = "3.0.3"
    return converted


def _schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _schema(value) for key, value in node.items()}
    for union in ("anyOf", "oneOf"):
        options = node.get(union)
        if isinstance(options, list) and {"type": "null"} in options:
            rest = [option for option in options if option != {"type": "null"}]
            node.pop(union)
            node.update(rest[0] if len(rest) == 1 else {union: rest})
            node["nullable"] = True
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        node["type"] = others[0] if others else "string"
        if "null" in kind:
            node["nullable"] = True
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if isinstance(node.get("examples"), list):
        examples = node.pop("examples")
        if examples:
            node["example"] = examples[0]
    for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = node.get(bound)
        if isinstance(value, int | float) and not isinstance(value, bool):
            node[flag] = value
            node[bound] = True
    return node
