"""Prompt texts shipped with term2, read with importlib.resources (hatch packages them with src/term2)."""
