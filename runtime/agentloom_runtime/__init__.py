"""AgentLoom runtime: the durable agent engine SDK."""
