"""The OpenAPI document of the HTTP API, generated from the resolver's routes and models.

``python -m agentloom.api.openapi > docs/openapi.json`` writes the committed copy; a test
fails when it is stale.
"""

from __future__ import annotations

import json
import sys
from typing import Any, cast

from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

from agentloom.api._resolver import PUBLIC_PATHS
from agentloom.api.app import TITLE, VERSION, build_app
from agentloom.platform.identity import JwtClaims

DESCRIPTION = (
    "Spaces, members, agents with drafts and published versions, sessions and runs. "
    "Errors are {\"error\": {\"code\", \"message\", \"details\"?}}. Authentication: a "
    "bearer token (agentloom serve) or a JWT verified by API Gateway (AWS). Runs start "
    "asynchronously: follow them with GET .../events?after=N&wait=S (long poll, at most "
    "20 s) or, on agentloom serve, the same path with Accept: text/event-stream (SSE).")


def openapi_document() -> dict[str, Any]:
    app = build_app(cast(Any, None), cast(Any, None), JwtClaims())
    text = app.get_openapi_json_schema(
        title=TITLE, version=VERSION, description=DESCRIPTION,
        security_schemes={"bearer": HTTPBearer(scheme="bearer", bearerFormat="token or JWT")},
        security=[{"bearer": []}])
    document: dict[str, Any] = json.loads(text)
    for path in PUBLIC_PATHS:  # Powertools drops an empty ``security``: the gate's list
        for operation in document["paths"].get(path, {}).values():
            operation["security"] = []
    return document


def render() -> str:
    return json.dumps(openapi_document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
