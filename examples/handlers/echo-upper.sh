#!/bin/sh
# echo-upper.sh - a custom agent handler (agent-run --exec) in POSIX sh + jq.
#
# Each turn answers with the user's text in upper case (streamed as a model
# chunk, then added to the history) and keeps a turn counter and the last
# answer in the custom state.  The protocol is in docs/custom-agents.md.
#
#   agent-run --no-store --exec examples/handlers/echo-upper.sh -m hello
set -eu
while IFS= read -r line; do
	kind=$(printf '%s\n' "$line" | jq -r 'keys[0]')
	case $kind in
	turn) ;;
	stop) exit 0 ;;     # agentkit asks us to stop (abort)
	*) continue ;;
	esac
	printf '%s\n' "$line" | jq -c '
		.turn as $t
		| ([$t.input.message.content[]?.text // empty] | join("") | ascii_upcase) as $text
		| {modelChunk: {role: "model", index: 0, content: [{text: $text}]}},
		  {message: {role: "model", content: [{text: $text}]}},
		  {custom: {turns: (($t.state.custom.turns // 0) + 1), last: $text}},
		  {done: {finishReason: "stop"}}'
done
