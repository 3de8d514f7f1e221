"""Drives `phosphor serve` with OpenAI's Python SDK, as an agent built on it would, and prints what it saw as JSON.

Usage: python3 openai_sdk.py BASE_URL API_KEY. The server's upstream is scripted by the Rust test that runs this:
a tool call, a streamed text answer, a streamed tool call, then nothing more.
"""

import json
import sys

import openai

base_url, api_key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url + "/v1", api_key=api_key, max_retries=0, timeout=120)
tools = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Reads a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]
seen = {}
messages = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "What does src/a.rs do?"},
]

# 1. A tool call, not streamed; the raw response gives the session header.
raw = client.chat.completions.with_raw_response.create(model="mock-large", messages=messages, tools=tools)
first = raw.parse()
call = first.choices[0].message.tool_calls[0]
seen["session"] = raw.headers.get("x-phosphor-session-id")
seen["first"] = {
    "finish_reason": first.choices[0].finish_reason,
    "tool": call.function.name,
    "arguments": json.loads(call.function.arguments),
    "usage_total": first.usage.total_tokens,
}
messages.append(first.choices[0].message.model_dump(exclude_none=True))
messages.append({"role": "tool", "tool_call_id": call.id, "content": 'fn main() { println!("hello") }'})

# 2. A streamed text answer, read chunk by chunk.
text = ""
finish = None
for chunk in client.chat.completions.create(model="mock-large", messages=messages, tools=tools, stream=True):
    if chunk.choices:
        text += chunk.choices[0].delta.content or ""
        finish = chunk.choices[0].finish_reason or finish
seen["second"] = {"text": text, "finish_reason": finish}
messages.append({"role": "assistant", "content": text})
messages.append({"role": "user", "content": "And src/b.rs?"})

# 3. A streamed tool call, assembled from its deltas as the SDK's users do.
with client.chat.completions.stream(model="mock-large", messages=messages, tools=tools) as stream:
    for event in stream:
        pass
    final = stream.get_final_completion()
call = final.choices[0].message.tool_calls[0]
seen["third"] = {
    "finish_reason": final.choices[0].finish_reason,
    "tool": call.function.name,
    "arguments": json.loads(call.function.arguments),
}

# 4. Errors arrive as the SDK's own exceptions.
try:
    client.chat.completions.create(model="mock-large", messages=[{"role": "wizard", "content": "hi"}])
    seen["bad_request"] = None
except openai.BadRequestError as error:
    seen["bad_request"] = {"status": error.status_code, "message": error.message}
try:
    openai.OpenAI(base_url=base_url + "/v1", api_key="wrong", max_retries=0).chat.completions.create(
        model="mock-large", messages=[{"role": "user", "content": "hi"}]
    )
    seen["wrong_key"] = None
except openai.AuthenticationError as error:
    seen["wrong_key"] = {"status": error.status_code}
seen["models"] = [model.id for model in client.models.list()]

print(json.dumps(seen))
