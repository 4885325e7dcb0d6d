"""Network adapters: term2's filtering proxy, the only way out of a sandbox for approved hosts (ADR 0030)."""
