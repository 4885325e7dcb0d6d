"""What a session's context estimate learns from the provider's own counts, and the output limit it asks for.

term2 estimates a request at ~4 bytes a token until the provider counts it.
That guess is off both ways (code runs under 4 bytes a token, prose over),
and it counts the tool definitions, which some servers never show the model:
llama-cpp-python's ``chatml-function-calling`` format renders them only when
``tool_choice`` is set. An estimate that overshoots compacts every turn and
reports more than the window holds; one that undershoots sends what does not
fit. So the first reported prompt count decides whether the tools were shown,
every count resets the bytes-to-tokens ratio, and both are kept for the
session's later turns (`ContextMemory`), in memory: a new process starts from
the plain estimate again and learns from its first count. A server that never
counts still teaches something: a request estimated over the window that it
served did fit, so the tools were not shown or the ratio is lower.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_MODEL_OUTPUT = 4_096  # tokens one response may take when neither the catalog nor the config says
MIN_OUTPUT = 256
MIN_RATIO, MAX_RATIO = 0.25, 4.0  # a count outside this is a server quirk, not a tokenizer


def output_limit(known: int | None, window: int | None) -> int:
    """The ``max_tokens`` of every turn request: the model's own limit, else a bound that fits a small window.

    An unknown local model gets at most 4,096 tokens and at most a quarter of a
    declared window, so a model that never stops on its own ends within
    minutes instead of running until its context is full.
    """
    if known is not None:
        return known
    if window is None:
        return UNKNOWN_MODEL_OUTPUT
    return max(MIN_OUTPUT, min(UNKNOWN_MODEL_OUTPUT, window // 4))


@dataclass
class ContextMemory:
    """One session's lessons about its context estimate, kept across its turns.

    ``count`` is the provider's last count and the id of the last message it
    covered, so a new turn starts from it instead of from a fresh estimate;
    ``floor`` is the occupancy a compaction could not bring under the budget's
    trigger, below which compacting again would only evict the server's cache.
    """

    ratio: float = 1.0  # provider tokens per estimated token
    tools_shown: bool | None = None  # None until the first count tells
    count: tuple[int, str] | None = None
    floor: int | None = None
    counts: int = 0  # how many counts taught this memory
    probed_at: int | None = None  # the estimate when term2 last asked an uncounting server for a count

    def probe_due(self, estimate: int, regrowth: int) -> bool:
        """Whether to ask the server for a count: never yet, or the estimate grew since the last ask.

        Occasional by design: a count costs the server a prompt evaluation (a local server's prefix cache
        makes it cheap for the request that follows, but not free)."""
        return self.probed_at is None or estimate > self.probed_at + regrowth

    def learn_text(self, reported: int, estimated: int) -> None:
        """The server's tokenizer counted ``reported`` tokens in text estimated at ``estimated``: the ratio only."""
        if reported <= 0 or estimated <= 0:
            return
        self.ratio = min(MAX_RATIO, max(MIN_RATIO, reported / estimated))
        self.counts += 1

    def tools(self, estimated: int) -> int:
        """The tools' share of a request, as the model sees it (0 where the server does not show them)."""
        return 0 if self.tools_shown is False else estimated

    def scale(self, estimated: int) -> int:
        return round(estimated * self.ratio)

    def learn(self, reported: int, without_tools: int, tools: int) -> None:
        """The provider counted ``reported`` tokens for a request estimated at ``without_tools`` + ``tools``.

        The first count decides the tools: a count nearer the estimate without
        them than with them means the server did not show them (bytes a token
        vary far less between the two parts than a whole tool list weighs).
        """
        if reported <= 0 or without_tools <= 0:
            return
        if self.tools_shown is None and tools > 0:
            self.tools_shown = reported > without_tools + tools / 2
        seen = without_tools + self.tools(tools)
        self.ratio = min(MAX_RATIO, max(MIN_RATIO, reported / seen))
        self.counts += 1

    def bound(self, without_tools: int, tools: int, window: int) -> None:
        """A request (with its answer) estimated over ``window`` was served with no count: it did fit.

        Servers that report no usage (llama-cpp-python while streaming) still
        teach this much. The likeliest error is tools the model was not shown,
        so they go first; otherwise the ratio comes down to what fitted.
        """
        if self.scale(without_tools + self.tools(tools)) <= window:
            return
        if self.tools_shown is None and tools > 0 and self.scale(without_tools) <= window:
            self.tools_shown = False
            return
        seen = without_tools + self.tools(tools)
        self.ratio = max(MIN_RATIO, min(self.ratio, window / seen))

    @property
    def calibrated(self) -> bool:
        return self.counts > 0
