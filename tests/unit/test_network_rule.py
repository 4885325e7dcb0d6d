"""Network by approval, without I/O: how hosts are written, what they match, which addresses never count,
the `[network.resolve]` table, and the gate's question (always asked, allowed once, never remembered)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from term2.app.config import ConfigError, load_settings
from term2.app.tools import WorkspaceToolbox
from term2.domain.approval import Choice
from term2.domain.network import HostError, NetworkGrant, is_public_address, parse_host, parse_hosts, shown_host
from term2.domain.workspace import Access, SessionAccess
from term2.ports.approval import ApprovalDecision
from term2.ports.llm import ToolCallRequest
from term2.ports.tools import ToolContext
from tests.fakes.approvers import FixedApprover
from tests.fakes.sandboxes import CannedSandbox
from tests.fakes.turns import live_turn


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("PyPI.org", "pypi.org"),
        ("pypi.org.", "pypi.org"),
        ("registry.test:8080", "registry.test:8080"),
        ("*.Example.org", "*.example.org"),
        ("*.example.org:443", "*.example.org:443"),
        ("93.184.216.34", "93.184.216.34"),
        ("[2001:db8::1]:443", "[2001:db8::1]:443"),
        ("2001:db8::1", "[2001:db8::1]"),
    ],
)
def test_hosts_are_written_as_names_ports_and_explicit_wildcards(text: str, shown: str) -> None:
    assert str(parse_host(text)) == shown


@pytest.mark.parametrize(
    "text",
    [
        "", "https://pypi.org", "pypi.org/simple", "user@pypi.org", "*", "*.org", "a*.example.org",
        "example.*.org", "*.1.2.3.4", "pypi.org:0", "pypi.org:65536", "pypi.org:http", "-bad.org",
        "exa mple.org", "[::1", "x" * 64 + ".org",
    ],
)  # fmt: skip
def test_anything_else_is_refused_with_a_reason(text: str) -> None:
    with pytest.raises(HostError):
        parse_host(text)


def test_an_empty_or_huge_list_is_refused() -> None:
    with pytest.raises(HostError):
        parse_hosts([])
    with pytest.raises(HostError):
        parse_hosts([f"h{n}.example.org" for n in range(33)])


def test_what_a_grant_matches() -> None:
    grant = NetworkGrant(parse_hosts(["pypi.org", "*.pythonhosted.org", "registry.test:8080"]))
    assert grant.allows("pypi.org", 443) and grant.allows("PYPI.ORG.", 80)
    assert not grant.allows("pypi.org", 22)  # no port named: 80 and 443 only
    assert not grant.allows("evil-pypi.org", 443) and not grant.allows("pypi.org.evil.com", 443)
    assert grant.allows("files.pythonhosted.org", 443) and grant.allows("a.b.pythonhosted.org", 443)
    assert not grant.allows("pythonhosted.org", 443)  # the wildcard is the subdomains, not the domain
    assert not grant.allows("xpythonhosted.org", 443)
    assert grant.allows("registry.test", 8080) and not grant.allows("registry.test", 80)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
        "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fd00::1", "fd00:ec2::254", "fc00::1", "fe80::1",
        "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1",
        "2002:101:101::1", "64:ff9b:1::a9fe:a9fe", "64:ff9b:1::101:101", "192.0.0.100", "192.0.0.9",
        "2001:20::1", "2001:3::1", "2001:db8::1", "not-an-ip",
    ],
)  # fmt: skip
def test_no_name_leads_to_the_users_own_machine_or_network(address: str) -> None:
    assert not is_public_address(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:1.1.1.1"])
def test_public_addresses_are_public(address: str) -> None:
    assert is_public_address(address)


@given(st.ip_addresses())
def test_a_public_address_is_never_loopback_private_or_link_local(ip: object) -> None:
    import ipaddress

    address = ipaddress.ip_address(str(ip))
    if is_public_address(str(address)):
        assert not (address.is_loopback or address.is_private or address.is_link_local or address.is_multicast)


def _settings(tmp_path: Path, text: str) -> object:
    config = tmp_path / "config.toml"
    config.write_text(text)
    return load_settings({"TERM2_CONFIG": str(config)})


def test_the_host_map_is_read_like_curl_resolve(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path, '[network.resolve]\n"Registry.test:80" = "127.0.0.1:18555"\n"v6.test:443" = "[::1]:8443"\n'
    )
    assert settings.network_resolve == {  # type: ignore[attr-defined]
        ("registry.test", 80): ("127.0.0.1", 18555),
        ("v6.test", 443): ("::1", 8443),
    }


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[network.resolve]\n"registry.test" = "127.0.0.1:1"\n', "needs a port"),
        ('[network.resolve]\n"registry.test:80" = "localhost:1"\n', "IP address"),
        ('[network.resolve]\n"registry.test:80" = 5\n', "address:port"),
        ('[network.resolve]\n"registry.test:80" = "127.0.0.1:99999"\n', "port"),
        ('[network]\nallow = ["x"]\n', "unknown keys"),
        ('network = "open"\n', "must be a table"),
    ],
)
def test_a_bad_host_map_is_a_config_error_naming_the_entry(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        _settings(tmp_path, text)


# --- the gate ---------------------------------------------------------------------------------------


def _ctx(root: Path, approver: FixedApprover, sandbox: CannedSandbox, access: SessionAccess) -> ToolContext:
    async def ignore(_: object) -> None:
        pass

    return ToolContext("s1", access, approver, sandbox, ignore, ignore, live_turn())


@pytest.mark.anyio
async def test_a_command_asking_for_hosts_is_always_asked_and_allowed_once_only(tmp_path: Path) -> None:
    access = SessionAccess(str(tmp_path))
    access.grant(Choice.ALLOW_FOLDER_SESSION, str(tmp_path), str(tmp_path), Access.EXECUTE)  # commands granted here
    approver, sandbox = FixedApprover(), CannedSandbox()
    toolbox = WorkspaceToolbox()
    call = ToolCallRequest("call_1", "run_shell", json.dumps({"command": "npm ci", "network": ["registry.npmjs.org"]}))
    await toolbox.execute(
        ToolCallRequest("call_0", "run_shell", '{"command": "ls"}'), _ctx(tmp_path, approver, sandbox, access)
    )
    assert approver.requests == []  # the folder grant covers commands without network
    for _ in range(2):
        await toolbox.execute(call, _ctx(tmp_path, approver, sandbox, access))
    assert len(approver.requests) == 2  # asked each time: nothing was remembered
    request = approver.requests[0]
    assert request.title == f"Allow `npm ci` in {tmp_path} with network access to registry.npmjs.org?"
    assert [o.choice for o in request.options] == [Choice.ALLOW_ONCE, Choice.REJECT]
    assert [str(c.network) for c in sandbox.commands] == ["None", "registry.npmjs.org", "registry.npmjs.org"]


@pytest.mark.anyio
async def test_an_allow_always_answer_to_a_network_question_grants_nothing(tmp_path: Path) -> None:
    access = SessionAccess(str(tmp_path))
    approver, sandbox = FixedApprover(ApprovalDecision(Choice.ALLOW_FOLDER_SESSION)), CannedSandbox()
    call = ToolCallRequest("call_1", "run_code", json.dumps({"code": "print(1)", "network": ["pypi.org"]}))
    text = await WorkspaceToolbox().execute(call, _ctx(tmp_path, approver, sandbox, access))
    assert "unknown_option" in text and sandbox.commands == []  # an option that was not offered: denied
    assert access.workspace.grants.run_folders == frozenset()


@pytest.mark.anyio
async def test_a_bad_network_argument_fails_before_anyone_is_asked(tmp_path: Path) -> None:
    approver, sandbox = FixedApprover(), CannedSandbox()
    for bad in ('"pypi.org"', '["https://pypi.org/simple"]', "[]", "[1]"):
        call = ToolCallRequest("call_1", "run_shell", '{"command": "pip install x", "network": ' + bad + "}")
        text = await WorkspaceToolbox().execute(call, _ctx(tmp_path, approver, sandbox, SessionAccess(str(tmp_path))))
        assert "argument 'network'" in text, text
    assert approver.requests == [] and sandbox.commands == []


def test_a_refused_name_is_shown_in_printable_ascii() -> None:
    assert shown_host("pypi.org") == "pypi.org"
    assert shown_host("a\x1b[2J\n b\\\u202e.test") == "a\\x1b[2J\\x0a\\x20b\\x5c\\u202e.test"
