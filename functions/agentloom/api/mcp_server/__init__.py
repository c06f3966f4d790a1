"""AgentLoom agents as MCP servers (Streamable HTTP, stateless): ``protocol`` (the
JSON-RPC surface of both protocol eras), ``tools`` (ask, run_status, resume_run,
resolve_run, cancel_run over the ``SessionService``), ``reports`` (what they answer).
The route is ``agentloom.api.routes_mcp_server``; no MCP SDK is imported here (it is the
platform's MCP *client*, and a heavy import for a Lambda's cold start)."""
