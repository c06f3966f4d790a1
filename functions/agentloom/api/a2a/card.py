"""An agent card per published agent: who it is (its name and latest version), where to
talk to it (the JSON-RPC endpoint, absolute), how to authenticate (the deployment's
identity: a bearer token on ``agentloom serve``, an API Gateway-verified JWT in AWS) and
its skills, one for asking it and one per thing it can use — its workspace tools, its
command tool, each Skill, knowledge base, MCP tool and sub-agent — from the published
snapshot. The prompt never appears on the card.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloom.api.a2a.wire import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
)
from agentloom.platform.domain import Agent, AgentVersion
from agentloom.platform.identity import Authenticator, JwtClaims

TEXT = ["text/plain"]
_CUT = 300  # characters of a tool's or sub-agent's description on the card


def security(authenticator: Authenticator) -> tuple[dict[str, dict[str, Any]],
                                                    list[dict[str, Any]]]:
    """The card's ``securitySchemes`` and ``securityRequirements`` for this deployment."""
    if isinstance(authenticator, JwtClaims):
        scheme = {"scheme": "Bearer", "bearerFormat": "JWT",
                  "description": "A JWT from the deployment's identity provider, verified "
                                 "by API Gateway's authorizer (the API's own)."}
    else:
        scheme = {"scheme": "Bearer", "bearerFormat": "agl_ token",
                  "description": "An AgentLoom bearer token (agentloom serve token --user "
                                 "NAME), the API's own."}
    return ({"bearer": {"httpAuthSecurityScheme": scheme}},
            [{"schemes": {"bearer": {"list": []}}}])


def skills(agent: Agent, snapshot: Mapping[str, Any]) -> list[AgentSkill]:
    """What the agent offers: asking it, then each capability its version binds."""
    name = agent.name or agent.agent_id
    mode = str(snapshot.get("mode") or "react")
    out = [AgentSkill(id="ask", name=f"Ask {name}",
                      description=f"Ask {name} a question; it works in {mode} mode with the "
                                  "tools below and answers in text.",
                      tags=["question", mode], inputModes=TEXT, outputModes=TEXT)]
    tools = [str(t) for t in snapshot.get("tools") or ()]
    if any(t == "workspace" or (t.startswith("workspace_") and t != "workspace_command")
           for t in tools):
        out.append(AgentSkill(id="workspace", name="Workspace files",
                              description="Reads, searches and writes files in the "
                                          "session's own workspace.", tags=["tool", "files"]))
    if "workspace_command" in tools:
        out.append(AgentSkill(id="workspace_command", name="Sandboxed commands",
                              description="Runs shell commands in a sandbox without "
                                          "network over the session's workspace.",
                              tags=["tool", "command"]))
    for skill in snapshot.get("skills") or ():
        out.append(AgentSkill(id=f"skill:{skill}", name=str(skill),
                              description=f"The Skill {skill} of this space.",
                              tags=["skill"]))
    for base in snapshot.get("knowledge_bases") or ():
        out.append(AgentSkill(id=f"knowledge:{base}", name=f"Knowledge base {base}",
                              description="Searches the documents of this knowledge base "
                                          "and cites them.", tags=["knowledge"]))
    for tool in snapshot.get("mcp_tools") or ():
        alias = str(tool.get("alias") or tool.get("tool"))
        out.append(AgentSkill(id=f"mcp:{alias}", name=alias,
                              description=str(tool.get("description") or
                                              f"The MCP tool {tool.get('tool')}.")[:_CUT],
                              tags=["tool", "mcp"]))
    for sub in snapshot.get("subagents") or ():
        out.append(AgentSkill(id=f"subagent:{sub.get('id')}", name=str(sub.get("name")),
                              description=str(sub.get("duty") or "")[:_CUT] or "A sub-agent.",
                              tags=["subagent"]))
    return out


def agent_card(agent: Agent, version: AgentVersion, rpc_url: str,
               authenticator: Authenticator) -> AgentCard:
    schemes, requirements = security(authenticator)
    name = agent.name or agent.agent_id
    return AgentCard(
        name=name,
        description=f"{name}, an AgentLoom agent of space {agent.space_id} (published "
                    f"version {version.version}). Each message is a question: a task is "
                    "one run, a context one session.",
        supportedInterfaces=[AgentInterface(url=rpc_url)],
        provider=AgentProvider(organization="AgentLoom", url=rpc_url.split("/api/v1")[0]),
        version=str(version.version), capabilities=AgentCapabilities(),
        securitySchemes=schemes, securityRequirements=requirements,
        defaultInputModes=TEXT, defaultOutputModes=TEXT,
        skills=skills(agent, version.snapshot))
