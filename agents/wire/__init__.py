"""The providers' HTTP APIs on the wire, one module per API, each with its one error map:

    openai_chat.py          OpenAI's chat completions (POST /v1/chat/completions)
    openai_responses.py     OpenAI's Responses API (POST /v1/responses), with chat completions' errors
    anthropic_messages.py   Anthropic's Messages API (POST /v1/messages)
    calls.py                what they share: the call a request asks for, the usage, a WireError

Two servers speak these APIs and build every body here: the gateway that agents of yours call
(agents/gateway/server.py) and the scripted provider that tests and the `local` model use
(agents/llm/server.py). One module per API means an agent sees the same answer, and the same error
type for the same status, whichever of the two it talks to."""
