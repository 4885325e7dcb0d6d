"""Use cases, configuration, the CLI and the one composition root."""
