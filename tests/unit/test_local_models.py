"""Issue 22's pure pieces: what goes on the OpenAI wire, how validation errors are read, how the estimate learns.

The end-to-end behaviour is in tests/e2e/test_local_models_e2e.py; here each rule is
pinned on its own, with the bodies the real servers send.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from term2.adapters.llm.http_errors import error_from_response
from term2.adapters.llm.openai_wire import chat_body
from term2.adapters.llm.validation_errors import validation_detail
from term2.app.config import ConfigError, load_settings
from term2.domain.context_estimate import ContextMemory, output_limit
from term2.ports.catalog import DeclaredModel, RequestOptions
from term2.ports.llm import BadRequest, ChatMessage, CompletionRequest, LLMError, ToolCallRequest, ToolSpec
from tests.fakes.llama_cpp_like import validation_rejection

TOOL = ToolSpec("read_file", "Read a file", {"type": "object"})
CALL = ToolCallRequest("c1", "read_file", "{}")
TOOL_TURN = CompletionRequest(
    (
        ChatMessage("user", "Read it."),
        ChatMessage("assistant", "", tool_calls=(CALL,)),
        ChatMessage("tool", "text", tool_call_id="c1"),
    ),
    (TOOL,),
    max_tokens=512,
)


# --------------------------------------------------------------------------- the wire


def test_no_message_goes_out_with_null_content() -> None:
    body = chat_body(TOOL_TURN, "gemma")
    assert [m["content"] for m in body["messages"]] == ["Read it.", "", "text"]
    assert validation_rejection(body) is None  # what llama-cpp-python's pydantic model accepts
    null = {**body, "messages": [{**m, "content": None} if m["role"] == "assistant" else m for m in body["messages"]]}
    assert validation_rejection(null) is not None


def test_defaults_are_what_openai_takes() -> None:
    body = chat_body(TOOL_TURN, "gpt-4o")
    assert body["stream_options"] == {"include_usage": True} and "tool_choice" not in body
    assert body["max_tokens"] == 512


def test_request_options_shape_the_body() -> None:
    options = RequestOptions(tool_choice="auto", stream_usage=False, extra_body=(("cache_prompt", True),))
    body = chat_body(TOOL_TURN, "gemma", options=options)
    assert body["tool_choice"] == "auto" and body["cache_prompt"] is True and "stream_options" not in body
    no_tools = chat_body(CompletionRequest(TOOL_TURN.messages), "gemma", options=options)
    assert "tool_choice" not in no_tools  # OpenAI refuses tool_choice without tools


# --------------------------------------------------------------------------- validation errors

LLAMA_500 = validation_rejection(
    {"messages": [{"role": "assistant", "content": None, "tool_calls": []}], "stream": True}
)


def test_the_one_relevant_pydantic_error_out_of_a_fastapi_text() -> None:
    assert LLAMA_500 is not None
    body = json.dumps(LLAMA_500.body).encode()
    error = error_from_response(500, {}, body, "openai/gemma")
    text = str(error)
    assert "messages[0].content: Input should be a valid string (got null)" in text, text
    assert "7 validation errors" in text and "Input should be 'system'" not in text
    assert error.status == 500 and error.transient and error.retry_limit == 1
    assert len(body) > 300 and text.index("messages[0].content") > 0


def test_fastapi_422_detail_list() -> None:
    body = {
        "detail": [
            {"type": "literal_error", "loc": ["body", "messages", 0, "typed-dict", "role"], "msg": "wrong role"},
            {"type": "missing", "loc": ["body", "model"], "msg": "Field required", "input": {}},
        ]
    }
    error = error_from_response(422, {}, json.dumps(body).encode(), "openai/m")
    assert isinstance(error, BadRequest) and not error.transient
    assert "model: Field required" in str(error), str(error)


def test_pydantic_text_inside_an_openai_error() -> None:
    message = (
        "1 validation error for ChatCompletionRequest\nmessages.2.content\n"
        "  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]\n"
        "    For further information visit https://errors.pydantic.dev/2.11/v/string_type"
    )
    detail = validation_detail({"object": "error", "message": message, "type": "BadRequestError"})
    assert detail is not None and str(detail) == "messages[2].content: Input should be a valid string (got None)"


def test_openai_invalid_request_names_its_param() -> None:
    body = {"error": {"message": "Expected a string.", "type": "invalid_request_error", "param": "stop", "code": None}}
    error = error_from_response(400, {}, json.dumps(body).encode(), "openai/gpt-4o")
    assert str(error).endswith("(HTTP 400): stop: Expected a string."), str(error)


def test_an_unsupported_feature_500_is_retried_once_at_most() -> None:
    body = {"error": {"message": "Automatic streaming tool choice is not supported", "type": "internal_server_error"}}
    error = error_from_response(500, {}, json.dumps(body).encode(), "openai/gemma")
    assert error.retry_limit == 1 and "not supported" in str(error)
    plain = error_from_response(500, {}, b'{"error": {"message": "boom"}}', "openai/gemma")
    assert plain.retry_limit is None and type(plain) is LLMError


def test_a_literal_dict_line_is_only_ever_read_as_a_literal() -> None:
    text = "2 validation errors:\n  {'loc': ('body', __import__('os')), 'msg': 'x', 'type': 't'}\n  not a dict"
    assert validation_detail(text) is None


# --------------------------------------------------------------------------- the estimate


def test_the_first_count_decides_whether_the_tools_were_shown() -> None:
    hidden = ContextMemory()
    hidden.learn(reported=2_300, without_tools=2_400, tools=1_400)  # the numbers, near enough
    assert hidden.tools_shown is False and hidden.tools(1_400) == 0 and 0.9 < hidden.ratio < 1.0
    shown = ContextMemory()
    shown.learn(reported=3_700, without_tools=2_400, tools=1_400)
    assert shown.tools_shown is True and shown.tools(1_400) == 1_400


def test_a_served_request_over_the_window_bounds_the_estimate() -> None:
    memory = ContextMemory()
    memory.bound(without_tools=2_400, tools=1_400, window=3_072)  # served, no count: the tools were not shown
    assert memory.tools_shown is False and memory.ratio == 1.0
    memory.bound(without_tools=4_000, tools=1_400, window=3_072)
    assert memory.scale(4_000) <= 3_072


def test_output_limit() -> None:
    assert output_limit(128_000, 400_000) == 128_000  # the catalog's
    assert output_limit(None, None) == 4_096
    assert output_limit(None, 2_048) == 512  # a quarter of a small window
    assert output_limit(None, 200) == 256


# --------------------------------------------------------------------------- configuration


def _settings(tmp_path: Path, text: str) -> tuple[dict[str, DeclaredModel], dict[str, RequestOptions]]:
    path = tmp_path / "config.toml"
    path.write_text(text)
    settings = load_settings({"TERM2_CONFIG": str(path)})
    return dict(settings.models), dict(settings.model_options)


def test_model_blocks_declare_limits_and_request_options(tmp_path: Path) -> None:
    models, options = _settings(
        tmp_path,
        '[models."openai/gemma"]\ncontext_window = 3072\nmax_output_tokens = 512\ntool_choice = "auto"\n'
        "stream_usage = false\nextra_body = { cache_prompt = true }\n"
        '[models."openai/gpt-4o"]\nstream_usage = false\n',
    )
    assert models == {"openai/gemma": DeclaredModel("openai", 3072, False, 512)}  # options alone declare nothing
    assert options["openai/gemma"] == RequestOptions("auto", False, (("cache_prompt", True),))
    assert options["openai/gpt-4o"] == RequestOptions(stream_usage=False)


@pytest.mark.parametrize(
    ("block", "needle"),
    [
        ('tool_choice = "sometimes"', "tool_choice must be one of"),
        ("extra_body = { messages = [] }", "may not set messages"),
        ("max_output_tokens = 0", "max_output_tokens must be at least 1"),
        ('stream_usage = "no"', "stream_usage: expected bool"),
    ],
)
def test_bad_model_options_name_the_key(tmp_path: Path, block: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        _settings(tmp_path, f'[models."openai/gemma"]\n{block}\n')


def test_turn_timeout(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("turn_timeout = 90\n")
    assert load_settings({"TERM2_CONFIG": str(path)}).turn_timeout == 90.0
    assert load_settings({"TERM2_TURN_TIMEOUT": "30"}).turn_timeout == 30.0
    with pytest.raises(ConfigError, match="turn_timeout must be a positive"):
        load_settings({"TERM2_TURN_TIMEOUT": "0"})


def test_stream_false_is_a_request_option(tmp_path: Path) -> None:
    _models, options = _settings(tmp_path, '[models."openai/gemma"]\nstream = false\n')
    assert options["openai/gemma"] == RequestOptions(stream=False)
