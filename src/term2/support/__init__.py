"""Stand-ins for third-party pieces that misbehave or cost start-up time, shared by every layer; they import
nothing of term2.

Each module names what it works around (a defect, or an import the first session would wait for), the
upstream version it was measured on and the test that pins it, so it can be dropped once upstream changes.
"""
