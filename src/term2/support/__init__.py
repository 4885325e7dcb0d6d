"""Stand-ins for third-party pieces that misbehave, shared by every layer; they import nothing of term2.

Each module names the defect it works around, the upstream version it was measured on and the test
that reproduces it, so it can be dropped once upstream is fixed.
"""
