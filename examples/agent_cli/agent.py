"""The calculator agent as a program of its own: the example on stdin, the endpoint in
OPENAI_BASE_URL/OPENAI_API_KEY, the final answer on stdout, its log on stderr."""

import json
import sys

import httpx
import openai

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} two numbers",
            "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}},
        },
    }
    for name in ("add", "multiply")
]


def run_tool(name, arguments):
    try:
        args = json.loads(arguments)
        a, b = float(args["a"]), float(args["b"])
    except (ValueError, KeyError, TypeError) as exc:
        return f"error: {exc}"
    return f"{a + b:g}" if name == "add" else f"{a * b:g}" if name == "multiply" else "error: unknown tool"


def main():
    example = json.load(sys.stdin)
    messages = list(example["prompt_messages"])
    client = openai.OpenAI(max_retries=0, http_client=httpx.Client(trust_env=False))
    for turn in range(6):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            print(message.content or "")
            return
        for call in message.tool_calls:
            result = run_tool(call.function.name, call.function.arguments)
            print(f"turn {turn}: {call.function.name}({call.function.arguments}) = {result}", file=sys.stderr)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


main()
