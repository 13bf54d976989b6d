#!/usr/bin/env bats
# Reachable documentation: the installed man pages stand alone, --help fits
# a terminal and names --man and --completion, and the generated shell
# completions offer what the option's value is (agent names, formats,
# session IDs), read at completion time.

load test_helper

setup() { common_setup; }

# complete PROG WORD...: what bash completion offers for the last WORD.
complete_words() {
	local prog=$1 fn
	shift
	fn=_agentkit_${prog//-/_}
	COMP_WORDS=("$prog" "$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	"$fn"
	printf '%s\n' "${COMPREPLY[@]}"
}

@test "make install DESTDIR: man pages in sections 1, 5 and 7, each with the sections it needs" {
	requires make man
	build=$(dirname "$AGENTKIT_BIN")
	san=; [ "$(basename "$build")" = build-san ] && san=SANITIZE=1
	run make -C "$TOP" --no-print-directory install $san DESTDIR="$BATS_TEST_TMPDIR/root" PREFIX=/usr BUILD="$build"
	[ "$status" -eq 0 ] || fail "$output"
	m=root/usr/share/man
	for p in agentkit-prompts.5 agentkit-tools.5 agentkit-script-model.5 agentkit-agent-run.7 \
		agentkit-custom-agents.7 agentkit-providers.7 agentkit-detach.7; do
		f=$m/man${p##*.}/$p
		[ -s "$f" ] || fail "no $p"
		for s in NAME DESCRIPTION "SEE ALSO"; do
			grep -qx "\.SH $s" "$f" || fail "$p has no $s"
		done
	done
	grep -q 'fBwhen' "$m/man5/agentkit-script-model.5" || fail "the script model page lacks the format"
	for b in $(agentkit_bins); do
		f=$m/man1/$b.1
		for s in NAME SYNOPSIS OPTIONS "EXIT STATUS" ENVIRONMENT FILES "SEE ALSO"; do
			grep -qx "\.SH $s" "$f" || fail "$b.1 has no $s"
		done
		# it points at installed pages, not at files of the source tree
		! grep -n 'docs/[a-z-]*\.md' "$f" || fail "$b.1 names a docs/ file"
		# man renders it without errors
		run -0 --separate-stderr man -l "$f"
		[ -z "$(grep -v 'cannot adjust line' <<<"$stderr")" ] || fail "$b.1: $stderr"
	done
}

@test "every AGENTKIT_* variable the code reads, and the provider keys, are in each command's ENVIRONMENT" {
	vars=$(grep -rhoE 'AGENTKIT_[A-Z_]*[A-Z]' "$TOP/libcore" "$TOP/store" "$TOP/cmd" |
		grep -vx 'AGENTKIT_VERSION\|AGENTKIT_HTTP' | sort -u)
	[ -n "$vars" ]
	for b in $(agentkit_bins); do
		page=$("$b" --man | sed -n '/^\.SH ENVIRONMENT/,/^\.SH FILES/p')
		for v in $vars OPENAI_API_KEY OPENAI_BASE_URL GEMINI_API_KEY GOOGLE_API_KEY GEMINI_BASE_URL \
			ANTHROPIC_API_KEY ANTHROPIC_BASE_URL OLLAMA_HOST XDG_CONFIG_HOME; do
			[[ $page == *"${v//_/\\_}"* || $page == *"$v"* ]] || fail "$b --man: no $v in ENVIRONMENT"
		done
		[[ $("$b" --man | sed -n '/^\.SH FILES/,/^\.SH SEE/p') == *agentkit/agents* ]] || fail "$b: FILES"
	done
}

@test "--help lists --man and --completion and stays within 80 columns" {
	for b in $(agentkit_bins); do
		run -0 "$b" --help
		[[ $output == *"--man "* ]] || fail "$b --help lacks --man"
		[[ $output == *"--completion=SHELL"* ]] || fail "$b --help lacks --completion"
		long=$(awk 'length > 80' <<<"$output")
		[ -z "$long" ] || fail "$b --help is wider than 80 columns: $long"
	done
}

@test "bash completion offers agent names, --format values, models and session IDs" {
	source <(agent-run --completion bash)
	mkdir -p work/agents "$XDG_CONFIG_HOME/agentkit/agents"
	cd work
	printf -- '---\nmodel: echo\n---\n' >agents/tasks.prompt
	printf -- '---\nmodel: echo\n---\n' >agents/triage.prompt
	printf -- '---\nmodel: echo\n---\n' >"$XDG_CONFIG_HOME/agentkit/agents/mine.prompt"
	[ "$(complete_words agent-run '')" = "$(printf '%s\n' mine tasks triage agents)" ]
	[ "$(complete_words agent-run tr)" = triage ]
	[ "$(complete_words agent-run --prompt m)" = mine ]
	[ "$(complete_words agent-run --format '')" = "$(printf '%s\n' ndjson text json)" ]
	[ "$(complete_words agent-run --format = t)" = text ]
	[ "$(complete_words agent-run --model o)" = "$(printf '%s\n' openai/ openai-responses/ ollama/)" ]
	[ "$(complete_words agent-run --completion z)" = zsh ]
	# session IDs come from the store at completion time
	[ -z "$(complete_words agent-run --session '')" ]
	run -0 --separate-stderr agent-run tasks -m hi
	sid=$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.sessionId)
	snap=$(printf '%s\n' "$output" | tail -n 1 | jq -r .output.snapshotId)
	[ "$(complete_words agent-run --session "${sid:0:4}")" = "$sid" ]
	[ "$(complete_words agent-run --snapshot '')" = "$snap" ]
	source <(agent-snap --completion bash)
	[ "$(complete_words agent-snap wo)" = worker-log ]
	[ "$(complete_words agent-snap log "${snap:0:6}")" = "$snap" ]
	source <(agent-wait --completion bash)
	[ "$(complete_words agent-wait '')" = "$snap" ]
	[ "$(complete_words agent-wait --session '')" = "$sid" ]
}

@test "bash completion offers the models of the newest sessions after the providers" {
	source <(agent-run --completion bash)
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	for m in openai/gpt-4o-mini anthropic/claude-x openai/gpt-4o-mini script/x.ndjson echo; do
		echo "{\"snapshotId\":\"r-${m//[^a-z0-9]/-}\",\"sessionId\":\"s-${m//[^a-z0-9]/-}\",\"status\":\"completed\",\"createdAt\":\"$now\",\"updatedAt\":\"$now\",\"agentkit\":{\"model\":\"$m\"}}"
	done | agent-snap import >/dev/null
	[ "$(complete_words agent-run --model o)" = "$(printf '%s\n' openai/ openai-responses/ ollama/ openai/gpt-4o-mini)" ]
	[ "$(complete_words agent-run --model an)" = "$(printf '%s\n' anthropic/ anthropic/claude-x)" ]
	[ "$(complete_words agent-run --model e)" = echo ]
	[ "$(complete_words agent-run --model openai/g)" = openai/gpt-4o-mini ]
}

@test "completion stays silent when the store or the agent path cannot be read" {
	source <(agent-run --completion bash)
	export AGENTKIT_STORE=/dev/null/store AGENTKIT_PATH=/nonexistent
	run -0 complete_words agent-run --session ''
	[ -z "$output" ]
}

@test "the zsh completions parse" {
	requires zsh
	for b in $(agentkit_bins); do
		"$b" --completion zsh >"_$b"
		run -0 zsh -n "_$b"
	done
}
