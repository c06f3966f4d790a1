"""A2A on the API function's resolver over the AWS platform (moto): the JWT authorizer's
identity, the DynamoDB platform store (the messageId claim is a conditional write there),
Step Functions starting the run; the test plays the state machine (``harness.drive``).
The resolver is built on the bench's platform (``api_handler`` builds the same from the
environment, with the provider's model instead of the bench's)."""

from __future__ import annotations

import json
from typing import Any

from functional.aws.harness import Bench, drive, event

from agentloom.api.app import build_app
from agentloom.platform.identity import JwtClaims


def test_a2a_on_the_api_function(bench: Bench) -> None:
    app = build_app(bench.api.admin, bench.api.sessions, JwtClaims())

    def rpc(method: str, params: dict[str, Any]) -> Any:
        out = app.resolve(event("POST", base, {"jsonrpc": "2.0", "id": method,
                                               "method": method, "params": params}), None)
        assert out["statusCode"] == 200, out
        return json.loads(out["body"])

    base = f"/api/v1/spaces/{bench.space_id}/agents/{bench.agent_id}/a2a"
    out = app.resolve(event("GET", f"{base}/.well-known/agent-card.json"), None)
    assert out["statusCode"] == 200, out
    card = json.loads(out["body"])
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"][
        "bearerFormat"] == "JWT"
    assert card["supportedInterfaces"][0]["url"].startswith("https://")
    assert {s["id"] for s in card["skills"]} == {"ask", "workspace", "workspace_command"}
    message = {"messageId": "m-aws", "role": "ROLE_USER",
               "parts": [{"text": "Copy the notes"}]}
    params = {"message": message, "configuration": {"returnImmediately": True}}
    first = rpc("SendMessage", params)["result"]["task"]
    again = rpc("SendMessage", params)["result"]["task"]  # a retry
    assert first["id"] == again["id"]
    assert first["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    listed = bench.aws.sfn.list_executions(
        stateMachineArn=bench.resources.env["AGENTLOOM_STATE_MACHINE_ARN"])["executions"]
    assert [e["name"] for e in listed] == [f"{first['id']}-g1"]  # one run, one start
    assert drive(bench, first["id"])[-1]["status"] == "completed"
    task = rpc("GetTask", {"id": first["id"]})["result"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "Copied the notes."}]
    hidden = app.resolve(event("POST", base, {
        "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": first["id"]}},
        user="mallory"), None)  # not a member: the endpoint does not exist for them
    assert hidden["statusCode"] == 404
    assert json.loads(hidden["body"])["error"]["code"] == "space_not_found"
