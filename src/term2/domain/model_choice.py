"""The rules of a session's model and effort choice (ADR 0043), free of how they are offered or sent.

A session keeps the model and effort it was started with or switched to. An
effort only means something to a model that reasons; a switch keeps the
session's effort where the new model accepts it and drops it (the model's own
default) where it does not, so a choice never sends a field the model refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

EFFORT_LEVELS = ("minimal", "low", "medium", "high")  # `--effort`'s values, lowest first


@dataclass(frozen=True, slots=True)
class ModelChoice:
    model: str  # as `--model` takes it: "<provider>/<model>" or a catalog id
    effort: str | None = None  # None: none sent, the model's default

    def switched_to(self, model: str, accepted: tuple[str, ...]) -> ModelChoice:
        """Another model; the effort stays only where the new model accepts it."""
        return ModelChoice(model, self.effort if self.effort in accepted else None)

    def with_effort(self, effort: str | None, accepted: tuple[str, ...]) -> ModelChoice:
        """Another effort for the same model; one it does not accept is refused."""
        if effort is not None and effort not in accepted:
            shown = ", ".join(accepted) if accepted else "none (it does not reason)"
            raise ValueError(f"{self.model} does not take effort {effort!r}; it takes {shown}")
        return ModelChoice(self.model, effort)


def model_name(model: str) -> str:
    """What a picker shows of a model id: its name after the provider."""
    return model.partition("/")[2] or model


def model_provider(model: str) -> str:
    """The provider a model id names (its first part), or "" for a bare catalog id."""
    head, slash, _ = model.partition("/")
    return head if slash else ""
