"""Reads the scripted model server with the official Python SDKs and prints what they parsed.

Usage: sdk_check.py BASE_URL openai|openai-no-usage|anthropic|openai-error|anthropic-error
"""
import json
import sys

import anthropic
import openai

base, case = sys.argv[1], sys.argv[2]
tool = {"type": "object", "properties": {"table": {"type": "string"}}}
out = {}

if case.startswith("openai"):
    client = openai.OpenAI(base_url=base + "/v1", api_key="sk-test", max_retries=0)
    kwargs = dict(
        model="test-model",
        messages=[{"role": "user", "content": "hi"}],
        tools=[{"type": "function", "function": {"name": "rows__query", "parameters": tool}}],
    )
    if case == "openai-error":
        try:
            client.chat.completions.create(stream=True, **kwargs)
        except openai.APIStatusError as e:
            out = {"status": e.status_code, "message": e.message, "type": type(e).__name__}
    else:
        if case == "openai":
            kwargs["stream_options"] = {"include_usage": True}
        with client.chat.completions.stream(**kwargs) as s:
            final = s.get_final_completion()
        m = final.choices[0].message
        out = {
            "text": m.content,
            "finish": final.choices[0].finish_reason,
            "calls": [
                {"id": c.id, "name": c.function.name, "arguments": json.loads(c.function.arguments)}
                for c in (m.tool_calls or [])
            ],
            "usage": None
            if final.usage is None
            else {"in": final.usage.prompt_tokens, "out": final.usage.completion_tokens},
        }
else:
    client = anthropic.Anthropic(base_url=base, api_key="sk-test", max_retries=0)
    kwargs = dict(
        model="test-model",
        max_tokens=256,
        messages=[{"role": "user", "content": "hi"}],
        tools=[{"name": "rows__query", "input_schema": tool}],
    )
    if case == "anthropic-error":
        try:
            client.messages.create(stream=True, **kwargs)
        except anthropic.APIStatusError as e:
            out = {"status": e.status_code, "message": e.message, "type": type(e).__name__}
    else:
        with client.messages.stream(**kwargs) as s:
            final = s.get_final_message()
        out = {
            "text": "".join(b.text for b in final.content if b.type == "text"),
            "finish": final.stop_reason,
            "calls": [
                {"id": b.id, "name": b.name, "arguments": b.input}
                for b in final.content
                if b.type == "tool_use"
            ],
            "usage": {"in": final.usage.input_tokens, "out": final.usage.output_tokens},
        }

print(json.dumps(out))
