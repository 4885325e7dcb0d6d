"""Adapters: the ports implemented over real technology (stdio, litellm, bwrap, SQLite)."""
