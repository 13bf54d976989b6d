#!/usr/bin/env bats
# The README runs as written: every ```sh block of README.md (and of
# docs/*.md, in bash), from a fresh
# copy of the repository's tree (the built binaries in build/, as after
# `make`), with a private HOME (so the default store and
# ~/.config/agentkit/agents are fresh too), in bash and in zsh, under
# errexit and pipefail.  A block must exit 0 and, when a ```text block
# follows it, print that output ("..." matches any text).  Blocks marked
# "# needs: VAR" are skipped unless VAR is set; tests/readme.py has the rules.
# Then all the README's blocks again, in order, in one shell, as a reader
# types them into one terminal (run_session).

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

# shell_setup SHELL: sets the caller's prelude (the blocks' errexit and
# pipefail in SHELL) and asan (the ASAN_OPTIONS the blocks run with).
# Under the sanitizers, LeakSanitizer stops each process at exit with
# PTRACE_ATTACH, whose SIGSTOP any SIGCONT discards; zsh sends SIGCONT
# to the pipeline processes it waits for (agent-run closes stdout before
# it exits, so the rest of its pipeline is done first).  Under zsh the
# leak check then waits forever for a stop that never comes, about one
# run in ten of a block with a pipeline.  zsh's runs have leak
# detection off; bash's, on the same blocks, keep it.
shell_setup() {
	case $1 in
	bash) prelude='set -eo pipefail' ;;
	zsh) prelude='set -e; setopt pipefail' ;;
	esac
	asan=${ASAN_OPTIONS-}
	[ "$1" != zsh ] || [ -z "$asan" ] || asan="$asan:detect_leaks=0"
}

# run_blocks SHELL [DOC]: run every block of DOC (README.md); print what
# failed, fail if any did.
# A block's stdin is /dev/null, as a terminal's would give agent-run no
# text (stdin text joins a -m turn: this loop's own input must not).
run_blocks() {
	local sh=$1 doc=${2:-$README} line what failed=0 n=0 dir prelude name rc asan
	name=${doc#"$TOP/"}
	shell_setup "$sh"
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

# run_session SHELL DIR [DOC]: every block of DOC (README.md) that runs, in order, in ONE
# shell, as a reader types them into one terminal: from one fresh copy, one
# private HOME (all in DIR), the working directory, variables and jobs kept from block to
# block.  As root it runs as user 65534 (a reader is not root: a block that
# writes where only root may shows).  Each block's output is cut out of the
# session's by a marker line and compared with the one shown; the session
# stops at the first block that fails (errexit), naming it.
run_session() {
	local sh=$1 d=$2 doc=${3:-$README} line what prelude asan rc=0 as=() n=0 failed=0 last name
	name=${doc#"$TOP/"}
	shell_setup "$sh"
	fresh_copy "$d/repo"
	mkdir -p "$d/home" "$d/out"
	{
		echo "$prelude"
		while IFS=$'\t' read -r line what; do
			[ "$what" = run ] || continue
			echo "echo '::readme block $line'"
			python3 "$BLOCKS" script "$doc" "$line"
		done < <(python3 "$BLOCKS" list "$doc")
		echo "echo '::readme end'"
	} >"$d/session.sh"
	if [ "$(id -u)" = 0 ]; then
		type -P setpriv >/dev/null || { echo "run as root, and no setpriv to run as another user"; return 1; }
		chown -R 65534:65534 "$d"
		chmod 755 "$d"
		as=(setpriv --reuid 65534 --regid 65534 --clear-groups)
		"${as[@]}" test -x "$d/repo/build/bin/agent-run" -a -w "$d/home" ||
			{ echo "user 65534 cannot reach $d"; return 1; }
	fi
	(cd "$d/repo" && env -u AGENTKIT_STORE -u AGENTKIT_PATH -u XDG_CONFIG_HOME \
		-u XDG_STATE_HOME -u XDG_DATA_HOME HOME="$d/home" ASAN_OPTIONS="$asan" \
		"${as[@]}" timeout -k 10 1200 "$sh" "$d/session.sh" </dev/null >"$d/stdout" 2>"$d/stderr") || rc=$?
	# the output of each block, by the line its block starts on
	awk -v dir="$d/out" '/^::readme (block [0-9]+|end)$/ { f = dir "/" $NF; printf "" > f; next } f { print > f }' "$d/stdout"
	last=$(sed -n 's/^::readme //p' "$d/stdout" | tail -n 1)
	if [ "$rc" -ne 0 ] || [ "$last" != end ]; then
		echo "$name: the session stopped with exit $rc in $sh, in ${last:-its prelude}"
		sed 's/^/  stderr: /' "$d/stderr" | tail -n 20
		failed=1
	fi
	while IFS=$'\t' read -r line what; do
		[ "$what" = run ] || continue
		[ -f "$d/out/$line" ] || break
		n=$((n + 1))
		python3 "$BLOCKS" check "$doc" "$line" "$d/out/$line" || failed=1
	done < <(python3 "$BLOCKS" list "$doc")
	echo "$n blocks of $name run in one $sh session"
	[ "$failed" -eq 0 ]
}

# session_dir: a directory for run_session that every user may reach (the
# test's own may be under one only root may enter), removed by teardown.
session_dir() {
	SESSION_DIR=$(mktemp -d "${TMPDIR:-/tmp}/agentkit-readme.XXXXXX")
}

teardown() {
	[ -z "${SESSION_DIR-}" ] || rm -rf "$SESSION_DIR"
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

@test "README: the one-session run can fail (a cd that stays, a row more than shown)" {
	session_dir
	# each block alone passes; in one session the second one runs in /,
	# where the session's user (not root) may not write
	printf '%s\n' '```sh' 'cd / && echo went' '```' '```text' 'went' '```' \
		'```sh' 'echo b >seen' '```' >"$SESSION_DIR/cd.md"
	run -1 run_session bash "$SESSION_DIR" "$SESSION_DIR/cd.md"
	assert_line --index 0 "$SESSION_DIR/cd.md: the session stopped with exit 1 in bash, in block 7"
	assert_line --partial "seen: Permission denied"
	assert_line "2 blocks of $SESSION_DIR/cd.md run in one bash session"
	# each block alone prints one row; in one session the second prints two
	rm -rf "$SESSION_DIR"/*
	printf '%s\n' '```sh' 'echo a >>rows && wc -l <rows' '```' '```text' '1' '```' \
		'```sh' 'echo b >>rows && wc -l <rows' '```' '```text' '1' '```' >"$SESSION_DIR/rows.md"
	requires zsh
	run -1 run_session zsh "$SESSION_DIR" "$SESSION_DIR/rows.md"
	assert_line --index 0 "$SESSION_DIR/rows.md:7: the output differs from the one shown"
	assert_line "2 blocks of $SESSION_DIR/rows.md run in one zsh session"
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

# The one-session runs test the order of the blocks, which no sanitizer
# changes: they run on the plain build only (the blocks themselves run on
# both, one by one, above).
plain_build_only() {
	! grep -q __asan_init "$AGENTKIT_BIN/agent-run" || skip "sanitizer build: the blocks' order is the plain build's test"
}

@test "README: all the blocks run in order in one bash session, as a user who is not root" {
	plain_build_only
	session_dir
	run -0 run_session bash "$SESSION_DIR"
	assert_output --regexp "(^|"$'\n'")[1-9][0-9]* blocks of README.md run in one bash session"
}

@test "README: all the blocks run in order in one zsh session, as a user who is not root" {
	plain_build_only
	requires zsh
	session_dir
	run -0 run_session zsh "$SESSION_DIR"
	assert_output --regexp "(^|"$'\n'")[1-9][0-9]* blocks of README.md run in one zsh session"
}

@test "docs: every sh block of docs/*.md runs as printed in bash" {
	local doc failed=0
	for doc in "$TOP"/docs/*.md; do
		run_blocks bash "$doc" || failed=1
	done
	[ "$failed" -eq 0 ]
}
