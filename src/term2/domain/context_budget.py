"""How much of a model's context window a session may fill, and what to shed first.

The numbers are policy, not measurement: a request is sent only while its
estimated size stays under ``threshold`` of the usable window (the window
minus what the answer needs), so a compaction happens a request early rather
than a request late. What compaction sheds first is old tool output outside a
protected recent stretch (cheap, and the model can run the tool again), and
only then the older conversation, summarised.
"""

from __future__ import annotations

from dataclasses import dataclass

from term2.domain.transcript import ModelMessage, group_starts, message_tokens

UNKNOWN_WINDOW_PROTECTED = 20_000  # tokens kept verbatim when the window is unknown (reactive path only)
NEAR_WINDOW = 0.5  # of the window: past it an empty answer is taken for an overflow
MIN_CLEARABLE_CHARS = 400  # a shorter tool result costs less than the note that replaces it


@dataclass(frozen=True, slots=True)
class ContextBudget:
    window: int | None  # tokens; None when neither the catalog nor the config knows it
    threshold: float = 0.8
    output_reserve: int | None = None  # tokens left for the answer; default a fifth of the window, at most 16k
    max_output: int | None = None  # the `max_tokens` every turn request carries (`context_estimate.output_limit`)

    @property
    def usable(self) -> int | None:
        if self.window is None:
            return None
        reserve = self.output_reserve if self.output_reserve is not None else min(16_000, self.window // 5)
        return max(self.window - reserve, self.window // 2)

    @property
    def trigger(self) -> int | None:
        """Estimated request size from which the next request compacts first."""
        usable = self.usable
        return None if usable is None else int(usable * self.threshold)

    def over(self, tokens: int) -> bool:
        trigger = self.trigger
        return trigger is not None and tokens > trigger

    def near(self, tokens: int) -> bool:
        """Whether a request of ``tokens`` (estimated) may be over the window once the server counts it.

        Half the window, because an estimate of 4 bytes a token can be off by
        that much (a tokenizer unlike it, text that JSON escapes double): an
        empty answer to a request this size is more likely an overflow than not.
        """
        return self.window is not None and tokens > self.window * NEAR_WINDOW

    @property
    def protected(self) -> int:
        """Recent tokens kept word for word by a compaction."""
        usable = self.usable
        return UNKNOWN_WINDOW_PROTECTED if usable is None else usable // 4

    @property
    def regrowth(self) -> int:
        """How much an estimate must grow past what a compaction could not lower before compacting is worth it again."""
        usable = self.usable
        return UNKNOWN_WINDOW_PROTECTED if usable is None else max(1, usable // 10)

    @property
    def target(self) -> int | None:
        """Size a compaction aims for, well under the trigger so it does not run again at once."""
        usable = self.usable
        return None if usable is None else usable // 2

    def summary_tokens(self) -> int:
        """The longest summary asked for."""
        usable = self.usable
        return 4_096 if usable is None else max(512, min(4_096, usable // 8))


def tokens_of(messages: list[ModelMessage]) -> int:
    return sum(message_tokens(m.message) for m in messages)


def outputs_to_clear(messages: list[ModelMessage], protected: int) -> tuple[str, ...]:
    """Ids of the tool results older than the last ``protected`` tokens that are worth clearing."""
    recent = 0
    boundary = len(messages)
    for index in range(len(messages) - 1, -1, -1):
        recent += message_tokens(messages[index].message)
        if recent > protected:
            boundary = index
            break
    else:
        return ()
    return tuple(
        m.message_id
        for m in messages[:boundary]
        if m.message.role == "tool" and len(m.message.content) >= MIN_CLEARABLE_CHARS
    )


def keep_from(messages: list[ModelMessage], keep_tokens: int) -> int:
    """The earliest cut (a group start) whose tail fits in ``keep_tokens``; the last group is always kept.

    0 means nothing before the tail can be cut away (one group holds it all).
    """
    starts = set(group_starts(messages))
    if not starts:
        return 0
    tail = 0
    cut = max(starts)
    for index in range(len(messages) - 1, -1, -1):
        tail += message_tokens(messages[index].message)
        if index in starts:
            if tail > keep_tokens and index < cut:
                break
            cut = index
    return cut
