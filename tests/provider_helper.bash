# provider_helper.bash - run the model providers against scripts/mock-model.
#
# mock_start DIALECT SCRIPT [KEY]  starts the mock (port in $MOCK_PORT, its
# request log in $MOCK_LOG) and points the provider's base URL and key at it;
# mock_stop (call it from teardown) kills it.  model_call runs the test
# driver (build/tests/helpers/model-call) with a request file on stdin.

MODEL_CALL="$AGENTKIT_BIN/../tests/helpers/model-call"
MOCK="$TOP/scripts/mock-model"

provider_setup() {
	common_setup
	unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy
	unset OPENAI_API_KEY GEMINI_API_KEY GOOGLE_API_KEY ANTHROPIC_API_KEY
	unset CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR MOCK_TLS
	export AGENTKIT_HTTP_BACKOFF=5ms AGENTKIT_HTTP_IDLE_TIMEOUT=20s
	export AGENTKIT_HTTP_CONNECT_TIMEOUT=5s
	MOCK_PID=
}

# The model name the tests use for a dialect.
model_for() {
	case $1 in
	openai) echo openai/gpt-4o ;;
	responses) echo openai-responses/gpt-5 ;;
	gemini) echo googleai/gemini-2.5-flash ;;
	anthropic) echo anthropic/claude-sonnet-4-5 ;;
	ollama) echo ollama/llama3.2 ;;
	esac
}

# mock_start DIALECT SCRIPT [KEY]: the mock on a free port, the providers'
# base URLs pointed at it; with MOCK_TLS=1 it speaks HTTPS with a fresh
# self-signed certificate for 127.0.0.1 in $MOCK_CERT (not trusted unless a
# test says so).
mock_start() {
	local dialect=$1 script=$2 key=${3-}
	local args=(--dialect "$dialect" --script "$script" --port-file "$BATS_TEST_TMPDIR/port")
	MOCK_LOG="$BATS_TEST_TMPDIR/requests.$dialect.ndjson"
	: >"$MOCK_LOG"
	rm -f "$BATS_TEST_TMPDIR/port"
	[ -z "$key" ] || args+=(--key "$key")
	MOCK_SCHEME=http
	if [ "${MOCK_TLS-}" = 1 ]; then
		MOCK_CERT="$BATS_TEST_TMPDIR/mock-cert.pem"
		openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
			-addext subjectAltName=IP:127.0.0.1 -keyout "$BATS_TEST_TMPDIR/mock-key.pem" \
			-out "$MOCK_CERT" 2>/dev/null || return 1
		args+=(--tls-cert "$MOCK_CERT" --tls-key "$BATS_TEST_TMPDIR/mock-key.pem")
		MOCK_SCHEME=https
	fi
	"$MOCK" "${args[@]}" --log "$MOCK_LOG" >/dev/null 2>"$BATS_TEST_TMPDIR/mock.err" 3>&- &
	MOCK_PID=$!
	for _ in $(seq 1 200); do
		[ -s "$BATS_TEST_TMPDIR/port" ] && break
		sleep 0.025
	done
	MOCK_PORT=$(cat "$BATS_TEST_TMPDIR/port") || return 1
	local base="$MOCK_SCHEME://127.0.0.1:$MOCK_PORT"
	export OPENAI_BASE_URL="$base/v1" GEMINI_BASE_URL="$base" ANTHROPIC_BASE_URL="$base"
	export OLLAMA_HOST="127.0.0.1:$MOCK_PORT"
	if [ -n "$key" ]; then
		export OPENAI_API_KEY="$key" GEMINI_API_KEY="$key" ANTHROPIC_API_KEY="$key"
	fi
}

mock_stop() {
	if [ -n "${MOCK_PID-}" ]; then
		kill "$MOCK_PID" 2>/dev/null || true
		wait "$MOCK_PID" 2>/dev/null || true
		MOCK_PID=
	fi
	return 0
}

# How many requests the mock received.
mock_requests() {
	wc -l <"$MOCK_LOG" | tr -d ' '
}

# A request document for model $1: a system prompt, one user turn, one tool.
req_simple() {
	cat <<JSON
{"model":"$1","messages":[{"role":"system","content":[{"text":"Be terse."}]},{"role":"user","content":[{"text":"Weather in Paris and Tokyo?"}]}],"tools":[{"name":"get_weather","description":"Current weather for a city","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"config":{"temperature":0.2,"maxOutputTokens":256}}
JSON
}

# The second turn of a parallel tool round trip; the tool message answers
# in completion order (Tokyo first), as Genkit's loop does.
req_roundtrip() {
	cat <<JSON
{"model":"$1","messages":[{"role":"system","content":[{"text":"Be terse."}]},{"role":"user","content":[{"text":"Weather in Paris and Tokyo?"}]},{"role":"model","content":[{"text":"Checking both."},{"toolRequest":{"name":"get_weather","ref":"call_a1","input":{"city":"Paris"}}},{"toolRequest":{"name":"get_weather","ref":"call_b2","input":{"city":"Tokyo"}}}]},{"role":"tool","content":[{"toolResponse":{"name":"get_weather","ref":"call_b2","output":{"tempC":24,"sky":"clear"}}},{"toolResponse":{"name":"get_weather","ref":"call_a1","output":{"tempC":18,"sky":"rain"}}}]}],"tools":[{"name":"get_weather","description":"Current weather for a city","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]}
JSON
}
