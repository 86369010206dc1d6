"""ModelError: every failure of a model call, translated at the litellm boundary.

`classify` is the only code that looks at litellm's exception types. It decides what kind of
failure it was, whether a retry can help, and how long the provider asked us to wait. Reasons are
redacted, so an API key echoed by a provider never reaches a log line or a traceback. `redact` is
also what the client applies to everything a provider returns (`transport.Reply.redacted`).
"""

from __future__ import annotations

import email.utils
import functools
import json
import re
import time
import urllib.parse
from collections.abc import Iterable
from typing import Any

from foundation.errors import OrchestratorError

# Kinds a retry can cure; everything else (auth, bad_request, context_window, not_found, setup, unknown) is fatal.
# "overloaded" (Anthropic's 529) is the provider short of capacity, not failing: kept apart from
# "server" so a sweep's failures say which it was (the cure is fewer calls at once, not a bug report).
RETRYABLE = frozenset({"rate_limit", "timeout", "connection", "server", "overloaded", "malformed"})
_PREFIXES = re.compile(r"^(?:(?:litellm\.)?\w+(?:Error|Timeout): |\w+(?:Exception|Error) - )*")
_OVERLOADED = 529  # Anthropic's status for "overloaded_error"
_BODY_ECHO = re.compile(r",? Original Response: .*", re.DOTALL)
_KEY_PATTERN = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")  # OpenAI-style keys, even ones we were not given
# A "key" shorter than this (a local server's "x") is left alone: replacing it would star half of
# every text, and a key that short protects nothing anyway.
MIN_SECRET_CHARS = 4


class ModelError(OrchestratorError):
    """A model call failed; `kind` says how, `retryable` whether trying again could help."""

    def __init__(self, model: str, reason: str, *, kind: str = "unknown", status: int | None = None,
                 retry_after: float | None = None, attempts: int = 1) -> None:
        super().__init__(f"{model}: {reason}" + (f" (after {attempts} attempts)" if attempts > 1 else ""))
        self.model = model
        self.reason = reason
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.attempts = attempts

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE

    def after(self, attempts: int) -> ModelError:
        """The same error, saying how many attempts were spent on it."""
        return ModelError(self.model, self.reason, kind=self.kind, status=self.status,
                          retry_after=self.retry_after, attempts=attempts)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove every known secret, in every form of `_forms`, and anything shaped like an API key,
    from `text`. A Bearer header's value loses its key: `Bearer ***`."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_CHARS:
            for form in _forms(secret):
                text = text.replace(form, "***")
    return _KEY_PATTERN.sub("sk-***", text)


@functools.lru_cache(maxsize=64)  # the client redacts every reply with the same few keys
def _forms(secret: str) -> tuple[str, ...]:
    """`secret` as a provider may echo it: as it is, escaped inside JSON text (a tool call's
    arguments), and URL-encoded; the longest first, so a form holding another goes whole."""
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
             urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)}
    return tuple(sorted(forms, key=len, reverse=True))


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _kind(exc: BaseException) -> str:
    # Imported here: litellm raised `exc`, so they are loaded; a sweep of offline models never is.
    import httpx
    import openai

    from ._litellm import litellm

    chain = _chain(exc)
    if any(isinstance(e, json.JSONDecodeError) for e in chain):
        return "malformed"
    # Order matters: litellm reports a refused connection as an InternalServerError wrapping it.
    if any(isinstance(e, (openai.APITimeoutError, httpx.TimeoutException)) for e in chain):
        return "timeout"
    if any(isinstance(e, (openai.APIConnectionError, httpx.TransportError)) for e in chain):
        # litellm calls any exception it does not know a connection error, an optional package it
        # imports per call (its MCP gateway's, for any call with `tools`) missing too: no retry installs it.
        return "setup" if any(isinstance(e, ImportError) for e in chain) else "connection"
    table: list[tuple[type[BaseException], str]] = [
        (litellm.exceptions.ContextWindowExceededError, "context_window"),
        (openai.AuthenticationError, "auth"), (openai.PermissionDeniedError, "auth"),
        (openai.RateLimitError, "rate_limit"), (openai.NotFoundError, "not_found"),
        (openai.BadRequestError, "bad_request"), (openai.UnprocessableEntityError, "bad_request"),
    ]
    for cls, kind in table:
        if isinstance(exc, cls):
            return kind
    if _status(exc) == _OVERLOADED or "overloaded_error" in str(exc):
        return "overloaded"
    status = getattr(exc, "status_code", None)
    return "server" if isinstance(status, int) and status >= 500 else "unknown"


def _status(exc: BaseException) -> int | None:
    """The provider's HTTP status. litellm raises Anthropic's 529 as a 500 (InternalServerError);
    the 529 stays on the exception it wraps."""
    statuses = [getattr(e, "status_code", None) for e in _chain(exc)]
    if _OVERLOADED in statuses:
        return _OVERLOADED
    return statuses[0] if isinstance(statuses[0], int) else None


def retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (Retry-After or retry-after-ms), if it said."""
    # litellm 1.100.5 keeps the provider's headers here; `exc.response.headers` is a blank copy.
    headers: Any = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _provider_message(text: str) -> str:
    """The message of a provider's error body, else `text` itself: OpenAI's `{"error": {"message": ...}}`
    or Anthropic's `{"type": "error", "error": {"type": ..., "message": ...}}`.

    The openai SDK extracts it; litellm's own HTTP handler passes the body on whole, and for some
    statuses with advice of its own after it ("... Handle with `litellm.InternalServerError`.").
    """
    if not text.startswith("{"):
        return text
    try:
        body, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return text
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict):
        error = error.get("message") or error.get("detail")
    return error if isinstance(error, str) and error else text


def classify(exc: BaseException, model: str, secrets: Iterable[str] = ()) -> ModelError:
    """Translate a litellm/openai exception into a ModelError (never raises itself)."""
    kind = _kind(exc)
    # litellm stacks prefixes ("litellm.RateLimitError: RateLimitError: OpenAIException - ..."): keep one.
    message = f"{type(exc).__name__}: {_provider_message(_PREFIXES.sub('', str(getattr(exc, 'message', None) or exc)))}"
    if kind == "malformed":  # litellm's handler appends the whole body; the parser's complaint is enough
        message = f"malformed response body from the provider ({_BODY_ECHO.sub('', message)})"
    return ModelError(model, redact(message, secrets), kind=kind, status=_status(exc), retry_after=retry_after(exc))
