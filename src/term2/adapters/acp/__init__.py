"""The Agent Client Protocol over JSON-RPC 2.0: framing, dispatch, v1 and v2 wire shapes."""
