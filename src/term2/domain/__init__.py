"""Pure models and rules. Nothing here performs I/O or imports a framework."""
