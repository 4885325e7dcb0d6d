"""The `term2 acp` argument grammar, parsed with the standard library alone.

Editors spawn `term2 acp` for every window, so its parsing must be strict and
cheap: three flags, nothing else, and every refusal is exit status 1 with
stdout untouched. The rich-click CLI shows these same flags in its help.
"""

from __future__ import annotations

from term2.app.config import EFFORTS, AcpArgs

FLAGS = {
    "--provider": "provider name, e.g. openai, anthropic, ollama_chat",
    "--model": "exact model id or <provider>/<model>",
    "--effort": "reasoning effort: " + ", ".join(EFFORTS),
}


class AcpUsageError(Exception):
    """A refused command line; the message is the diagnostic for stderr."""


def parse_acp_args(argv: list[str]) -> AcpArgs:
    values: dict[str, str] = {}
    tokens = iter(argv)
    for token in tokens:
        if not token.startswith("-") or token == "-":
            raise AcpUsageError(f"unexpected argument: {token!r}")
        name, eq, inline = token.partition("=")
        if name not in FLAGS:
            raise AcpUsageError(f"unknown option: {name!r} (term2 acp accepts only --provider, --model, --effort)")
        value = inline if eq else next(tokens, None)
        if value is None or (not eq and value.startswith("--")):
            raise AcpUsageError(f"option {name} requires a value")
        if not value:
            raise AcpUsageError(f"option {name} requires a non-empty value")
        if name in values:
            raise AcpUsageError(f"option {name} given more than once")
        values[name] = value
    effort = values.get("--effort")
    if effort is not None and effort not in EFFORTS:
        raise AcpUsageError(f"invalid value for --effort: {effort!r} (choose from {', '.join(EFFORTS)})")
    return AcpArgs(values.get("--provider"), values.get("--model"), effort)
