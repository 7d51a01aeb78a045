import wakeful.providers as providers

EXPECTED = {
    "AnthropicProvider",
    "CHARS_PER_TOKEN",
    "Finish",
    "FinishReason",
    "LocalProvider",
    "ModelRequest",
    "ModelSpec",
    "OpenAIProvider",
    "Provider",
    "ProviderFamily",
    "ReasoningDelta",
    "Script",
    "ScriptedProvider",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolChoice",
    "ToolSpec",
    "Usage",
    "UsageReport",
    "check_model",
    "default_limits",
    "estimate_message_tokens",
    "estimate_request_tokens",
    "estimate_text_tokens",
    "load_script",
    "make_provider",
    "parse_model_spec",
    "parse_script",
    "retry_after_ms",
    "scripted_call_id",
}


def test_all_is_the_documented_surface():
    assert set(providers.__all__) == EXPECTED
    assert all(hasattr(providers, name) for name in providers.__all__)


def test_every_stream_event_names_its_type():
    from wakeful.messages import assistant

    usage = providers.Usage(1, 2)
    events = [
        providers.TextDelta("a"),
        providers.ReasoningDelta("b"),
        providers.ToolCallDelta("c", "n", "{}"),
        providers.UsageReport(usage),
        providers.Finish("stop", assistant("x"), usage),
    ]
    assert [e.type for e in events] == [
        "text_delta",
        "reasoning_delta",
        "tool_call_delta",
        "usage",
        "finish",
    ]
