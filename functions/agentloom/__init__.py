"""AgentLoom platform: API, stores, orchestration, adapters, CLI."""
