"""The MCP servers a client names for a session: their lifecycle, their tools' names, and calls to them (ADR 0023)."""
