#!/usr/bin/env bats
# Conventions every agentkit binary shares: --help, --version, unknown
# options, completions generated from the option table, checked stdout.

load test_helper

setup() { common_setup; }

@test "every binary: --help exits 0, prints usage, options and exit codes on stdout only" {
	for b in $(agentkit_bins); do
		run --separate-stderr "$b" --help
		[ "$status" -eq 0 ] || fail "$b --help exited $status"
		[ -z "$stderr" ] || fail "$b --help wrote to stderr: $stderr"
		[[ "$output" == *"Usage: $b "* ]] || fail "$b --help has no usage line"
		[[ "$output" == *"Exit status:"* ]] || fail "$b --help has no exit-code table"
		[[ "$output" == *"Examples:"* ]] || fail "$b --help has no examples"
	done
}

@test "every binary: --version names the program and agentkit's version" {
	for b in $(agentkit_bins); do
		run --separate-stderr "$b" --version
		[ "$status" -eq 0 ] || fail "$b --version exited $status"
		[[ "$output" =~ ^$b\ \(agentkit\)\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "$b --version: $output"
	done
}

@test "every binary: an unknown option is a usage error (100), message on stderr only" {
	for b in $(agentkit_bins); do
		run --separate-stderr "$b" --no-such-option
		[ "$status" -eq 100 ] || fail "$b exited $status"
		[ -z "$output" ] || fail "$b wrote to stdout: $output"
		[ "$stderr" = "$b: unknown option '--no-such-option'
try '$b --help'" ] || fail "$b said: $stderr"
	done
}

@test "every binary: each option of the table is in --help and in the bash, zsh and fish completions" {
	for b in $(agentkit_bins); do
		run "$b" --list-options
		[ "$status" -eq 0 ]
		opts=$output
		[ -n "$opts" ]
		help=$("$b" --help)
		bash_c=$("$b" --completion bash)
		zsh_c=$("$b" --completion zsh)
		fish_c=$("$b" --completion fish)
		for o in $opts; do
			[[ "$help" == *"$o"* ]] || fail "$b: $o missing from --help"
			[[ "$bash_c" == *" $o"* ]] || fail "$b: $o missing from bash completion"
			[[ "$zsh_c" == *"$o"* ]] || fail "$b: $o missing from zsh completion"
			[[ "$fish_c" == *"-l ${o#--}"* ]] || fail "$b: $o missing from fish completion"
		done
	done
}

@test "every binary: the generated completions load in their shells" {
	for b in $(agentkit_bins); do
		"$b" --completion bash >"$b.bash"
		run bash -n "$b.bash"
		[ "$status" -eq 0 ] || fail "$b bash completion: $output"
		run bash -c "source ./$b.bash && complete -p $b"
		[ "$status" -eq 0 ] || fail "$b: completion not registered: $output"
	done
}

@test "every binary: --man writes a man page with the options and exit status" {
	for b in $(agentkit_bins); do
		run "$b" --man
		[ "$status" -eq 0 ]
		[[ "$output" == ".TH $b 1"* ]] || fail "$b --man: no .TH"
		[[ "$output" == *".SH OPTIONS"* && "$output" == *".SH EXIT STATUS"* ]] || fail "$b --man sections"
	done
}

@test "every binary: --help to a full disk fails with 111 and says so" {
	[ -w /dev/full ] || skip "no /dev/full"
	for b in $(agentkit_bins); do
		run --separate-stderr bash -c "$b --help >/dev/full"
		[ "$status" -eq 111 ] || fail "$b exited $status"
		[[ "$stderr" == "$b: unable to write output: No space left on device" ]] || fail "$b said: $stderr"
	done
}

@test "make install puts binaries, man pages and completions under DESTDIR" {
	requires make
	build=$(dirname "$AGENTKIT_BIN")
	san=; [ "$(basename "$build")" = build-san ] && san=SANITIZE=1
	run make -C "$TOP" --no-print-directory install $san DESTDIR="$BATS_TEST_TMPDIR/root" PREFIX=/usr BUILD="$build"
	[ "$status" -eq 0 ] || fail "$output"
	for b in $(agentkit_bins); do
		[ -x "root/usr/bin/$b" ] || fail "no $b"
		[ -s "root/usr/share/man/man1/$b.1" ] || fail "no man page for $b"
		[ -s "root/usr/share/bash-completion/completions/$b" ] || fail "no bash completion for $b"
		[ -s "root/usr/share/zsh/site-functions/_$b" ] || fail "no zsh completion for $b"
		[ -s "root/usr/share/fish/vendor_completions.d/$b.fish" ] || fail "no fish completion for $b"
	done
}

@test "--max-record takes a size of at least one byte, the same in every command that has it" {
	for b in agent-run jpatch-apply jpatch-diff; do
		run -100 --separate-stderr "$b" --max-record 0
		assert_equal "${stderr%%$'\n'*}" "$b: --max-record: '0' is out of range"
		run -100 --separate-stderr "$b" --max-record 12Q
		assert_equal "${stderr%%$'\n'*}" "$b: --max-record: invalid size '12Q' (use e.g. 4096, 64K, 16M, 1G)"
	done
}
