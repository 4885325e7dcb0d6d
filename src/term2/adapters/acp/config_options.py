"""Session configuration and slash commands on the ACP v1 wire (ADR 0043, 0044).

The pickers (`configOptions`) and the commands (`available_commands_update`)
exist only on v1 connections: term2's v2 page defines neither, so a v2
response or update never carries them. The selects and commands themselves
come from the application; this module only names them as the schema does.
The approval mode is offered twice: as the `mode` select and as the legacy
`modes` (`SessionModeState`) for clients that only know modes; both show the
same value, and a change through one is told through the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from term2.app.session_config import MODE, Choice, Select

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v1
    from term2.app.commands import Command  # listed after `session/new` is answered, and loaded then

CATEGORIES: dict[str, v1.SessionConfigOptionCategory] = {
    "model": "model",
    "thought_level": "thought_level",
    "mode": "mode",
}


def config_options(selects: Sequence[Select]) -> list[v1.SessionConfigOption]:
    out: list[v1.SessionConfigOption] = []
    for select in selects:
        options: v1.SessionConfigSelectOptions
        if select.groups:
            groups: list[v1.SessionConfigSelectGroup] = [
                {"group": g.group, "name": g.name, "options": [_value(c) for c in g.choices]} for g in select.groups
            ]
            options = groups
        else:
            options = [_value(c) for c in select.choices]
        option: v1.SessionConfigOptionSelect = {
            "type": "select",
            "id": select.config_id,
            "name": select.name,
            "description": select.description,
            "category": CATEGORIES[select.category],
            "currentValue": select.current,
            "options": options,
        }
        out.append(option)
    return out


def _value(choice: Choice) -> v1.SessionConfigSelectOption:
    value: v1.SessionConfigSelectOption = {"value": choice.value, "name": choice.name}
    if choice.description is not None:
        value["description"] = choice.description
    return value


def mode_state(selects: Sequence[Select]) -> v1.SessionModeState | None:
    """The legacy `modes` of a session: the mode select's choices, as `SessionMode`s."""
    select = next((s for s in selects if s.config_id == MODE), None)
    if select is None:
        return None
    modes: list[v1.SessionMode] = []
    for choice in select.choices:
        mode: v1.SessionMode = {"id": choice.value, "name": choice.name}
        if choice.description is not None:
            mode["description"] = choice.description
        modes.append(mode)
    return {"currentModeId": select.current, "availableModes": modes}


def options_update(session_id: str, selects: Sequence[Select]) -> v1.SessionNotification:
    return {
        "sessionId": session_id,
        "update": {"sessionUpdate": "config_option_update", "configOptions": config_options(selects)},
    }


def mode_update(session_id: str, selects: Sequence[Select]) -> v1.SessionNotification | None:
    state = mode_state(selects)
    if state is None:
        return None
    return {
        "sessionId": session_id,
        "update": {"sessionUpdate": "current_mode_update", "currentModeId": state["currentModeId"]},
    }


def commands_update(session_id: str, commands: Sequence[Command]) -> v1.SessionNotification:
    available: list[v1.AvailableCommand] = []
    for command in commands:
        item: v1.AvailableCommand = {"name": command.name, "description": command.description}
        if command.hint is not None:
            item["input"] = {"hint": command.hint}
        available.append(item)
    return {
        "sessionId": session_id,
        "update": {"sessionUpdate": "available_commands_update", "availableCommands": available},
    }
