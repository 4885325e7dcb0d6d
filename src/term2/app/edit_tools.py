"""Which edit tools a model is offered: the format its family was trained on (ADR 0027).

OpenAI trained its GPT-4.1, o3/o4 and GPT-5 (codex) models on the
`*** Begin Patch` format, and they write it more reliably than any other way
of editing; other models do best with a string replacement. Offering both
would make every model choose, and choose badly some of the time, so by
default a model gets one: `apply_patch` for that family, `edit_file` and
`multi_edit` for every other. `edit_tools` in config.toml (or
TERM2_EDIT_TOOLS) overrides the choice for a model the table does not know
(an Azure deployment with its own name, a fine-tune).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

EDIT_TOOL_SETS: Mapping[str, tuple[str, ...]] = {
    "edit_file": ("edit_file", "multi_edit"),
    "apply_patch": ("apply_patch",),
    "both": ("edit_file", "multi_edit", "apply_patch"),
}
EDIT_TOOL_CHOICES = ("auto", *EDIT_TOOL_SETS)

# The model's own name (after any provider/ prefixes): gpt-5*, gpt-4.1*, o3*, o4*, codex-*.
_PATCH_FAMILY = re.compile(r"(gpt-5|gpt-4\.1|o3|o4|codex)([-.:@_]|$)")


def trained_on_apply_patch(model: str) -> bool:
    name = model.rsplit("/", 1)[-1].lower()
    return bool(_PATCH_FAMILY.match(name)) or "codex" in name


def edit_tool_names(model: str | None, choice: str = "auto") -> tuple[str, ...]:
    """The edit tools (besides write_file) `model` is offered under `choice` ("auto": by its family)."""
    if choice == "auto":
        choice = "apply_patch" if model and trained_on_apply_patch(model) else "edit_file"
    if choice not in EDIT_TOOL_SETS:
        raise ValueError(f"edit_tools must be one of {', '.join(EDIT_TOOL_CHOICES)}, got {choice!r}")
    return EDIT_TOOL_SETS[choice]
