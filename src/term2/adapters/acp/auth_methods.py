"""v1 Authentication: what `initialize` advertises, and `authenticate` and `logout` (ADR 0047).

term2 has no account to sign in to: a provider's API key is the credential.
A client that can run term2 in a terminal (`clientCapabilities.auth.terminal`)
gets a `terminal` method whose args run `term2 login` there; any other client
gets the `agent` method, which `authenticate` answers by checking a key is
present (one stored since start counts) or saying in `auth_required` what to
set. `logout` forgets the stored keys. v2's page defines none of this, so v2
advertises nothing and the methods are v1-only. Standard library only: the
launcher's early `initialize` answer builds the advertisement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from term2.adapters.acp.errors import AUTH_REQUIRED, INVALID_PARAMS, RpcError

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v1

AGENT_METHOD = "api-key"
TERMINAL_METHOD = "term2-login"
_HOW = (
    "set a provider's key (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENROUTER_API_KEY, ...) "
    "in the environment the editor starts term2 with, or run `term2 login` in a terminal"
)


def auth_methods(client_capabilities: Any) -> list[v1.AuthMethod]:
    """The one method this client can use: `terminal` only when it said it runs one (v1 Authentication)."""
    auth = client_capabilities.get("auth") if isinstance(client_capabilities, dict) else None
    if isinstance(auth, dict) and auth.get("terminal") is True:
        terminal: v1.AuthMethodTerminalVariant = {
            "type": "terminal",
            "id": TERMINAL_METHOD,
            "name": "Log in with an API key",
            "description": "Pick a provider and paste its key; term2 checks it and stores it for later runs.",
            "args": ["login"],
        }
        return [terminal]
    agent: v1.AuthMethodAgent = {
        "id": AGENT_METHOD,
        "name": "API key",
        "description": f"term2 needs no account: {_HOW}.",
    }
    return [agent]


class Authentication(Protocol):
    def missing(self) -> str | None:
        """Why no model can be called for want of a key (naming the variable), or None; rereads stored keys."""
        ...

    def logout(self) -> None:
        """Forget the stored keys; the environment's own stay, as they were given."""
        ...


class AuthMethods:
    def __init__(self, auth: Authentication) -> None:
        self._auth = auth

    async def authenticate(self, params: Any) -> v1.AuthenticateResponse:
        method = params.get("methodId") if isinstance(params, dict) else None
        if not isinstance(method, str):
            raise RpcError(INVALID_PARAMS, "Invalid params for authenticate: methodId must be a string")
        if method == TERMINAL_METHOD:
            raise RpcError(INVALID_PARAMS, f"{TERMINAL_METHOD} is a terminal method: the client runs `term2 login`")
        if method != AGENT_METHOD:
            raise RpcError(INVALID_PARAMS, f"Invalid params for authenticate: unknown methodId {method!r}")
        missing = self._auth.missing()
        if missing is not None:
            raise RpcError(AUTH_REQUIRED, "Authentication required", {"message": f"{missing}; {_HOW}"})
        return {}

    async def logout(self, params: Any) -> v1.LogoutResponse:
        if params is not None and not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params for logout: expected an object")
        self._auth.logout()
        return {}
