"""The providers' request rules, enforced by the fake LLM server, with their real error bodies.

A test that passes against a fake accepting what the real provider rejects is
worthless, so every request is checked before it may take a scripted reply. A
violation answers 400 (401 for authentication) with the body the real API sends
(wording copied from the real APIs where known, otherwise modelled on them), and is
recorded with status "error" and a short `rejection` reason.

OpenAI chat completions
  * `model` required; `messages` required and non-empty; each role one of
    system/developer/user/assistant/tool; a `tool` message has a `tool_call_id`.
  * Tool results: every `tool` message answers a `tool_calls` id of the assistant
    message right before its group of tool messages, and every such id is answered
    before the next non-tool message (or the end of the conversation).
  * `tools`: each `{"type": "function", "function": {"name": ...}}`; `tool_choice`
    and `parallel_tool_calls` only with `tools`; `stream_options` only with `stream`;
    `temperature` and `top_p` numbers.
Anthropic Messages
  * Header `anthropic-version` required. `model`, `max_tokens` (int >= 1) and
    `messages` required; `system` is top-level (a string or a list of text blocks),
    never a message role; the first message is a user message and roles alternate
    (stricter than today's API, which merges consecutive same-role messages: a
    client that relies on that merging is fragile).
  * Content non-empty (except a final assistant message) and text blocks non-empty.
  * Every `tool_use` of an assistant message is answered by a `tool_result` in the
    very next user message (tool results first in that message), and every
    `tool_result` answers a `tool_use` of the previous assistant message.
  * `tool_use` ids are unique over the whole conversation, not only within a message.
  * At most 4 blocks with `cache_control` over tools + system + messages.
  * `thinking: {"type": "enabled", "budget_tokens": B}`: B >= 1024 and B <
    max_tokens; `temperature` only 1; no forced `tool_choice`; in a tool loop (the
    last message is a user message with a `tool_result`) the last assistant message
    starts with a `thinking` or `redacted_thinking` block.
  * Every `thinking` block sent back carries a `signature` this server issued for
    exactly that thinking text; every `redacted_thinking` the `data` it issued.
Responses (`/v1/responses`): `model` required; function tools named; each
  `function_call_output` answers an earlier `function_call` of the input.
Images (both wires): `llm_image_rules`.
Gemini: `contents` required, roles user/model; a functionResponse turn comes right
  after a functionCall turn, with as many response parts as call parts.
Authentication (only with `require_key`): OpenAI and Responses `Authorization:
  Bearer <key>`, Anthropic `x-api-key` or `Authorization: Bearer <key>` (what the
  official client sends), Gemini `x-goog-api-key` or `?key=`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.llm_accounting import count_cache_control

_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
GOOGLE_STATUS = {  # the status names Gemini errors carry, by HTTP code
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_RESPONSES_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


@dataclass(frozen=True)
class Rejection:
    """A request the real provider would refuse: the status and body it answers with."""

    status: int
    body: dict[str, Any]
    reason: str
    headers: dict[str, str] = field(default_factory=dict)


def openai_error(
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    etype: str = "invalid_request_error",
    status: int = 400,
    reason: str | None = None,
) -> Rejection:
    body = {"error": {"message": message, "type": etype, "param": param, "code": code}}
    return Rejection(status, body, reason or message)


def anthropic_error(
    message: str, *, etype: str = "invalid_request_error", status: int = 400, reason: str | None = None
) -> Rejection:
    return Rejection(status, {"type": "error", "error": {"type": etype, "message": message}}, reason or message)


def gemini_error(message: str, *, status: int = 400, reason: str | None = None) -> Rejection:
    body = {"error": {"code": status, "message": message, "status": GOOGLE_STATUS.get(status, "UNKNOWN")}}
    return Rejection(status, body, reason or message)


def error_for(protocol: str, message: str, *, status: int = 400) -> Rejection:
    """A generic invalid-request error in `protocol`'s shape."""
    if protocol == "anthropic":
        return anthropic_error(message, status=status)
    if protocol == "gemini":
        return gemini_error(message, status=status)
    return openai_error(message, status=status)


# --------------------------------------------------------------------------- signatures


class SignatureBook:
    """Signatures and redacted-thinking data this server issued, as the real API can verify its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thinking: dict[str, str] = {}
        self._redacted: set[str] = set()
        self._serial = 0

    def issue(self, request_index: int, block_index: int, thinking: str) -> str:
        with self._lock:
            self._serial += 1
            signature = f"sig-{request_index}-{block_index}-{self._serial}"
            self._thinking[signature] = thinking
            return signature

    def issue_redacted(self, data: str) -> None:
        with self._lock:
            self._redacted.add(data)

    def thinking_ok(self, signature: Any, thinking: Any) -> bool:
        with self._lock:
            return isinstance(signature, str) and self._thinking.get(signature) == thinking

    def redacted_ok(self, data: Any) -> bool:
        with self._lock:
            return isinstance(data, str) and data in self._redacted


# --------------------------------------------------------------------------- authentication


def check_auth(
    protocol: str, headers: dict[str, str], query: dict[str, str], require_key: str | None
) -> Rejection | None:
    """401 (Gemini: 400/403) with the provider's body when `require_key` is set and not presented."""
    if require_key is None:
        return None
    if protocol == "anthropic":  # the official client sends the key as a Bearer token
        bearer = headers.get("authorization", "")
        key = headers.get("x-api-key") or (bearer[7:].strip() if bearer.lower().startswith("bearer ") else "")
        if not key:
            return anthropic_error("x-api-key header is required", etype="authentication_error", status=401)
        if key != require_key:
            return anthropic_error("invalid x-api-key", etype="authentication_error", status=401)
        return None
    if protocol == "gemini":
        key = headers.get("x-goog-api-key") or query.get("key") or ""
        if not key:
            return gemini_error(
                "Method doesn't allow unregistered callers (callers without established identity)."
                " Please use API Key or other form of API consumer identity to call this API.",
                status=403,
            )
        if key != require_key:
            return gemini_error("API key not valid. Please pass a valid API key.", status=400)
        return None
    auth = headers.get("authorization", "")
    if not auth.lower().startswith("bearer ") or not auth[7:].strip():
        return openai_error(
            "You didn't provide an API key. You need to provide your API key in an Authorization header"
            " using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank"
            " username) if you're accessing the API from your browser and are prompted for a username and"
            " password. You can obtain an API key from https://platform.openai.com/account/api-keys.",
            status=401,
            reason="missing API key",
        )
    key = auth[7:].strip()
    if key != require_key:
        shown = key[:3] + "*" * 10 + key[-4:] if len(key) > 8 else key
        return openai_error(
            f"Incorrect API key provided: {shown}. You can find your API key at"
            " https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
            status=401,
            reason="wrong API key",
        )
    return None


# --------------------------------------------------------------------------- context limit


def context_rejection(protocol: str, chars: int, limit: int) -> Rejection | None:
    """The provider's "prompt too long" answer when the prompt is over `limit` characters."""
    if chars <= limit:
        return None
    tokens, maximum = -(-chars // 4), limit // 4
    reason = f"context_length_exceeded: prompt of {chars} chars over max_prompt_chars={limit}"
    if protocol == "anthropic":
        return anthropic_error(f"prompt is too long: {tokens} tokens > {maximum} maximum", reason=reason)
    if protocol == "gemini":
        return gemini_error(
            f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({maximum}).",
            reason=reason,
        )
    if protocol == "responses":
        return openai_error(
            "Your input exceeds the context window of this model. Please adjust your input and try again.",
            param="input",
            code="context_length_exceeded",
            reason=reason,
        )
    return openai_error(
        f"This model's maximum context length is {maximum} tokens. However, your messages resulted in"
        f" {tokens} tokens. Please reduce the length of the messages.",
        param="messages",
        code="context_length_exceeded",
        reason=reason,
    )


# --------------------------------------------------------------------------- validation


def validate(protocol: str, body: Any, headers: dict[str, str], book: SignatureBook) -> Rejection | None:
    """The first rule of `protocol` that `body` breaks, or None."""
    if protocol == "anthropic":
        return _anthropic(body, headers, book)
    if not isinstance(body, dict) or "_raw" in body:
        message = "We could not parse the JSON body of your request."
        return error_for(protocol, message)
    if protocol == "openai":
        return _openai(body)
    if protocol == "responses":
        return _responses(body)
    if protocol == "gemini":
        return _gemini(body)
    return None


def _openai(body: dict[str, Any]) -> Rejection | None:
    if not body.get("model"):
        return openai_error("you must provide a model parameter")
    messages = body.get("messages")
    if messages is None:
        return openai_error(
            "Missing required parameter: 'messages'.", param="messages", code="missing_required_parameter"
        )
    if not isinstance(messages, list) or not messages:
        return openai_error(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            param="messages",
            code="empty_array",
        )
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in _OPENAI_ROLES:
            return openai_error(
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool',"
                " and 'developer'.",
                param=f"messages[{i}].role",
                code="invalid_value",
            )
        if role == "tool" and not msg.get("tool_call_id"):
            return openai_error(
                "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'.",
                param=f"messages.[{i}].tool_call_id",
            )
    if rejection := _openai_tool_sequence(messages):
        return rejection
    from tests.fakes.llm_image_rules import openai_images  # imports this module's error helpers

    if rejection := openai_images(str(body["model"]), messages):
        return rejection
    return _openai_tools(body)


def _openai_tool_sequence(messages: list[dict[str, Any]]) -> Rejection | None:
    group: list[str] = []  # ids of the latest assistant tool_calls, while its tool messages run
    answered: set[str] = set()
    in_group = False
    for msg in messages:
        if msg["role"] == "tool":
            if not in_group or msg.get("tool_call_id") not in group:
                return openai_error(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with"
                    " 'tool_calls'.",
                    param="messages",
                    reason=f"tool message {msg.get('tool_call_id')!r} answers no preceding tool_calls",
                )
            answered.add(str(msg["tool_call_id"]))
            continue
        if rejection := _openai_unanswered(group, answered, in_group):
            return rejection
        calls = msg.get("tool_calls") if msg["role"] == "assistant" else None
        group = [str(c.get("id")) for c in calls if isinstance(c, dict)] if isinstance(calls, list) and calls else []
        answered, in_group = set(), bool(group)
    return _openai_unanswered(group, answered, in_group)


def _openai_unanswered(group: list[str], answered: set[str], in_group: bool) -> Rejection | None:
    missing = [call_id for call_id in group if call_id not in answered]
    if not in_group or not missing:
        return None
    return openai_error(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each"
        f" 'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(missing)}",
        param="messages",
        reason=f"tool_call_ids without tool messages: {', '.join(missing)}",
    )


def _openai_tools(body: dict[str, Any]) -> Rejection | None:
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            return openai_error("Invalid type for 'tools': expected an array.", param="tools", code="invalid_type")
        for i, tool in enumerate(tools):
            kind = tool.get("type") if isinstance(tool, dict) else None
            if kind != "function":
                return openai_error(
                    f"Invalid value: '{kind}'. Supported values are: 'function' and 'custom'.",
                    param=f"tools[{i}].type",
                    code="invalid_value",
                )
            function = tool.get("function")
            if not isinstance(function, dict):
                return openai_error(
                    f"Missing required parameter: 'tools[{i}].function'.",
                    param=f"tools[{i}].function",
                    code="missing_required_parameter",
                )
            if not isinstance(function.get("name"), str) or not function["name"]:
                return openai_error(
                    f"Missing required parameter: 'tools[{i}].function.name'.",
                    param=f"tools[{i}].function.name",
                    code="missing_required_parameter",
                )
    for name in ("tool_choice", "parallel_tool_calls"):
        if body.get(name) is not None and not tools:
            return openai_error(
                f"Invalid value for '{name}': '{name}' is only allowed when 'tools' are specified.", param=name
            )
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            kind = "a string" if isinstance(value, str) else type(value).__name__
            return openai_error(
                f"Invalid type for '{name}': expected a decimal, but got {kind} instead.",
                param=name,
                code="invalid_type",
            )
    if body.get("stream_options") is not None and not body.get("stream"):
        return openai_error(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.", param="stream_options"
        )
    return None


# --------------------------------------------------------------------------- anthropic


def _blocks_of(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _types(blocks: Iterable[Any], kind: str) -> list[dict[str, Any]]:
    return [b for b in blocks if isinstance(b, dict) and b.get("type") == kind]


def _anthropic(body: Any, headers: dict[str, str], book: SignatureBook) -> Rejection | None:
    if not headers.get("anthropic-version"):
        return anthropic_error("anthropic-version: header is required")
    if not isinstance(body, dict) or "_raw" in body:
        return anthropic_error("There was an error parsing the body of your request.")
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return anthropic_error(f"{name}: Field required")
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        return anthropic_error("max_tokens: Input should be a valid integer")
    if max_tokens < 1:
        return anthropic_error("max_tokens: Input should be greater than or equal to 1")
    if rejection := _anthropic_system(body.get("system")):
        return rejection
    messages = body["messages"]
    if not isinstance(messages, list):
        return anthropic_error("messages: Input should be a valid list")
    if not messages:
        return anthropic_error("messages: at least one message is required")
    if rejection := _anthropic_roles(messages):
        return rejection
    if rejection := _anthropic_content(messages):
        return rejection
    from tests.fakes.llm_image_rules import anthropic_images  # imports this module's error helpers

    if rejection := anthropic_images(messages):
        return rejection
    if rejection := _anthropic_tool_pairs(messages):
        return rejection
    if rejection := _anthropic_tools(body.get("tools")):
        return rejection
    found = count_cache_control(body)
    if found > 4:
        return anthropic_error(f"A maximum of 4 blocks with cache_control may be provided. Found {found}.")
    if rejection := _anthropic_thinking(body, messages):
        return rejection
    return _anthropic_signatures(messages, book)


def _anthropic_system(system: Any) -> Rejection | None:
    if system is None or isinstance(system, str):
        return None
    if not isinstance(system, list):
        return anthropic_error("system: Input should be a valid string or a valid list")
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            return anthropic_error(f"system.{i}.type: Input should be 'text'")
        if not isinstance(block.get("text"), str):
            return anthropic_error(f"system.{i}.text: Field required")
    return None


def _anthropic_roles(messages: list[Any]) -> Rejection | None:
    previous = None
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role == "system":
            return anthropic_error(
                'messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter,'
                ' not "system" as an input message role.'
            )
        if role not in ("user", "assistant"):
            return anthropic_error(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            return anthropic_error('messages: first message must use the "user" role')
        if role == previous:
            return anthropic_error(
                f'messages: roles must alternate between "user" and "assistant", but found multiple "{role}"'
                " roles in a row",
                reason=f'messages.{i}: two "{role}" messages in a row',
            )
        previous = role
    return None


def _anthropic_content(messages: list[dict[str, Any]]) -> Rejection | None:
    last = len(messages) - 1
    for i, msg in enumerate(messages):
        content = msg.get("content")
        if not isinstance(content, (str, list)):
            return anthropic_error(f"messages.{i}.content: Input should be a valid list")
        if not content and not (i == last and msg["role"] == "assistant"):
            return anthropic_error(
                f"messages.{i}: all messages must have non-empty content except for the optional final assistant"
                " message"
            )
        for j, block in enumerate(_blocks_of(content)):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                return anthropic_error(f"messages.{i}.content.{j}.type: Field required")
            if block["type"] == "text" and not block.get("text") and isinstance(content, list):
                return anthropic_error(
                    "messages: text content blocks must be non-empty", reason=f"messages.{i}.content.{j}: empty text"
                )
            if block["type"] in ("tool_use", "tool_result", "thinking", "redacted_thinking"):
                expected = "user" if block["type"] == "tool_result" else "assistant"
                if msg["role"] != expected:
                    return anthropic_error(
                        f"messages.{i}.content.{j}: `{block['type']}` blocks are only allowed in `{expected}` messages"
                    )
    return None


def _anthropic_tool_pairs(messages: list[dict[str, Any]]) -> Rejection | None:
    seen: set[str] = set()
    for i, msg in enumerate(messages):
        blocks = _blocks_of(msg.get("content"))
        if msg["role"] == "assistant":
            for j, block in enumerate(blocks):
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    if str(block.get("id")) in seen:
                        return anthropic_error(
                            f"messages.{i}.content.{j}: `tool_use` ids must be unique",
                            reason=f"tool_use id {block.get('id')!r} used twice",
                        )
                    seen.add(str(block.get("id")))
            uses = [str(b.get("id")) for b in _types(blocks, "tool_use")]
            if not uses:
                continue
            following = _blocks_of(messages[i + 1].get("content")) if i + 1 < len(messages) else []
            leading: list[str] = []
            for block in following:  # tool results must come first in the next message
                if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                    break
                leading.append(str(block.get("tool_use_id")))
            missing = [u for u in uses if u not in leading]
            if missing:
                return anthropic_error(
                    f"messages.{i + 1 if i + 1 < len(messages) else i}: `tool_use` ids were found without"
                    f" `tool_result` blocks immediately after: {', '.join(missing)}. Each `tool_use` block must"
                    " have a corresponding `tool_result` block in the next message.",
                    reason=f"tool_use ids without tool_result after messages.{i}: {', '.join(missing)}",
                )
        else:
            previous = _blocks_of(messages[i - 1].get("content")) if i else []
            uses_before = {str(b.get("id")) for b in _types(previous, "tool_use")}
            for j, block in enumerate(blocks):
                is_result = isinstance(block, dict) and block.get("type") == "tool_result"
                if is_result and str(block.get("tool_use_id")) not in uses_before:
                    return anthropic_error(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks:"
                        f" {block.get('tool_use_id')}. Each `tool_result` block must have a corresponding"
                        " `tool_use` block in the previous message."
                    )
    return None


def _anthropic_tools(tools: Any) -> Rejection | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return anthropic_error("tools: Input should be a valid list")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return anthropic_error(f"tools.{i}: Input should be a valid dictionary")
        if tool.get("type") not in (None, "custom"):
            continue  # server tools (web_search_..., bash_...) have their own shapes
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            return anthropic_error(f"tools.{i}.custom.name: Field required")
        if not isinstance(tool.get("input_schema"), dict):
            return anthropic_error(f"tools.{i}.custom.input_schema: Field required")
    return None


def _anthropic_thinking(body: dict[str, Any], messages: list[dict[str, Any]]) -> Rejection | None:
    thinking = body.get("thinking")
    if thinking is None:
        return None
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "disabled", "adaptive"):
        return anthropic_error(
            "thinking: Input tag does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'"
        )
    if thinking["type"] != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool):
        return anthropic_error("thinking.enabled.budget_tokens: Field required")
    if budget < 1024:
        return anthropic_error("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    if budget >= body["max_tokens"]:
        return anthropic_error(
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at"
            f" {_THINKING_DOCS}#max-tokens-and-context-window-size"
        )
    if body.get("temperature") is not None and body["temperature"] != 1:
        return anthropic_error("`temperature` may only be set to 1 when thinking is enabled or in adaptive mode.")
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return anthropic_error("Thinking may not be enabled when `tool_choice` forces tool use.")
    last = messages[-1]
    in_tool_loop = last["role"] == "user" and bool(_types(_blocks_of(last.get("content")), "tool_result"))
    if not in_tool_loop:
        return None
    assistants = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not assistants:
        return None
    index = assistants[-1]
    first = _blocks_of(messages[index].get("content"))[:1]
    kind = first[0].get("type") if first and isinstance(first[0], dict) else None
    if kind in ("thinking", "redacted_thinking"):
        return None
    return anthropic_error(
        f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{kind}`. When"
        " `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the"
        " lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from"
        " previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at"
        f" {_THINKING_DOCS}",
        reason=f"thinking enabled in a tool loop but messages.{index} does not start with a thinking block",
    )


def _anthropic_signatures(messages: list[dict[str, Any]], book: SignatureBook) -> Rejection | None:
    for i, msg in enumerate(messages):
        for j, block in enumerate(_blocks_of(msg.get("content"))):
            kind = block.get("type")
            if kind == "thinking" and not book.thinking_ok(block.get("signature"), block.get("thinking")):
                reason = "missing" if not block.get("signature") else "unknown or not for this thinking text"
                return anthropic_error(
                    f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block",
                    reason=f"messages.{i}.content.{j}: thinking signature {reason}",
                )
            if kind == "redacted_thinking" and not book.redacted_ok(block.get("data")):
                return anthropic_error(f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block")
    return None


# --------------------------------------------------------------------------- responses and gemini


def _responses(body: dict[str, Any]) -> Rejection | None:
    if not body.get("model"):
        return openai_error("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
    for i, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or not tool.get("type"):
            return openai_error(
                f"Missing required parameter: 'tools[{i}].type'.",
                param=f"tools[{i}].type",
                code="missing_required_parameter",
            )
        if tool["type"] == "function" and not tool.get("name"):
            return openai_error(
                f"Missing required parameter: 'tools[{i}].name'.",
                param=f"tools[{i}].name",
                code="missing_required_parameter",
            )
    items = body.get("input")
    calls: set[str] = set()
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
            calls.add(str(item.get("call_id")))
        elif item.get("type") in _RESPONSES_OUTPUTS and str(item.get("call_id")) not in calls:
            return openai_error(
                f"No tool call found for function call output with call_id {item.get('call_id')}.", param="input"
            )
    return None


def _gemini(body: dict[str, Any]) -> Rejection | None:
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return gemini_error("* GenerateContentRequest.contents: contents is not specified\n")
    previous_calls = 0
    for i, item in enumerate(contents):
        role = item.get("role", "user") if isinstance(item, dict) else None
        if role not in ("user", "model", "function"):
            return gemini_error(f"Please use a valid role: user, model. (contents[{i}])")
        parts = item.get("parts") if isinstance(item, dict) else None
        if not isinstance(parts, list) or not parts:
            return gemini_error(f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.\n")
        responses = sum(1 for p in parts if isinstance(p, dict) and "functionResponse" in p)
        if responses:
            if not previous_calls:
                return gemini_error(
                    "Please ensure that function response turn comes immediately after a function call turn."
                )
            if responses != previous_calls:
                return gemini_error(
                    "Please ensure that the number of function response parts is equal to the number of function"
                    " call parts of the function call turn."
                )
        previous_calls = sum(1 for p in parts if isinstance(p, dict) and "functionCall" in p)
    return None
