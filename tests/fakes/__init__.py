"""Test doubles for the outside world and for ports: the LLM server, approvers, sandboxes, sinks, peers."""
