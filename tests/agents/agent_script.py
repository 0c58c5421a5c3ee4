"""An agent program for the tests: stdlib only, reads its example on stdin, prints its answer.

``mode`` in the example picks its behaviour: ``tools`` (a tool loop to a final answer),
``crash`` (one call, then exit 3), ``hang`` (one call, then a child and itself sleep),
``flood`` (calls until the proxy refuses), ``binary`` (non-UTF-8 on stdout and stderr).
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request


def chat(messages):
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": "any", "messages": messages}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        return json.loads(reply.read())["choices"][0]


example = json.load(sys.stdin)
mode = example.get("mode", "tools")
messages = list(example["prompt_messages"])
print(f"agent starting in mode {mode}", file=sys.stderr, flush=True)
time.sleep(0.2)  # a line is timed when benchmax reads it: let it be read before the next call
if mode == "tools":
    for turn in range(5):
        choice = chat(messages)
        message = choice["message"]
        messages.append(message)
        if not message.get("tool_calls"):
            print(message["content"])
            print("answered", file=sys.stderr, flush=True)
            sys.exit(0)
        for call in message["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(args["a"] + args["b"])})
            print(f"turn {turn}: add = {args['a'] + args['b']}", file=sys.stderr, flush=True)
            time.sleep(0.2)
elif mode == "crash":
    chat(messages)
    print("Traceback: boom, the agent fell over", file=sys.stderr, flush=True)
    sys.exit(3)
elif mode == "hang":
    chat(messages)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"child pid {child.pid}", file=sys.stderr, flush=True)
    time.sleep(600)
elif mode == "flood":
    while True:
        try:
            chat(messages)
        except urllib.error.HTTPError as error:
            print(f"refused: {error.code} {error.read().decode()[:200]}", file=sys.stderr, flush=True)
            print("gave up")
            sys.exit(0)
elif mode == "binary":
    choice = chat(messages)
    sys.stderr.buffer.write(b"bad bytes \xff\xfe on stderr\n")
    sys.stdout.buffer.write(choice["message"]["content"].encode() + b" \xff\xfe")
    sys.stdout.flush()
