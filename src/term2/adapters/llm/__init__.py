"""Adapters for the LLM provider port: litellm for real models, a scripted double for tests."""
