"""Four pieces of the per-call work under litellm that buy us nothing, skipped where it is safe.

Measured in the LLM worker under the sweep benchmark (py-spy), they were a fifth of its CPU:

- **Success logging** (about 7%). After every call litellm builds a standard logging payload
  and dispatches it to its callbacks (Langfuse, S3, custom loggers...). We register none: the
  client keeps its own accounting. While no callback of any kind is registered, the dispatch is
  skipped; as soon as one is, litellm's own code runs again, unchanged.
- **Pricing a model litellm's map does not know** (about 9%). litellm prices every response; for
  an unmapped model (a local vLLM, the simulated provider) each attempt builds and formats an
  exception, twice per call, only to give up. After the first such failure for a (provider,
  model) the answer is known until litellm's map changes, so later calls skip straight to it:
  no cost (None), exactly what litellm itself returned. The client then asks `usage.price`, which says the same. Mapped models
  are priced by litellm every time, as before.
- **Cookies of responses that set none** (about 4%). httpx feeds every response through the
  standard library's cookie jar, building two adapter objects, to find no `Set-Cookie` header.
  A response without one is now skipped; one with it is handled as before.

- **Looking up a model litellm's map does not know** (about 4%). Before every call litellm looks
  the model up (to see whether it should go to the Responses API); for an unmapped model that
  walks every candidate name and fallback, then raises, which litellm catches and ignores. The
  failure is remembered per (model, provider) until litellm's map changes (its mutation counter,
  which `register_model` bumps), and raised again at once. Found models are looked up every time.

All four are exact: the reply, its usage, its cost and any cookie are what they would have been.
tests/test_llm_lean.py checks each, against the real server over HTTP.
"""

from __future__ import annotations

from typing import Any

import httpx
import litellm
from litellm import main as _main
from litellm import utils as _utils
from litellm.litellm_core_utils.litellm_logging import (
    Logging,
    use_custom_pricing_for_model,
)

_original_logging_helper = _utils._client_async_logging_helper
_original_cost = Logging._response_cost_calculator
_original_extract_cookies = httpx.Cookies.extract_cookies
_original_model_info = _main._get_model_info_helper
_CALLBACK_LISTS = ("callbacks", "success_callback", "_async_success_callback", "input_callback",
                   "failure_callback", "_async_failure_callback", "service_callback")
UNPRICED: set[tuple[Any, ...]] = set()  # (provider, model, map_version()) litellm could not price
UNMAPPED: dict[tuple[Any, ...], tuple[type[Exception], tuple[Any, ...]]] = {}  # lookup -> the failure it raised


def map_version() -> tuple[int, int]:
    """Changes whenever litellm's model map does (replaced, or changed through `register_model`)."""
    return id(litellm.model_cost), _utils.get_model_cost_mutation_generation()


def callbacks_registered() -> bool:
    return any(getattr(litellm, name, None) for name in _CALLBACK_LISTS)


async def _logging_helper(logging_obj: Any, result: Any, start_time: Any, end_time: Any,
                          is_completion_with_fallbacks: bool) -> None:
    if callbacks_registered() or getattr(logging_obj, "dynamic_success_callbacks", None) \
            or getattr(logging_obj, "dynamic_async_success_callbacks", None):
        await _original_logging_helper(logging_obj=logging_obj, result=result, start_time=start_time,
                                       end_time=end_time, is_completion_with_fallbacks=is_completion_with_fallbacks)


def _response_cost(self: Any, result: Any, cache_hit: bool | None = None, litellm_model_name: str | None = None,
                   router_model_id: str | None = None) -> float | None:
    key = (self.model_call_details.get("custom_llm_provider"), litellm_model_name or self.model, map_version())
    custom = use_custom_pricing_for_model(getattr(self, "litellm_params", None))  # priced per call: never skipped
    if key in UNPRICED and not custom:
        return None
    self.model_call_details.pop("response_cost_failure_debug_information", None)
    cost = _original_cost(self, result=result, cache_hit=cache_hit, litellm_model_name=litellm_model_name,
                          router_model_id=router_model_id)
    if cost is None and not custom and "response_cost_failure_debug_information" in self.model_call_details:
        UNPRICED.add(key)
    return cost


def _model_info(model: str, custom_llm_provider: str | None = None, api_base: str | None = None,
                api_key: str | None = None) -> Any:
    # A key may change what a provider's lookup finds: lookups with one are never remembered.
    key = None if api_key is not None else (model, custom_llm_provider, api_base, map_version())
    if key is not None and (failure := UNMAPPED.get(key)) is not None:
        raise failure[0](*failure[1])
    try:
        return _original_model_info(model=model, custom_llm_provider=custom_llm_provider, api_base=api_base,
                                    api_key=api_key)
    except Exception as exc:
        if key is not None and _rebuildable(exc):
            if len(UNMAPPED) >= 1024:
                UNMAPPED.clear()
            UNMAPPED[key] = (type(exc), exc.args)
        raise


def _rebuildable(exc: Exception) -> bool:
    try:
        return type(type(exc)(*exc.args)) is type(exc)
    except Exception:  # noqa: BLE001 — an exception that cannot be made again is simply not remembered
        return False


def _extract_cookies(self: httpx.Cookies, response: httpx.Response) -> None:
    if "set-cookie" in response.headers or "set-cookie2" in response.headers:  # case-insensitive
        _original_extract_cookies(self, response)


def install() -> None:
    """Idempotent."""
    httpx.Cookies.extract_cookies = _extract_cookies  # type: ignore[method-assign]
    _utils._client_async_logging_helper = _logging_helper
    Logging._response_cost_calculator = _response_cost
    _main._get_model_info_helper = _model_info  # litellm.main's own name for it: the pre-call lookup only


__all__ = ["UNMAPPED", "UNPRICED", "callbacks_registered", "install", "map_version"]
