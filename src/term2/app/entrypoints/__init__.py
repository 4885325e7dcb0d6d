"""The driving side and the one composition root: command line, launcher, server wiring, container.

Only modules here import adapters or dependency-injector; the rest of ``app``
holds use cases and their tools (import contracts in pyproject.toml).
"""
