#!/usr/bin/env bats
# Where agents are found and how the relative paths inside a prompt file
# resolve: from the prompt file's directory, so an agent behaves the same
# from any working directory and under cron (which starts in $HOME).

load test_helper

setup() {
	common_setup
	H="$TOP/tests/fixtures/custom/scripted.sh"
	# a private HOME and config directory: the user's own agents never leak in
	export HOME="$BATS_TEST_TMPDIR/home" XDG_CONFIG_HOME="$BATS_TEST_TMPDIR/home/.config"
	mkdir -p "$HOME" "$BATS_TEST_TMPDIR/lib/my agents"
	LIB="$BATS_TEST_TMPDIR/lib/my agents"
	# a scripted model beside its prompt file, named by a relative path
	printf -- '---\nmodel: script/replies.ndjson\n---\n{{history}}\n' >"$LIB/hello.prompt"
	printf '%s\n' '{"when": {"user": "hi"}, "text": "hello from the script"}' >"$LIB/replies.ndjson"
}

@test "model: script/PATH resolves from the prompt file, run from / and from \$HOME" {
	export AGENTKIT_PATH="$LIB"
	run -0 --separate-stderr sh -c 'cd / && agent-run hello --no-store -m hi'
	[ "$(last | jq -r .output.message.content[0].text)" = "hello from the script" ]
	run -0 --separate-stderr sh -c 'cd "$HOME" && agent-run hello --no-store -m hi'
	[ "$(last | jq -r .output.message.content[0].text)" = "hello from the script" ]
	# by path, from another directory
	cd "$BATS_TEST_TMPDIR/lib"
	run -0 --separate-stderr agent-run "my agents/hello.prompt" --no-store -m hi
	[ "$(last | jq -r .output.message.content[0].text)" = "hello from the script" ]
}

@test "--model script/PATH on the command line resolves from the working directory" {
	cd "$LIB"
	run -0 --separate-stderr agent-run --no-store --model script/replies.ndjson -m hi
	[ "$(last | jq -r .output.message.content[0].text)" = "hello from the script" ]
	cd /
	run -4 --separate-stderr agent-run --no-store --model script/replies.ndjson -m hi
	[[ $stderr == *"replies.ndjson"* ]]
}

@test "exec: ./handler runs the handler beside the prompt file (a directory with spaces and a quote)" {
	d="$BATS_TEST_TMPDIR/it's here"
	mkdir -p "$d/bin"
	cp "$H" "$d/bin/handler"
	printf -- '---\nexec: bin/handler --flag-unused\n---\n' >"$d/custom.prompt"
	printf -- '---\nexec: ./bin/handler\n---\n' >"$d/dot.prompt"
	# the handler ignores its arguments; what matters is that it is found
	for a in custom dot; do
		run -0 --separate-stderr sh -c 'cd / && agent-run --agents "$1" "$2" --no-store -m one' _ "$d" "$a"
		[ "$(last | jq -r .output.message.content[0].text)" = "echo: one" ]
	done
}

@test "docs: bin/docs runs from the prompt's directory; other commands are kept as written" {
	mkdir -p "$LIB/bin"
	printf '#!/bin/sh\ncat >/dev/null\necho '"'"'["the sky is green"]'"'"'\n' >"$LIB/bin/docs"
	chmod +x "$LIB/bin/docs"
	printf -- '---\nmodel: echo\ndocs: bin/docs\n---\n{{history}}\n' >"$LIB/g.prompt"
	printf -- '---\nmodel: echo\ndocs: echo '"'"'["plain"]'"'"'\n---\n{{history}}\n' >"$LIB/p.prompt"
	printf -- '---\nmodel: echo\ndocs: V=a/b echo []\n---\n{{history}}\n' >"$LIB/v.prompt"
	cd /
	for a in g p v; do
		run -0 --separate-stderr agent-run --agents "$LIB" "$a" --no-store -m hi
		[ "$(last | jq -r .output.finishReason)" = stop ]
	done
	# the failure names the resolved program
	rm "$LIB/bin/docs"
	run -1 --separate-stderr agent-run --agents "$LIB" g --no-store -m hi
	[[ $stderr == *"$LIB/bin/docs: not found"* ]]
}

@test "the agent path ends with \$XDG_CONFIG_HOME/agentkit/agents" {
	mkdir -p "$XDG_CONFIG_HOME/agentkit/agents"
	cp "$LIB/hello.prompt" "$LIB/replies.ndjson" "$XDG_CONFIG_HOME/agentkit/agents/"
	cd /
	run -0 --separate-stderr agent-run hello --no-store -m hi
	[ "$(last | jq -r .output.message.content[0].text)" = "hello from the script" ]
	# ./agents comes first
	cd "$BATS_TEST_TMPDIR"
	mkdir agents
	printf -- '---\nmodel: echo\n---\n{{history}}\n' >agents/hello.prompt
	run -0 --separate-stderr agent-run hello --no-store -m hi
	[ "$(last | jq -r .output.message.content[0].text)" != "hello from the script" ]
}

@test "without XDG_CONFIG_HOME the personal agents are in ~/.config/agentkit/agents" {
	unset XDG_CONFIG_HOME
	mkdir -p "$HOME/.config/agentkit/agents"
	cp "$LIB/hello.prompt" "$LIB/replies.ndjson" "$HOME/.config/agentkit/agents/"
	run -0 --separate-stderr sh -c 'cd / && agent-run hello --no-store -m hi'
	[ "$(last | jq -r .output.message.content[0].text)" = "hello from the script" ]
	# not found: the message lists every directory searched, the personal one last
	run -4 --separate-stderr agent-run nosuch --no-store -m hi
	[[ $stderr == *"(searched: agents, $HOME/.config/agentkit/agents)"* ]]
}
