# tests/stores/pg.bash - the PostgreSQL pass's store of one test (its
# row of tests/backends; test_helper.bash's common_setup sources this file
# and calls pg_store when AGENTKIT_TEST_BACKEND=pg).

# pg_store: the test's store is a fresh schema of the test server's
# database (AGENTKIT_TEST_PG_URL), named by the URL's search_path.
pg_store() {
	[ -n "${AGENTKIT_TEST_PG_URL:-}" ] || { echo "AGENTKIT_TEST_PG_URL is not set" >&2; return 1; }
	PG_SCHEMA="t_$$_${RANDOM}${RANDOM}"
	psql "$AGENTKIT_TEST_PG_URL" -qAtX -c "CREATE SCHEMA $PG_SCHEMA" >/dev/null || return 1
	local sep='?'
	[[ $AGENTKIT_TEST_PG_URL == *'?'* ]] && sep='&'
	export AGENTKIT_STORE="$AGENTKIT_TEST_PG_URL${sep}options=-csearch_path%3D$PG_SCHEMA"
	export PG_SCHEMA
}
