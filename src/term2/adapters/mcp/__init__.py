"""The MCP port on the official `mcp` SDK; imported only once a session names MCP servers (ADR 0023)."""
