#!/usr/bin/env bats
# Attachments (docs/agent-run.md, "Attachments"): -a FILE adds an image, a
# PDF, audio or a text file to the first turn's message, its type told by
# its content (libmagic); what a provider cannot take is refused before
# the call.

load test_helper
load provider_helper

setup() {
	provider_setup
	requires python3 base64
	python3 - <<'EOF'
import struct, wave, zlib, zipfile
def chunk(t, d):
    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
open('dot.png', 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 1, 1, 8, 6, 0, 0, 0))
                           + chunk(b'IDAT', zlib.compress(b'\0\0\0\0\0')) + chunk(b'IEND', b''))
open('doc.pdf', 'wb').write(b'%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n')
w = wave.open('tone.wav', 'wb'); w.setnchannels(1); w.setsampwidth(2); w.setframerate(8000)
w.writeframes(b'\0\0' * 80); w.close()
open('notes.txt', 'w').write('buy milk\n')
open('latin1.txt', 'wb').write('caf\xe9 au lait, tr\xe8s bien, d\xe9j\xe0 vu\n'.encode('latin-1'))
z = zipfile.ZipFile('x.zip', 'w'); z.writestr('a', 'b'); z.close()
open('empty', 'w').close()
EOF
}
teardown() {
	mock_stop
	[ -z "${SPID-}" ] || kill "$SPID" 2>/dev/null || true
}

# user_parts: the first user message's parts, as the output's state holds them.
user_parts() { jq -c '.state.messages[0].content' <<<"$output"; }

@test "-a: an image, a PDF and audio are media parts with data: URLs, a text file a text part" {
	run -0 --separate-stderr agent-run --no-store --model echo --format json -m look \
		-a dot.png -a doc.pdf -a tone.wav -a notes.txt
	assert_equal "$(user_parts | jq -c '[.[] | .media.contentType // .text]')" \
		'["look","image/png","application/pdf","audio/wav","<file name=\"notes.txt\">\nbuy milk\n</file>"]'
	for f in dot.png:1 doc.pdf:2 tone.wav:3; do
		assert_equal "$(user_parts | jq -r ".[${f#*:}].media.url")" \
			"data:$(user_parts | jq -r ".[${f#*:}].media.contentType");base64,$(base64 -w0 "${f%%:*}")"
	done
	# the type is the content's, not the name's
	cp dot.png picture.txt
	run -0 --separate-stderr agent-run --no-store --model echo --format json -m look -a picture.txt
	assert_equal "$(user_parts | jq -r '.[1].media.contentType')" image/png
}

@test "-a goes with the first turn only; -a - is stdin; attachments alone are a turn" {
	run -0 --separate-stderr agent-run --no-store --model echo --format json -m one -m two -a notes.txt
	assert_equal "$(jq -c '[.state.messages[] | select(.role == "user") | .content | length]' <<<"$output")" '[2,1]'
	run -0 --separate-stderr agent-run --no-store --model echo --format json -m one -a - <dot.png
	assert_equal "$(user_parts | jq -r '.[1].media.url')" "data:image/png;base64,$(base64 -w0 dot.png)"
	run -0 --separate-stderr agent-run --no-store --model echo --format json -a - <notes.txt
	assert_equal "$(user_parts)" '[{"text":"<file name=\"stdin\">\nbuy milk\n</file>"}]'
	# the row keeps the attachment in its history
	run -0 --separate-stderr agent-run --model echo --session s1 -m look -a doc.pdf
	assert_equal "$(agent-snap show s1 | head -1 | jq -r '.content[1].media.contentType')" application/pdf
}

@test "-a: files that cannot be attached are usage errors naming the file; a missing one is 4" {
	for c in "x.zip|attach 'x.zip': its type is application/zip; images, PDFs, audio and text files can be attached" \
		"latin1.txt|attach 'latin1.txt': text/plain that is not UTF-8 text (convert it, e.g. with iconv)" \
		"empty|attach 'empty': the file is empty"; do
		run -100 --separate-stderr agent-run --no-store --model echo -m look -a "${c%%|*}"
		assert_equal "${stderr%%$'\n'*}" "agent-run: ${c#*|}"
		assert_equal "$output" ''
	done
	run -4 --separate-stderr agent-run --no-store --model echo -m look -a nosuch.png
	assert_equal "$stderr" "agent-run: cannot open 'nosuch.png': No such file or directory"
	head -c $((20 * 1024 * 1024 + 1)) /dev/zero | tr '\0' a >big.txt
	run -100 --separate-stderr agent-run --no-store --model echo -m look -a big.txt
	assert_equal "${stderr%%$'\n'*}" "agent-run: attach 'big.txt': larger than 20 MiB"
	head -c $((15 * 1024 * 1024)) /dev/zero | tr '\0' a >part.txt
	run -100 --separate-stderr agent-run --no-store --model echo -m look -a part.txt -a part.txt -a part.txt -a part.txt
	assert_equal "${stderr%%$'\n'*}" "agent-run: attach 'part.txt': larger than 5 MiB (what is left of the 50 MiB for all attachments)"
}

@test "-a: usage errors with NDJSON on stdin, -a - twice and a resume" {
	run -100 --separate-stderr agent-run --no-store --model echo -a notes.txt <<<'{"message":{"role":"user","content":[{"text":"hi"}]}}'
	assert_equal "${stderr%%$'\n'*}" "agent-run: -a adds to the -m or stdin text turn; NDJSON inputs carry their own parts"
	run -100 --separate-stderr agent-run --no-store --model echo -m hi -a - -a -
	assert_equal "${stderr%%$'\n'*}" "agent-run: -a - reads stdin once: give it once"
	run -100 --separate-stderr agent-run --model echo --session s1 --approve r1 -a notes.txt
	assert_equal "${stderr%%$'\n'*}" "agent-run: -a adds to a message: a resume (--approve, --deny, --respond) has none"
}

@test "-a: a provider that cannot take a type is a usage error before any request" {
	mock_start ollama /dev/null
	run -100 --separate-stderr agent-run --no-store --model ollama/llava -m look -a doc.pdf
	assert_equal "${stderr%%$'\n'*}" "agent-run: attach 'doc.pdf': ollama: cannot send media of type 'application/pdf' (images only)"
	mock_stop
	mock_start anthropic /dev/null sk-ant-api03-abcdefgh
	run -100 --separate-stderr agent-run --no-store --model anthropic/claude-sonnet-4-5 -m listen -a tone.wav
	assert_equal "${stderr%%$'\n'*}" "agent-run: attach 'tone.wav': anthropic: cannot send media of type 'audio/wav' (images and PDFs are supported)"
	assert_equal "$(mock_requests)" 0
}

@test "-a: a provider gets the parts in its own shape" {
	printf '%s\n' '{"text":"A dot."}' >turns.ndjson
	mock_start openai turns.ndjson sk-test-1234
	run -0 --separate-stderr agent-run --no-store --model openai/gpt-4o -m look -a dot.png -a tone.wav -a notes.txt
	assert_equal "$(jq -c '.body.messages[0].content | [.[] | .type]' "$MOCK_LOG")" '["text","image_url","input_audio","text"]'
	assert_equal "$(jq -r '.body.messages[0].content[1].image_url.url' "$MOCK_LOG")" "data:image/png;base64,$(base64 -w0 dot.png)"
	assert_equal "$(jq -c '.body.messages[0].content[2].input_audio.format' "$MOCK_LOG")" '"wav"'
}

# serve_agents: agent-serve on a free loopback port with the serve
# fixtures' agents (the test's store); $URL, $SPID.
serve_agents() {
	agent-serve --listen 127.0.0.1:0 --agents "$FIXTURES/serve/agents" "$@" 2>serve.log &
	SPID=$!
	for _ in $(seq 100); do grep -qs 'listening on' serve.log && break; sleep 0.05; done
	URL=$(sed -n 's/^agent-serve: listening on //p' serve.log)
	[ -n "$URL" ]
}

@test "-a with --url: the parts travel to the server as media and text parts of the message" {
	serve_agents
	run -0 --separate-stderr agent-run --url "$URL/chat" --format json -m look -a dot.png -a notes.txt
	snap=$(jq -r .snapshotId <<<"$output")
	run -0 agent-snap "$snap"
	assert_equal "$(user_parts | jq -c '[.[] | .media.contentType // .text]')" \
		'["look","image/png","<file name=\"notes.txt\">\nbuy milk\n</file>"]'
	assert_equal "$(user_parts | jq -r '.[1].media.url')" "data:image/png;base64,$(base64 -w0 dot.png)"
	# no -m: stdin's text, then the parts; an empty stdin, the parts alone
	run -0 --separate-stderr agent-run --url "$URL/chat" --format json -a notes.txt <<<'read this'
	run -0 agent-snap "$(jq -r .snapshotId <<<"$output")"
	assert_equal "$(user_parts | jq -c '[.[] | .text]')" '["read this\n","<file name=\"notes.txt\">\nbuy milk\n</file>"]'
	run -0 --separate-stderr agent-run --url "$URL/chat" --format json -a notes.txt </dev/null
	assert_equal "$(jq -r .message.content[0].text <<<"$output")" $'you said: <file name="notes.txt">\nbuy milk\n</file>'
	# -a - is the attachment, and AgentInput lines carry their own parts
	run -0 --separate-stderr agent-run --url "$URL/chat" --format json -m look -a - <dot.png
	run -0 agent-snap "$(jq -r .snapshotId <<<"$output")"
	assert_equal "$(user_parts | jq -r '.[1].media.url')" "data:image/png;base64,$(base64 -w0 dot.png)"
	run -100 --separate-stderr agent-run --url "$URL/chat" -a dot.png <<<'{"message":{"role":"user","content":[{"text":"x"}]}}'
	assert_equal "${stderr%%$'\n'*}" "agent-run: -a adds to the -m or stdin text turn; AgentInput lines carry their own parts"
	# a file that cannot be attached is refused before any request
	n=$(grep -c 'POST /chat ' serve.log)
	run -100 --separate-stderr agent-run --url "$URL/chat" -m look -a x.zip
	[[ ${stderr%%$'\n'*} == "agent-run: attach 'x.zip': "* ]] || fail "$stderr"
	assert_equal "$(grep -c 'POST /chat ' serve.log)" "$n"
	kill "$SPID"
}

@test "-a with --url: Genkit JS 1.42's express server takes the media part into its session" {
	local mods="$TOP/bench/out/genkit/node_modules"
	command -v node >/dev/null || skip "node is not installed"
	[ -f "$mods/@genkit-ai/express/package.json" ] ||
		skip "@genkit-ai/express is not installed (run scripts/genkit-client)"
	node "$FIXTURES/serve/genkit-server.cjs" "$mods" port 2>genkit.log &
	SPID=$!
	wait_for 20 test -s port
	local U="http://127.0.0.1:$(cat port)/echo"
	run -0 --separate-stderr agent-run --url "$U" --format json -m look -a dot.png
	assert_equal "$(jq -r .message.content[0].text <<<"$output")" "echo: look"
	run -0 --separate-stderr agent-wait --url "$U" "$(jq -r .snapshotId <<<"$output")"
	assert_equal "$(user_parts | jq -c '[.[] | .media.contentType // .text]')" '["look","image/png"]'
	assert_equal "$(user_parts | jq -r '.[1].media.url')" "data:image/png;base64,$(base64 -w0 dot.png)"
	kill "$SPID"
}
