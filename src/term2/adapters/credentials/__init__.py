"""API keys stored by `term2 login` (ADR 0047)."""
