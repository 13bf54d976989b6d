#!/usr/bin/env bats
# The README runs as written: every ```sh block of README.md (and of
# docs/*.md, in bash), from a fresh
# copy of the repository's tree (the built binaries in build/, as after
# `make`), with a private HOME (so the default store and
# ~/.config/agentkit/agents are fresh too), in bash and in zsh, under
# errexit and pipefail.  A block must exit 0 and, when a ```text block
# follows it, print that output ("..." matches any text).  Blocks marked
# "# needs: VAR" are skipped unless VAR is set; tests/readme.py has the rules.

load test_helper

setup() { common_setup; }

README="$TOP/README.md"
BLOCKS="$TOP/tests/readme.py"

# fresh_copy DIR: the tree as git sees it (tracked and new files, nothing
# ignored), plus the build under test as build/ and the generated
# completions, with times kept so that `make` has nothing to do.
fresh_copy() {
	mkdir -p "$1"
	if git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$TOP" ls-files -co --exclude-standard -z |
			tar -C "$TOP" --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$1" -xf -
	else
		tar -C "$TOP" --exclude=./.git --exclude=./build --exclude=./build-san \
			--exclude=./demo/.store -cf - . | tar -C "$1" -xf -
	fi
	cp -a "$(dirname "$AGENTKIT_BIN")" "$1/build"
	for c in bash zsh fish; do
		[ ! -d "$TOP/completions/$c" ] || cp -a "$TOP/completions/$c" "$1/completions/"
	done
}

# run_blocks SHELL [DOC]: run every block of DOC (README.md); print what
# failed, fail if any did.
# A block's stdin is /dev/null, as a terminal's would give agent-run no
# text (stdin text joins a -m turn: this loop's own input must not).
run_blocks() {
	local sh=$1 doc=${2:-$README} line what failed=0 n=0 dir prelude name rc asan=${ASAN_OPTIONS-}
	name=${doc#"$TOP/"}
	case $sh in
	bash) prelude='set -eo pipefail' ;;
	zsh) prelude='set -e; setopt pipefail' ;;
	esac
	# Under the sanitizers, LeakSanitizer stops each process at exit with
	# PTRACE_ATTACH, whose SIGSTOP any SIGCONT discards; zsh sends SIGCONT
	# to the pipeline processes it waits for (agent-run closes stdout before
	# it exits, so the rest of its pipeline is done first).  Under zsh the
	# leak check then waits forever for a stop that never comes, about one
	# run in ten of a block with a pipeline.  zsh's pass runs with leak
	# detection off; bash's, on the same blocks, keeps it.
	[ "$sh" != zsh ] || [ -z "$asan" ] || asan="$asan:detect_leaks=0"
	while IFS=$'\t' read -r line what; do
		if [ "$what" != run ]; then
			echo "# $name:$line: ${what}" >&3
			continue
		fi
		n=$((n + 1))
		dir="$BATS_TEST_TMPDIR/$sh-$(basename "$doc" .md)-$line"
		fresh_copy "$dir/repo"
		mkdir -p "$dir/home"
		{ echo "$prelude"; python3 "$BLOCKS" script "$doc" "$line"; } >"$dir/block.sh"
		# A block that hangs fails after five minutes (exit 124), not the
		# whole run.
		rc=0
		(cd "$dir/repo" && env -u AGENTKIT_STORE -u AGENTKIT_PATH -u XDG_CONFIG_HOME \
			-u XDG_STATE_HOME -u XDG_DATA_HOME HOME="$dir/home" ASAN_OPTIONS="$asan" \
			timeout -k 10 300 "$sh" "$dir/block.sh" </dev/null >"$dir/out" 2>"$dir/err") || rc=$?
		if [ "$rc" -ne 0 ]; then
			echo "$name:$line: exit $rc in $sh"
			sed 's/^/  stderr: /' "$dir/err"
			failed=1
		elif ! python3 "$BLOCKS" check "$doc" "$line" "$dir/out"; then
			failed=1
		fi
	done < <(python3 "$BLOCKS" list "$doc")
	echo "$n blocks of $name run in $sh"
	[ "$failed" -eq 0 ]
}

@test "README: the blocks are found, and the marked ones are skipped" {
	run -0 python3 "$BLOCKS" list "$README"
	[ "$(grep -c $'\trun$' <<<"$output")" -ge 8 ]
	OPENAI_API_KEY= run -0 python3 "$BLOCKS" list "$README"
	[[ $output == *$'\tskip: needs OPENAI_API_KEY'* ]]
	[[ $output == *$'\tskip: it runs that test, and every other'* ]]
}

@test "README: the checker can fail (wrong output, wrong line count)" {
	printf '%s\n' '```sh' 'echo hello' '```' '' '```text' 'hel...o' '```' \
		'```sh' 'echo a' '```' '```text' 'b' '```' >doc.md
	printf 'hello\n' >out
	run -0 python3 "$BLOCKS" check doc.md 1 out
	printf 'hello\nextra\n' >out
	run -1 python3 "$BLOCKS" check doc.md 1 out
	printf 'a\n' >out
	run -1 python3 "$BLOCKS" check doc.md 8 out
	assert_output --partial "the output differs"
}

@test "README: every sh block runs as printed in bash" {
	run -0 run_blocks bash
	assert_output --regexp "(^|"$'\n'")[1-9][0-9]* blocks of README.md run in bash"
}

@test "README: every sh block runs as printed in zsh" {
	requires zsh
	run -0 run_blocks zsh
	assert_output --regexp "(^|"$'\n'")[1-9][0-9]* blocks of README.md run in zsh"
}

@test "docs: every sh block of docs/*.md runs as printed in bash" {
	local doc failed=0
	for doc in "$TOP"/docs/*.md; do
		run_blocks bash "$doc" || failed=1
	done
	[ "$failed" -eq 0 ]
}
