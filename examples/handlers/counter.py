#!/usr/bin/env python3
"""counter.py - a custom agent handler (agent-run --exec) in Python 3.

Each turn asks agentkit's model for the answer (a "generate" request served
by the agent's --model, forwarded to the client as modelChunk lines), adds
the reply to the history, counts the turn in the custom state with JSON
Patch updates, and publishes the count as an artifact.  A user message
"fail" makes the turn fail without ending the conversation, the way a
Genkit custom agent loops over Run after an error.  Protocol:
docs/custom-agents.md.

    agent-run --no-store --model echo --exec examples/handlers/counter.py -m hi
"""
import json
import sys


def send(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def receive():
    line = sys.stdin.readline()
    return json.loads(line) if line else None


def text_of(message):
    parts = (message or {}).get("content") or []
    return "".join(p.get("text", "") for p in parts if isinstance(p, dict))


def run_turn(turn):
    custom = turn["state"].get("custom")
    question = text_of(turn["input"].get("message"))
    if not isinstance(custom, dict) or "count" not in custom:
        send({"custom": {"count": 0, "asked": []}})
        count = 0
    else:
        count = custom["count"]
    if question == "fail":
        send({"fail": {"status": "UNAVAILABLE", "message": "the model is resting",
                       "continue": True}})
        return
    send({"generate": {"forward": True}})
    answer = receive()
    generated = (answer or {}).get("generated")
    if generated is None:
        sys.exit("counter.py: expected a generated line")
    if "error" in generated:
        err = generated["error"]
        send({"fail": {"status": err["status"], "message": "generate: " + err["message"]}})
        return
    send({"message": generated["message"]})
    send({"customPatch": [{"op": "replace", "path": "/count", "value": count + 1},
                          {"op": "add", "path": "/asked/-", "value": question}]})
    send({"artifact": {"name": "count.txt", "parts": [{"text": str(count + 1)}]}})
    send({"done": {"finishReason": generated.get("finishReason", "stop")}})


def main():
    while True:
        line = receive()
        if line is None:        # no more turns
            return 0
        if "stop" in line:      # aborted: stop at once
            return 0
        if "turn" in line:
            run_turn(line["turn"])


if __name__ == "__main__":
    sys.exit(main())
