"""Drives the Anthropic Messages and OpenAI Responses fronts of `phosphor serve` with Anthropic's and OpenAI's
Python SDKs, as agents built on them would, and prints what the SDKs parsed as JSON.

Usage: python3 fronts_sdk.py BASE_URL API_KEY. The server's upstream is scripted by the Rust test that runs this:
a tool call, a streamed text answer (Anthropic), then a tool call and a streamed text answer (Responses).
"""

import json
import sys

import anthropic
import openai

base_url, api_key = sys.argv[1], sys.argv[2]
seen = {}

# Anthropic Messages.
claude = anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
tools = [
    {
        "name": "read_file",
        "description": "Reads a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    }
]
messages = [{"role": "user", "content": "What does src/a.rs do?"}]
first = claude.messages.create(
    model="claude-sonnet-4-5", max_tokens=1024, system="You are a coding agent.", messages=messages, tools=tools
)
use = next(block for block in first.content if block.type == "tool_use")
seen["anthropic_first"] = {
    "stop_reason": first.stop_reason,
    "tool": use.name,
    "input": use.input,
    "input_tokens": first.usage.input_tokens,
}
messages.append({"role": "assistant", "content": [block.model_dump() for block in first.content]})
messages.append(
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "fn main() {}"}]}
)
counted = claude.messages.count_tokens(
    model="claude-sonnet-4-5", system="You are a coding agent.", messages=messages, tools=tools
)
seen["anthropic_count"] = counted.input_tokens
with claude.messages.stream(
    model="claude-sonnet-4-5", max_tokens=1024, system="You are a coding agent.", messages=messages, tools=tools
) as stream:
    streamed = "".join(stream.text_stream)
    final = stream.get_final_message()
seen["anthropic_second"] = {"text": streamed, "stop_reason": final.stop_reason, "final_text": final.content[0].text}
try:
    claude.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": [{"type": "video"}]}])
except anthropic.BadRequestError as err:
    seen["anthropic_bad_request"] = {"status": err.status_code, "message": err.body["error"]["message"]}
try:
    anthropic.Anthropic(base_url=base_url, api_key="wrong", max_retries=0).messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    )
except anthropic.AuthenticationError as err:
    seen["anthropic_wrong_key"] = {"status": err.status_code}

# OpenAI Responses, stateless as Codex uses it.
client = openai.OpenAI(base_url=base_url + "/v1", api_key=api_key, max_retries=0, timeout=120)
functions = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Reads a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    }
]
items = [{"role": "user", "content": "What does src/b.rs do?"}]
response = client.responses.create(
    model="gpt-5", instructions="You are a coding agent.", input=items, tools=functions, store=False
)
call = next(item for item in response.output if item.type == "function_call")
seen["responses_first"] = {
    "status": response.status,
    "tool": call.name,
    "arguments": json.loads(call.arguments),
    "call_id": call.call_id,
    "input_tokens": response.usage.input_tokens,
}
items.append({"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments})
items.append({"type": "function_call_output", "call_id": call.call_id, "output": "fn main() {}"})
deltas = []
completed = None
with client.responses.stream(
    model="gpt-5", instructions="You are a coding agent.", input=items, tools=functions, store=False
) as stream:
    for event in stream:
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
    completed = stream.get_final_response()
seen["responses_second"] = {"text": "".join(deltas), "output_text": completed.output_text, "status": completed.status}
try:
    client.responses.create(model="gpt-5", input="hi", previous_response_id="resp_1")
except openai.BadRequestError as err:
    seen["responses_bad_request"] = {"status": err.status_code, "message": err.body["message"]}

print(json.dumps(seen))
