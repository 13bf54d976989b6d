#!/usr/bin/env bats
# The installed man pages stand alone: after `make install DESTDIR=...`
# no page names a file of the source tree that is not installed (a path
# under examples/ or agents/ names the installed copy under
# share/doc/agentkit, which is there), and every .TH has a date.

load test_helper

setup() { common_setup; }

# cited ROOT PREFIX PAGE...: each path of the source tree a page names
# (a word that starts with one of the tree's top directories, or names a
# file of the tree, outside an installed path) and each installed path
# under PREFIX/share/doc/agentkit that ROOT lacks, one "PAGE:LINE: PATH" a
# line; and each .TH with no date.
cited() {
	local root=$1 prefix=$2
	shift 2
	git -C "$TOP" ls-files >"$BATS_TEST_TMPDIR/tree"
	python3 - "$root" "$prefix" "$BATS_TEST_TMPDIR/tree" "$@" <<-'EOF'
	import os, re, sys
	root, prefix, tree = sys.argv[1:4]
	files = set(open(tree).read().split())
	tops = {f.split("/")[0] for f in files if "/" in f} | {"build", "build-san"}
	doc = prefix + "/share/doc/agentkit/"
	for page in sys.argv[4:]:
	    name = os.path.basename(page)
	    for n, line in enumerate(open(page, encoding="utf-8"), 1):
	        if line.startswith(".TH "):
	            f = re.findall(r'"[^"]*"|\S+', line)
	            if len(f) < 4 or not re.fullmatch(r'"?\d{4}-\d\d-\d\d"?', f[3]):
	                print("%s:%d: .TH has no date: %s" % (name, n, line.strip()))
	        t = re.sub(r"\\f[BIRP]", "", line).replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")
	        for m in re.finditer(r"(?<![A-Za-z0-9_./~$-])[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.*-]*)+", t):
	            p = m.group(0).rstrip(".,:;*")
	            first = p.split("/")[0]
	            mine = p in files or any(f.startswith(p.rstrip("/") + "/") for f in files)
	            # agents/ is also a user's own directory of agents
	            if mine or (first in tops and first not in ("agents", "docs")):
	                print("%s:%d: %s" % (name, n, p))
	        for m in re.finditer(re.escape(doc) + r"[A-Za-z0-9_./-]*[A-Za-z0-9_-]", t):
	            if not os.path.exists(root + m.group(0)):
	                print("%s:%d: %s is not installed" % (name, n, m.group(0)))
	EOF
}

install_into() {
	build=$(dirname "$AGENTKIT_BIN")
	san=
	[ "$(basename "$build")" = build-san ] && san=SANITIZE=1
	run make -C "$TOP" --no-print-directory install $san DESTDIR="$BATS_TEST_TMPDIR/$1" PREFIX="$2" BUILD="$build"
	[ "$status" -eq 0 ] || fail "$output"
}

@test "installed man pages name no file of the source tree, and every .TH has a date" {
	requires make python3 git
	install_into root /usr
	run -0 cited root /usr root/usr/share/man/man*/*
	assert_output ''
	# the examples the pages point at are there, runnable
	[ -x root/usr/share/doc/agentkit/examples/handlers/echo-upper.sh ]
	grep -qF /usr/share/doc/agentkit/examples/handlers/counter.py root/usr/share/man/man7/agentkit-custom-agents.7
	grep -qF /usr/share/doc/agentkit/agents/editor.prompt root/usr/share/man/man7/agentkit-agents.7
	run -0 --separate-stderr agent-run --no-store \
		--exec root/usr/share/doc/agentkit/examples/handlers/echo-upper.sh -m hello
	[ "$(last | jq -r .output.message.content[0].text)" = HELLO ]
	# uninstall takes them away again
	run make -C "$TOP" --no-print-directory uninstall DESTDIR="$BATS_TEST_TMPDIR/root" PREFIX=/usr
	[ "$status" -eq 0 ] || fail "$output"
	[ ! -e root/usr/share/doc/agentkit ]
}

@test "the check fails on a page that names a source file, an example not installed, or no date" {
	requires python3 git
	mkdir -p root/usr/share/doc/agentkit/examples
	printf '%s\n' '.TH X 7 "" "agentkit 0.1.0" "agentkit"' \
		'see \fBlibcore/base/schema.h\fR and tests/outcome.bats;' \
		'run /usr/share/doc/agentkit/examples/nosuch.sh, or ./agents/x.prompt and ~/agents/y' \
		'where agents/z.prompt:3: is an error message' >x.7
	run -0 cited root /usr x.7
	assert_output - <<-'EOF'
	x.7:1: .TH has no date: .TH X 7 "" "agentkit 0.1.0" "agentkit"
	x.7:2: libcore/base/schema.h
	x.7:2: tests/outcome.bats
	x.7:3: /usr/share/doc/agentkit/examples/nosuch.sh is not installed
	EOF
}

@test "the pages are dated by their source's last commit, or by SOURCE_DATE_EPOCH" {
	requires git
	want=$(git -C "$TOP" log -1 --format=%cd --date=format-local:%Y-%m-%d -- docs/prompts.md)
	[ -n "$want" ] || skip "docs/prompts.md has no commit in this checkout"
	run -0 "$TOP/scripts/md2man" agentkit-prompts 5 0.1.0 "$TOP/docs/prompts.md"
	assert_line --index 0 ".TH AGENTKIT-PROMPTS 5 \"$want\" \"agentkit 0.1.0\" \"agentkit\""
	SOURCE_DATE_EPOCH=86400 run -0 "$TOP/scripts/md2man" --date "$TOP/docs/prompts.md"
	assert_output 1970-01-02
	SOURCE_DATE_EPOCH=yesterday run -100 "$TOP/scripts/md2man" --date "$TOP/docs/prompts.md"
	assert_output "md2man: SOURCE_DATE_EPOCH: not a number of seconds: 'yesterday'"
}

@test "make install into a PREFIX whose bin is not on PATH says to add it, and zsh's fpath" {
	requires make
	PATH=/usr/bin:/bin:$AGENTKIT_BIN install_into home "$BATS_TEST_TMPDIR/home/.local"
	local p=$BATS_TEST_TMPDIR/home/.local
	assert_line "make install: $p/bin is not on your PATH: add it (bash: PATH=\"$p/bin:\$PATH\" in ~/.profile; zsh: path=($p/bin \$path) in ~/.zshrc)"
	assert_line "make install: zsh reads the completions only with $p/share/zsh/site-functions on its fpath: fpath=($p/share/zsh/site-functions \$fpath) in ~/.zshrc, before compinit"
}
