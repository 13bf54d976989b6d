/* agent-snap.c - read and manage the snapshot store: rows by ID, a
 * session's latest row or history, sessions, export/import, rm, prune,
 * migrate.
 *
 * Near 1,000 lines as one unit: the subcommand table (struct cli_sub) and
 * its help open it, then one short run_NAME() handler per row, each a
 * thin layer over one store.h call; splitting the handlers off would only
 * move the table away from what it dispatches to. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../libcore/agent/agent_ext.h"
#include "../libcore/agent/detach.h"
#include "../libcore/agent/remote.h"
#include "../libcore/base/json.h"
#include "../libcore/base/lines.h"
#include "../libcore/base/strset.h"
#include "../libcore/base/util.h"
#include "../store/store.h"

enum {
	OPT_STORE = 's',
	OPT_SESSION = 'S',
	OPT_METADATA = 'm',
	OPT_KEEP = 'k',
	OPT_BEFORE = 'b',
	OPT_HB_TIMEOUT = CLI_LONG + 1,
	OPT_AGENT = 'a',
	OPT_AGENTS = CLI_LONG + 2,
	OPT_SINCE = CLI_LONG + 3,
	OPT_FORMAT = 'f',
	OPT_DRY_RUN = 'n',
	OPT_QUEUE = 'q',
	OPT_STATUS = CLI_LONG + 4,
	OPT_LIMIT = CLI_LONG + 5,
	OPT_URL = CLI_LONG + 20,
	OPT_HEADER = CLI_LONG + 21,
};

static const struct cli_opt opts[] = {
	{ OPT_STORE, "store", "PATH",
	  "the store directory (default $AGENTKIT_STORE, else "
	  "${XDG_STATE_HOME:-$HOME/.local/state}/agentkit/store)" },
	{ OPT_SESSION, "session", "SID",
	  "print the session's latest row (with IDs: check that they belong to SID)" },
	{ OPT_METADATA, "metadata-only", NULL, "leave out the state (never read)" },
	{ OPT_AGENT, "agent", "AGENT",
	  "read states as AGENT's clients see them: through its state transform "
	  "(docs/transforms.md); with sessions: only AGENT's sessions" },
	{ OPT_AGENTS, "agents", "DIR", "look for AGENT.prompt in DIR first (then $AGENTKIT_PATH, ./agents)" },
	{ OPT_SINCE, "since", "TIME",
	  "sessions: only those updated since TIME (RFC 3339, or a duration ago: 24h)" },
	{ OPT_FORMAT, "format", "FORMAT",
	  "sessions, show and migrate: text (default on a terminal), ndjson, or json "
	  "(one document: sessions an array, show one object with its messages)" },
	{ OPT_KEEP, "keep", "N", "prune: keep the newest N rows of each session" },
	{ OPT_BEFORE, "before", "TIME",
	  "prune: only rows created before TIME (RFC 3339, or a duration ago: 24h)" },
	{ OPT_HB_TIMEOUT, "heartbeat-timeout", "DURATION",
	  "a pending row whose heartbeat is older reads \"expired\" "
	  "(default $AGENTKIT_HEARTBEAT_TIMEOUT, else 60s)" },
	{ OPT_DRY_RUN, "dry-run", NULL, "migrate: show the pending steps, change nothing" },
	{ OPT_LIMIT, "limit", "N", "sessions, runs: print the first N lines only (sessions: "
	  "the N most recently updated; it reads about N sessions, whatever the store's size)" },
	{ OPT_QUEUE, "queue", "NAME", "runs: only the runs queued on NAME" },
	{ OPT_STATUS, "status", "STATUS", "runs: only the runs in STATUS (queued, running, "
	  "aborting, expired)" },
	{ OPT_URL, "url", "URL",
	  "read the rows (IDs, get, --session) through the getSnapshot route of the "
	  "agent a server serves at URL (agent-serve, a Genkit app; docs/serve.md), "
	  "not from a store; NAME/AGENT: a genkit endpoint of the models file" },
	{ OPT_HEADER, "header", "'NAME: VALUE'", "with --url: send this header (repeatable)" },
	{ 0 }
};

static const struct cli_exitcode exits[] = {
	{ 0, "success" },
	{ 1, "with --url: the server could not be reached or refused the request "
	     "(401, 403, 5xx)" },
	{ 4, "a snapshot or session was not found (the others are still printed), "
	     "there is no store at the path, or import's FILE does not exist" },
	{ 5, "the store's format is newer than this agentkit knows (upgrade agentkit)" },
	{ 100, "usage error (bad options, an invalid ID)" },
	{ 101, "malformed input (import: a bad NDJSON line, nothing is written; "
	       "with --session and IDs: a snapshot belongs to another session, as "
	       "agent-run's INVALID_ARGUMENT for the same mismatch)" },
	{ 111, "system failure (cannot open the store, cannot write output)" },
	{ -1, NULL }
};

/* What a subcommand's handler needs opened before it runs (snap_open()). */
enum {
	SNAP_AGENT = 1,         /* open --agent's state transform (and so check it) */
	SNAP_WRITE = 2,         /* open the store read-write, and name its directory */
	SNAP_NO_STORE = 4,      /* do not open the store */
};

/* The subcommands' handlers, below; ctx is a struct snap. */
static enum core_status run_get(void *ctx, int argc, char **argv);
static enum core_status run_sessions(void *ctx, int argc, char **argv);
static enum core_status run_show(void *ctx, int argc, char **argv);
static enum core_status run_log(void *ctx, int argc, char **argv);
static enum core_status run_rm(void *ctx, int argc, char **argv);
static enum core_status run_prune(void *ctx, int argc, char **argv);
static enum core_status run_export(void *ctx, int argc, char **argv);
static enum core_status run_import(void *ctx, int argc, char **argv);
static enum core_status run_worker_log(void *ctx, int argc, char **argv);
static enum core_status run_migrate(void *ctx, int argc, char **argv);
static enum core_status run_runs(void *ctx, int argc, char **argv);

/*
 * A new subcommand is one row here and its handler.  A row: the word, its
 * synopsis, the least and most operands, an operand's name and kind; the
 * options only it takes, what it needs opened; its help; its handler.
 */
static const struct cli_sub subs[] = {
	{ "get", "ID...", 1, -1, "snapshot ID", CLI_SNAPSHOT,
	  "session", SNAP_AGENT,
	  "Prints the rows with those IDs as 'agent-snap ID...' does, also rows "
	  "whose ID is a subcommand word; with --session SID, checks that they "
	  "belong to SID.", run_get },
	{ "sessions", "[--agent NAME] [--since TIME] [--limit N]", 0, 0, "", CLI_TEXT,
	  "since limit", 0,
	  "Prints one line per session as it reads them, most recently updated first "
	  "(the updatedAt of its latest row, the store's clock; ties by session ID): "
	  "{\"sessionId\", \"snapshotId\" (the latest row), \"status\" (its shaped "
	  "status), \"updatedAt\", \"snapshots\" (how many rows the session has), "
	  "\"agent\", \"model\", \"title\" (the first user text, shortened), "
	  "\"usage\" (the session's token counts summed over its turns, when a "
	  "model reported any), \"finishReason\" (the latest row's, when it has "
	  "one)}; on a terminal, a table, whose STATUS reads \"interrupted\" for a "
	  "completed row that paused on a tool interrupt and whose TOKENS is the "
	  "session's totalTokens.  --agent NAME keeps the sessions of that agent, "
	  "--since TIME those updated since then.", run_sessions },
	{ "show", "SID", 1, 1, "SID", CLI_SESSION,
	  NULL, SNAP_AGENT,
	  "Prints the conversation of the session's latest row (or of the "
	  "snapshot SID): on a terminal as text, one paragraph per message with "
	  "tool calls and results on one line each; otherwise its messages as "
	  "NDJSON, one per line; with --format json one object {snapshotId, status, "
	  "finishReason, error, input, sessionId, messages}.  A row that did not end "
	  "with a usable turn (failed, aborted, expired, interrupted, ...) is followed "
	  "by what is known: the input of the turn that did not commit, its status, "
	  "finish reason and error, and the next step (a line \"-- ...\" as text, one "
	  "object without a role as NDJSON).  Delegations follow as log has them "
	  "(docs/agents.md): after the conversation, that of each sub-session the "
	  "session's agent delegated to (its latest row), oldest first, depth first, "
	  "each after a heading: as text a line \"=== depth 1: researcher, session "
	  "SID, delegated by lead with delegate_to_researcher\", as NDJSON an object "
	  "without a role {\"sessionId\", \"snapshotId\", \"depth\", \"agent\", "
	  "\"delegation\"}; with --format json they are the object's "
	  "\"delegations\", each the heading's members and the sub-session's view.  "
	  "Exits 0 whenever it printed the row: agent-wait gives the outcome.", run_show },
	{ "log", "SID", 1, 1, "SID", CLI_SESSION,
	  NULL, SNAP_AGENT,
	  "Prints the session's rows oldest first (createdAt, then "
	  "snapshotId), metadata only, each with its parentId; a row whose parent "
	  "already has an earlier child is a fork and carries \"fork\": true; a "
	  "detached run's row names the worker that ran it, \"worker\": "
	  "{\"host\", \"pid\"}; a row's \"usage\" is its turn's token counts "
	  "(a detached run's: all its turns).  Delegations follow as a tree "
	  "(docs/agents.md): after a session's rows, the rows of each sub-session its "
	  "agent delegated to, oldest first, each with \"depth\" (1 for the "
	  "session's own sub-agents, 2 for theirs, ...) and \"delegation\": "
	  "{\"parentSessionId\", \"parentSnapshotId\", \"agent\", \"tool\"}.", run_log },
	{ "rm", "SID...", 1, -1, "session ID", CLI_SESSION,
	  NULL, SNAP_AGENT | SNAP_WRITE,
	  "Deletes every row of each session, and the rows' worker logs (in the same "
	  "transaction), and prints "
	  "{\"sessionId\", \"deleted\"} for each.", run_rm },
	{ "prune", "[--keep N] [--before TIME] [SID]", 0, 1, "SID", CLI_SESSION,
	  "keep before", SNAP_AGENT | SNAP_WRITE,
	  "Deletes settled rows of every session (or of SID), and their worker logs: "
	  "those beyond the newest N (--keep) that were also created "
	  "before TIME (--before); with one limit, that one alone decides.  A "
	  "session's latest row and pending or aborting rows are never pruned.  It "
	  "prints {\"deleted\": N}.", run_prune },
	{ "export", "[SID]...", 0, -1, "SID", CLI_SESSION,
	  NULL, SNAP_AGENT,
	  "Prints the raw rows (not shaped) of every session, or of the "
	  "given ones, as NDJSON: what import reads.", run_export },
	{ "import", "[FILE]", 0, 1, "FILE", CLI_FILE,
	  NULL, SNAP_NO_STORE,
	  "Reads rows as export prints them from FILE (or stdin, or "
	  "'-') and writes them as given, replacing rows with the same "
	  "snapshotId.  Every line is checked first (an object with string "
	  "snapshotId and sessionId); a bad line is reported with its number and "
	  "nothing is written.  All rows are then written in one transaction, one "
	  "row at a time (memory stays at about one row; rows from a pipe are "
	  "first copied to an unnamed file in the store directory), and a status "
	  "change wakes agent-wait like any other write.  It prints "
	  "{\"imported\": N}.", run_import },
	{ "runs", "[--queue NAME] [--status STATUS] [--limit N]", 0, 0, "", CLI_TEXT,
	  "queue status limit", 0,
	  "Prints the queued runs that have not settled (agent-run --queue, "
	  "agent-worker; docs/queue.md), by queue, then the time each is due, then snapshot ID: "
	  "{\"snapshotId\", \"sessionId\", \"queue\", \"agent\", \"status\" "
	  "(queued: no worker holds it; running: a worker's lease is live; aborting; "
	  "expired: its worker was lost and it waits to be claimed again), \"attempt\", "
	  "\"maxAttempts\" (the run's own, or null: the claiming worker's --max-attempts), "
	  "\"worker\" {\"host\", \"pid\"} (the last claim's), "
	  "\"leaseExpiresAt\", \"notBefore\", \"createdAt\", \"age\" (seconds since it "
	  "was queued)}; on a terminal, a table.", run_runs },
	{ "worker-log", "ID", 1, 1, "snapshot ID", CLI_SNAPSHOT,
	  NULL, 0,
	  "Prints the log a detached run's worker kept in the store for snapshot "
	  "ID, one \"TIME agent-run[PID]: line\" each: when it started, each input, "
	  "heartbeat trouble, the abort it saw, how it finalized the row.  Any host "
	  "reads any worker's log; rm and prune delete it with its row.  No lines "
	  "for ID: exit 4.", run_worker_log },
	{ "migrate", "[--dry-run]", 0, 0, "", CLI_TEXT,
	  "dry-run", SNAP_NO_STORE,
	  "Brings the store's format up to this agentkit's: applies the steps it "
	  "lacks, in order, all in one transaction, and prints {\"backend\", "
	  "\"version\" (the store's, after), \"latest\" (this agentkit's), "
	  "\"applied\": [{\"version\", \"statements\"}]}, on a terminal as text.  "
	  "--dry-run (-n) changes nothing and prints the steps pending instead, "
	  "under \"pending\".  A PostgreSQL store's schema has numbered steps of "
	  "SQL, each statement listed by what it creates or alters; every agentkit "
	  "that opens the store also applies them, so migrate is how to see them "
	  "first, or to apply them with a role that may change the schema (on an "
	  "empty database it creates the schema).  An LMDB store versions each "
	  "record and has nothing to migrate.  A store newer than this agentkit "
	  "knows exits 5; migrate never creates an LMDB store.", run_migrate },
	{ 0 }
};

static const struct cli_prog prog = {
	.name = "agent-snap",
	.purpose = "read and manage the agentkit snapshot store",
	.synopsis =
	"[OPTION]... ID...\n"
	"[OPTION]... --session SID",
	.description =
	"Prints snapshot rows (SessionSnapshot JSON, one per line) as Genkit's "
	"getSnapshot shapes them: a pending or aborting row whose heartbeatAt is "
	"older than the heartbeat timeout reads \"expired\", an empty status "
	"reads \"completed\", a missing or zero updatedAt reads as createdAt.  "
	"--session SID prints the session's latest row (greatest createdAt, ties "
	"by greater snapshotId, any status).  Unknown IDs are reported on stderr "
	"and the others still printed; the exit status is then 4.  The "
	"subcommands below do the rest; 'agent-snap get ID' prints a row whose "
	"ID is one of their words.\n\n"
	"Only import creates a store: the other subcommands exit 4 with \"no "
	"store at PATH\" where there is none.  A store whose files cannot be "
	"written (a read-only mount, a backup) is read read-only.",
	.opts = opts,
	.examples =
	"$ agent-snap 7f1c...\n"
	"  print one snapshot\n"
	"$ agent-snap --session build-42 --metadata-only | jq -r .status\n"
	"  the status of a session's latest row\n"
	"$ agent-snap sessions --agent tasks --since 24h\n"
	"  yesterday's sessions of the tasks agent, newest first\n"
	"$ agent-snap show build-42\n"
	"  read the conversation\n"
	"$ agent-snap log build-42\n"
	"  the session's history, forks marked\n"
	"$ agent-snap export >backup.ndjson && agent-snap --store new import <backup.ndjson\n"
	"  copy a store\n"
	"$ agent-snap prune --keep 20 --before 720h\n"
	"  drop old settled rows beyond the newest 20 of each session\n"
	"$ agent-snap --store postgresql://db/agentkit migrate --dry-run\n"
	"  the schema steps a newer agentkit would apply",
	.exits = exits,
	.subs = subs,
	.plain_sub = "get",
	.plain_hint = "to read a snapshot of that ID use",
	.operands = CLI_SNAPSHOT,
};

struct opts {
	const char *store, *session;
	unsigned flags;
	int64_t hb_timeout_ms;
	size_t keep;
	int64_t before_ns;
	int have_keep, have_before;
	int64_t since_ns;
	int text;                         /* sessions, show, migrate: -f text */
	int json;                         /* -f json: one JSON document */
	int dry_run;                      /* migrate -n */
	const char *queue, *status;       /* runs --queue, --status */
	size_t limit;                     /* sessions, runs --limit: 0 for all */
	const char *agent, *agents_dir;   /* -a: read through its state transform */
	struct agent_ext *x;
	const char *url;                  /* --url: rows through getSnapshot */
	const char **headers;
	size_t nheaders;
};

/* What one invocation holds; every handler's ctx. */
struct snap {
	struct opts o;
	struct store *s;
	struct core_buf dir;    /* the store's directory, with SNAP_WRITE */
};

/* Keep the worse of two outcomes: a failure to go on beats "not found". */
static enum core_status worse(enum core_status a, enum core_status b)
{
	if (a == CORE_OK)
		return b;
	if (b == CORE_OK || a == CORE_ESYS || a == CORE_EPIPE)
		return a;
	return core_exit_code(b) > core_exit_code(a) ? b : a;
}

static enum core_status show_ids(struct store *s, const struct opts *o, char **ids,
                                 int n)
{
	enum core_status rc = CORE_OK, st;
	int64_t now = store_now_ns(s);
	int i;
	for (i = 0; i < n; i++) {
		struct core_err e = { 0 };
		json_t *row = NULL;
		const char *sid;
		st = store_get(s, ids[i], o->flags, &row, &e);
		if (st == CORE_OK && o->session && (sid = json_string_value(
		        json_object_get(row, "sessionId"))) && strcmp(sid, o->session))
			st = core_fail(&e, CORE_EINVAL,
			               "snapshot '%s' does not belong to session '%s' "
			               "(snapshot's session: '%s')", ids[i], o->session, sid);
		if (st == CORE_OK) {
			store_shape(row, now, o->hb_timeout_ms);
			if ((st = agent_ext_snap_row(o->x, row, &e)) == CORE_OK)
				st = cli_write_json(row, &e);
		}
		json_decref(row);
		if (st != CORE_OK) {
			cli_report(&e);
			rc = worse(rc, st);
			if (st == CORE_ESYS || st == CORE_EPIPE || st == CORE_ENOMEM)
				break;
		}
	}
	return rc;
}

static enum core_status show_latest(struct store *s, const struct opts *o)
{
	struct core_err e = { 0 };
	json_t *row = NULL;
	enum core_status st = store_latest(s, o->session, o->flags, &row, &e);
	if (st == CORE_OK) {
		store_shape(row, store_now_ns(s), o->hb_timeout_ms);
		if ((st = agent_ext_snap_row(o->x, row, &e)) == CORE_OK)
			st = cli_write_json(row, &e);
	}
	json_decref(row);
	return st == CORE_OK ? st : cli_report(&e);
}

/* ---- sessions ---- */

/* One session as a table row: SESSION UPDATED STATUS ROWS TOKENS AGENT
 * TITLE; TOKENS is the session's totalTokens, "-" when no model reported
 * tokens. */
static enum core_status session_text(const json_t *l, struct core_err *e)
{
	const char *updated = json_string_value(json_object_get(l, "updatedAt"));
	const char *agent = json_string_value(json_object_get(l, "agent"));
	const char *title = json_string_value(json_object_get(l, "title"));
	const char *status = json_string_value(json_object_get(l, "status"));
	const char *reason = json_string_value(json_object_get(l, "finishReason"));
	const json_t *total = json_object_get(json_object_get(l, "usage"), "totalTokens");
	char when[20] = "-", tokens[24] = "-";
	if (json_is_integer(total))
		snprintf(tokens, sizeof tokens, "%lld", (long long)json_integer_value(total));
	if (updated && strlen(updated) >= 19) {
		memcpy(when, updated, 19);
		when[10] = ' ';
		when[19] = 0;
	}
	struct core_buf b = CORE_BUF_INIT(1 << 16);
	/* A paused turn is what a person must answer: its own word here. */
	if (status && !strcmp(status, "completed") && reason && !strcmp(reason, "interrupted"))
		status = "interrupted";
	enum core_status st = core_buf_addf(&b, "%-36s  %-19s  %-11s %5lld  %7s  %-12s  %s\n",
		json_string_value(json_object_get(l, "sessionId")), when, status,
		(long long)json_integer_value(json_object_get(l, "snapshots")), tokens,
		agent ? agent : "-", title ? title : "");
	if (st)
		st = core_fail(e, CORE_ENOMEM, "out of memory");
	else
		st = cli_write(b.p, b.len, e);
	core_buf_release(&b);
	return st;
}

/* sessions prints each line as the store gives it. */
struct sessions_ctx {
	const struct opts *o;
	size_t n;
	json_t *all;            /* --format json: the array (one document) */
	struct core_err *e;
};

static const char sessions_head[] = "SESSION                               UPDATED (UTC)        "
                                    "STATUS       ROWS   TOKENS  AGENT         TITLE\n";

static enum core_status one_session(struct store_line *line, void *ctx)
{
	struct sessions_ctx *c = ctx;
	enum core_status st = CORE_OK;
	json_t *v = NULL;
	const char *text;
	size_t len;
	if ((c->all || c->o->text) && !(v = store_line_json(line)))
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	if (c->all)
		return json_array_append(c->all, v) ? core_fail(c->e, CORE_ENOMEM, "out of memory")
		                                    : CORE_OK;
	if (c->o->text && !c->n++)
		st = cli_write(sessions_head, sizeof sessions_head - 1, c->e);
	if (st == CORE_OK && c->o->text)
		return session_text(v, c->e);
	/* NDJSON: the store's text as it stands */
	text = store_line_text(line, &len);
	if (st == CORE_OK && (st = cli_write(text, len, c->e)) == CORE_OK)
		st = cli_write("\n", 1, c->e);
	return st;
}

static enum core_status run_sessions(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	const struct opts *o = &c->o;
	struct core_err e = { 0 };
	struct store_session_filter f = { o->agent, o->since_ns, o->hb_timeout_ms };
	struct sessions_ctx sc = { o, 0, NULL, &e };
	enum core_status st = CORE_OK;
	/* one JSON document is one array: it is whole before it is printed */
	if (o->json && !(sc.all = json_array()))
		st = core_fail(&e, CORE_ENOMEM, "out of memory");
	if (st == CORE_OK)
		st = store_sessions_recent(c->s, &f, o->limit, one_session, &sc, &e);
	if (st == CORE_OK && sc.all)
		st = cli_write_json(sc.all, &e);
	json_decref(sc.all);
	return st == CORE_OK ? st : cli_report(&e);
}

/* ---- runs: the queued runs ---- */

struct runs_ctx {
	const struct opts *o;
	int64_t now_ns;
	size_t n;
	struct core_err *e;
	size_t printed;         /* lines printed (--limit) */
};

static json_t *time_or_null(int64_t ns)
{
	char t[CORE_TIME_MAX];
	if (ns <= 0)
		return json_null();
	core_time_format(ns, t);
	return json_string(t);
}

static enum core_status one_run(const json_t *row, void *ctx)
{
	struct runs_ctx *c = ctx;
	const json_t *info = json_object_get(row, STORE_INFO_KEY), *q = store_queue_of(row);
	const char *queue = json_string_value(json_object_get(q, "name"));
	const char *status = json_string_value(json_object_get(row, "status"));
	json_int_t attempt = json_integer_value(json_object_get(q, "attempt"));
	json_int_t lease = json_integer_value(json_object_get(q, "lease"));
	const json_t *worker = json_object_get(info, "worker");
	int64_t created = 0;
	enum core_status st;
	const char *run;
	json_t *line;
	if (!q || (c->o->queue && strcmp(c->o->queue, queue ? queue : "")))
		return CORE_OK;
	if (status && !strcmp(status, "aborting"))
		run = "aborting";
	else if (!attempt || !json_object_get(row, "heartbeatAt"))
		run = "queued";         /* never claimed, or handed back */
	else
		run = lease > c->now_ns ? "running" : "expired";
	if (c->o->status && strcmp(c->o->status, run))
		return CORE_OK;
	if (c->o->limit && c->printed == c->o->limit)
		return CORE_ECANCELLED;         /* --limit: the first N only */
	c->printed++;
	core_time_parse(json_string_value(json_object_get(row, "createdAt")), &created);
	line = json_pack("{s:O, s:O, s:s, s:O, s:s, s:I, s:O, s:O, s:o, s:o, s:O, s:I}",
	                 "snapshotId", json_object_get(row, "snapshotId"),
	                 "sessionId", json_object_get(row, "sessionId"), "queue", queue ? queue : "",
	                 "agent", json_object_get(q, "agent") ? json_object_get(q, "agent")
	                                                       : json_null(),
	                 "status", run, "attempt", attempt,
	                 "maxAttempts", json_object_get(q, "maxAttempts") ?
	                                json_object_get(q, "maxAttempts") : json_null(),
	                 "worker", attempt && worker ? worker : json_null(),
	                 "leaseExpiresAt", time_or_null(attempt ? lease : 0),
	                 "notBefore", time_or_null(json_integer_value(json_object_get(q, "notBefore"))),
	                 "createdAt", json_object_get(row, "createdAt"),
	                 "age", (json_int_t)(created ? (c->now_ns - created) / 1000000000 : 0));
	if (!line)
		return core_fail(c->e, CORE_ENOMEM, "runs: out of memory");
	if (c->o->text) {
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		char w[300] = "-";
		if (attempt && worker)
			snprintf(w, sizeof w, "%.200s:%lld", json_string_value(json_object_get(worker, "host")),
			         (long long)json_integer_value(json_object_get(worker, "pid")));
		if (!c->n++)
			core_buf_adds(&b, "SNAPSHOT                              QUEUE        AGENT        "
			              "STATUS    TRY  WORKER                AGE\n");
		char max[24] = "-";
		if (json_object_get(q, "maxAttempts"))
			snprintf(max, sizeof max, "%lld",
			         (long long)json_integer_value(json_object_get(q, "maxAttempts")));
		core_buf_addf(&b, "%-37s %-12.12s %-12.12s %-9s %lld/%s  %-21.21s %llds\n",
		              json_string_value(json_object_get(row, "snapshotId")), queue ? queue : "",
		              json_string_value(json_object_get(q, "agent")) ?
		              json_string_value(json_object_get(q, "agent")) : "-", run,
		              (long long)attempt, max, w,
		              (long long)json_integer_value(json_object_get(line, "age")));
		st = b.p ? cli_write(b.p, b.len, c->e) : core_fail(c->e, CORE_ENOMEM, "out of memory");
		core_buf_release(&b);
	} else {
		st = cli_write_json(line, c->e);
	}
	json_decref(line);
	return st;
}

static enum core_status run_runs(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	struct core_err e = { 0 };
	struct runs_ctx r = { &c->o, store_now_ns(c->s), 0, &e, 0 };
	enum core_status st = store_queued(c->s, one_run, &r, &e);
	if (st == CORE_ECANCELLED && c->o.limit && r.printed == c->o.limit)
		st = CORE_OK;
	return st == CORE_OK ? st : cli_report(&e);
}

/* ---- show: a conversation ---- */

/* A value on one line, cut to max bytes. */
static void add_short(struct core_buf *b, const json_t *v, size_t max)
{
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	size_t n = s ? strlen(s) : 0;
	if (s)
		core_buf_add(b, s, n > max ? max : n);
	if (n > max)
		core_buf_add(b, "...", 3);
	free(s);
}

/* One message as a person reads it: "role: text", tool calls and results
 * one line each; the caller separates messages with a blank line. */
static enum core_status message_text(const json_t *m, struct core_err *e)
{
	const char *role = json_string_value(json_object_get(m, "role"));
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	const json_t *part, *x;
	size_t i;
	int at_start = 1;
	core_buf_addf(&b, "%s:", role ? role : "?");
	json_array_foreach(json_object_get(m, "content"), i, part) {
		const char *text = json_string_value(json_object_get(part, "text"));
		if (text) {
			core_buf_addf(&b, at_start ? " %s\n" : "%s\n", text);
		} else if ((x = json_object_get(part, "toolRequest"))) {
			core_buf_addf(&b, "%s  -> %s ", at_start ? "\n" : "",
			              json_string_value(json_object_get(x, "name")));
			add_short(&b, json_object_get(x, "input"), 200);
			core_buf_add(&b, "\n", 1);
		} else if ((x = json_object_get(part, "toolResponse"))) {
			core_buf_addf(&b, "%s  <- %s ", at_start ? "\n" : "",
			              json_string_value(json_object_get(x, "name")));
			add_short(&b, json_object_get(x, "output"), 200);
			core_buf_add(&b, "\n", 1);
		} else {
			core_buf_add(&b, at_start ? " " : "  ", at_start ? 1 : 2);
			add_short(&b, part, 200);
			core_buf_add(&b, "\n", 1);
		}
		at_start = 0;
	}
	if (at_start)
		core_buf_add(&b, "\n", 1);
	enum core_status st = b.p ? cli_write(b.p, b.len, e)
	                          : core_fail(e, CORE_ENOMEM, "out of memory");
	core_buf_release(&b);
	return st;
}

/* Whether the row ended as a usable turn: completed, finish reason stop
 * (or other, unknown, none); show then says no more than the messages. */
static int show_done(const json_t *row)
{
	const char *status = json_string_value(json_object_get(row, "status"));
	const char *reason = json_string_value(json_object_get(row, "finishReason"));
	return status && !strcmp(status, "completed") && core_finish_status(reason) == CORE_OK;
}

/* What else show knows of a row that did not end well, as text: the
 * input of the turn that did not commit, then "-- STATUS, finish reason
 * R: MESSAGE (NAME)" and, where there is one, the next step. */
static enum core_status show_end_text(const json_t *row, const char *input, int blank,
                                      struct core_err *e)
{
	const char *status = json_string_value(json_object_get(row, "status"));
	const char *reason = json_string_value(json_object_get(row, "finishReason"));
	const char *sid = json_string_value(json_object_get(row, "sessionId"));
	const char *id = json_string_value(json_object_get(row, "snapshotId"));
	const json_t *err = json_object_get(row, "error");
	const char *msg = json_string_value(json_object_get(err, "message"));
	const char *name = json_string_value(json_object_get(err, "status"));
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	if (input)
		core_buf_addf(&b, "%suser (not kept: the turn did not commit): %s\n",
		              blank ? "\n" : "", input);
	core_buf_addf(&b, "%s-- %s", blank || input ? "\n" : "", status ? status : "?");
	if (reason && *reason)
		core_buf_addf(&b, ", finish reason %s", reason);
	if (msg)
		core_buf_addf(&b, ": %s%s%s%s", msg, name ? " (" : "", name ? name : "",
		              name ? ")" : "");
	core_buf_add(&b, "\n", 1);
	if (status && !strcmp(status, "expired"))
		core_buf_addf(&b, "-- its worker stopped beating; what it did: agent-snap "
		              "worker-log %s\n", id);
	else if (status && (!strcmp(status, "pending") || !strcmp(status, "aborting")))
		core_buf_addf(&b, "-- still running: agent-wait %s\n", id);
	else if (reason && !strcmp(reason, "interrupted"))
		core_buf_addf(&b, "-- waits for a resume: agent-run --session %s with a "
		              "{\"resume\": ...} input\n", sid);
	enum core_status st = b.p ? cli_write(b.p, b.len, e)
	                          : core_fail(e, CORE_ENOMEM, "out of memory");
	core_buf_release(&b);
	return st;
}

/* show's end as one JSON value: {snapshotId, status, finishReason?,
 * error?, input?} (new; NULL without memory). */
static json_t *show_end(const json_t *row, const char *input)
{
	json_t *end = json_pack("{s:O,s:O}", "snapshotId", json_object_get(row, "snapshotId"),
	                        "status", json_object_get(row, "status"));
	static const char *const keep[] = { "finishReason", "error" };
	for (size_t i = 0; end && i < 2; i++)
		if (json_object_get(row, keep[i]))
			json_object_set(end, keep[i], json_object_get(row, keep[i]));
	if (end && input)
		json_object_set_new(end, "input", json_string(input));
	return end;
}

/* --format json: the whole view as one object, its messages in it (new;
 * NULL without memory). */
static json_t *show_value(const json_t *row, const char *input)
{
	json_t *v = show_end(row, input);
	const json_t *msgs = json_object_get(json_object_get(row, "state"), "messages");
	if (v && !json_object_set(v, "sessionId", json_object_get(row, "sessionId")) &&
	    !json_object_set_new(v, "messages", msgs ? json_deep_copy(msgs) : json_array()))
		return v;
	json_decref(v);
	return NULL;
}

/* The conversation, text or NDJSON, and then what else is known. */
static enum core_status show_lines(const json_t *row, const char *input, int text,
                                   struct core_err *e)
{
	const json_t *m;
	size_t i, n = 0;
	enum core_status st = CORE_OK;
	json_array_foreach(json_object_get(json_object_get(row, "state"), "messages"), i, m) {
		if (text && i)          /* a blank line between messages */
			st = cli_write("\n", 1, e);
		if (!st)
			st = text ? message_text(m, e) : cli_write_json(m, e);
		if (st)
			return st;
		n++;
	}
	if (show_done(row))
		return CORE_OK;
	if (text)
		return show_end_text(row, input, n > 0, e);
	json_t *end = show_end(row, input);
	st = end ? cli_write_json(end, e) : core_fail(e, CORE_ENOMEM, "out of memory");
	json_decref(end);
	return st;
}

/* ---- the delegation tree: log and show ---- */

/* The sessions whose latest row names a parent session, the one that
 * delegated to them: parent -> [[createdAt, sessionId], ...], found in
 * one pass over the sessions whatever the tree's size. */
static enum core_status find_delegations(const struct store_session_info *si, void *ctx)
{
	json_t *tree = ctx, *list;
	const json_t *d = json_object_get(json_object_get(si->latest, STORE_INFO_KEY), "delegation");
	const char *p = json_string_value(json_object_get(d, "parentSessionId"));
	if (!p)
		return CORE_OK;
	if (!(list = json_object_get(tree, p)) &&
	    (!(list = json_array()) || json_object_set_new(tree, p, list)))
		return CORE_ENOMEM;
	return json_array_append_new(list, json_pack("[O, s]", json_object_get(si->latest,
	                             "createdAt"), si->session_id)) ? CORE_ENOMEM : CORE_OK;
}

static int by_created(const void *a, const void *b)
{
	const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	const char *s = json_string_value(json_array_get(x, 0));
	const char *t = json_string_value(json_array_get(y, 0));
	return strcmp(s ? s : "", t ? t : "");
}

/* What a walk does with one session of the tree (depth 0: the one asked
 * for); it reports its own failures. */
typedef enum core_status tree_visit_fn(struct snap *c, const char *sid, int depth, void *ctx);

/* Session sid, then each sub-session its agent delegated to (oldest
 * first; tree as find_delegations() made it) and theirs, depth first, 32
 * levels at most (agents refuse cycles and chains past their maxDepth;
 * rows can be imported). */
static enum core_status tree_from(struct snap *c, const json_t *tree, const char *sid,
                                  int depth, tree_visit_fn *visit, void *ctx)
{
	const json_t *found = depth < 32 ? json_object_get(tree, sid) : NULL;
	size_t n = json_array_size(found);
	enum core_status st = visit(c, sid, depth, ctx);
	json_t **v;
	if (st || !n)
		return st;
	if (!(v = malloc(n * sizeof *v))) {
		struct core_err e = { 0 };
		core_fail(&e, CORE_ENOMEM, "out of memory");
		return cli_report(&e);
	}
	for (size_t i = 0; i < n; i++)
		v[i] = json_array_get(found, i);
	qsort(v, n, sizeof *v, by_created);
	for (size_t i = 0; i < n && !st; i++)
		st = tree_from(c, tree, json_string_value(json_array_get(v[i], 1)), depth + 1,
		               visit, ctx);
	free(v);
	return st;
}

static enum core_status tree_walk(struct snap *c, const char *sid, tree_visit_fn *visit,
                                  void *ctx)
{
	struct core_err e = { 0 };
	json_t *tree = json_object();
	enum core_status st = tree ? store_sessions(c->s, find_delegations, tree, &e)
	                           : core_fail(&e, CORE_ENOMEM, "out of memory");
	if (st == CORE_ENOMEM && !e.st)
		core_fail(&e, st, "out of memory");
	st = st ? cli_report(&e) : tree_from(c, tree, sid, 0, visit, ctx);
	json_decref(tree);
	return st;
}

/* A row as show prints it: *row shaped (and through -a's transform),
 * *info its runtime notes (STORE_INFO_KEY: the input of a turn that did
 * not commit, the agent, the delegation that made its session), or NULL;
 * latest_only: id is a session.  Reports its failures. */
static enum core_status show_load(struct snap *c, const char *id, int latest_only,
                                  json_t **row, json_t **info)
{
	struct core_err e = { 0 };
	enum core_status st = store_latest(c->s, id, 0, row, &e);
	*info = NULL;
	if (st == CORE_ENOTFOUND && !latest_only &&
	    (st = store_get(c->s, id, 0, row, &e)) == CORE_ENOTFOUND)
		core_fail(&e, CORE_ENOTFOUND, "no session or snapshot '%s'", id);
	if (st == CORE_OK) {
		/* before shaping drops them (and reads an old pending row
		 * expired) */
		*info = json_incref(json_object_get(*row, STORE_INFO_KEY));
		store_shape(*row, core_now_ns(), c->o.hb_timeout_ms);
		st = agent_ext_snap_row(c->o.x, *row, &e);
	}
	if (st == CORE_OK)
		return st;
	json_decref(*row);
	json_decref(*info);
	*row = *info = NULL;
	return cli_report(&e);
}

static const char *info_input(const json_t *info)
{
	return json_string_value(json_object_get(info, "input"));
}

/* show's walk: the row asked for, then each sub-session's latest row. */
struct show_ctx {
	json_t *top, *top_info; /* the row asked for (depth 0) */
	json_t *view;           /* --format json: the object, and its ... */
	json_t *subs;           /* ... "delegations" */
};

/* A sub-session's heading: {"sessionId", "snapshotId", "depth", "agent"?,
 * "delegation"?} (new; NULL without memory). */
static json_t *show_heading(const json_t *row, int depth, const json_t *info)
{
	json_t *h = json_pack("{s:O, s:O, s:i}", "sessionId", json_object_get(row, "sessionId"),
	                      "snapshotId", json_object_get(row, "snapshotId"), "depth", depth);
	const json_t *agent = json_object_get(info, "agent"), *d = json_object_get(info,
	                                                                          "delegation");
	if (h && json_is_string(agent))
		json_object_set(h, "agent", (json_t *)agent);
	if (h && json_is_object(d))
		json_object_set(h, "delegation", (json_t *)d);
	return h;
}

/* As text: "=== depth 1: researcher, session SID, delegated by lead with
 * delegate_to_researcher", between blank lines. */
static enum core_status show_heading_text(const json_t *h, struct core_err *e)
{
	const json_t *d = json_object_get(h, "delegation");
	const char *agent = json_string_value(json_object_get(h, "agent"));
	const char *by = json_string_value(json_object_get(d, "agent"));
	const char *tool = json_string_value(json_object_get(d, "tool"));
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	core_buf_addf(&b, "\n=== depth %lld: ", (long long)json_integer_value(
	              json_object_get(h, "depth")));
	if (agent)
		core_buf_addf(&b, "%s, ", agent);
	core_buf_addf(&b, "session %s", json_string_value(json_object_get(h, "sessionId")));
	if (by && tool)
		core_buf_addf(&b, ", delegated by %s with %s", by, tool);
	core_buf_adds(&b, "\n\n");
	enum core_status st = b.p ? cli_write(b.p, b.len, e)
	                          : core_fail(e, CORE_ENOMEM, "out of memory");
	core_buf_release(&b);
	return st;
}

static enum core_status show_visit(struct snap *c, const char *sid, int depth, void *ctx)
{
	struct show_ctx *t = ctx;
	struct core_err e = { 0 };
	json_t *row = t->top, *info = t->top_info, *h = NULL;
	enum core_status st = CORE_OK;
	if (depth) {
		if ((st = show_load(c, sid, 1, &row, &info)))
			return st;
		if (!(h = show_heading(row, depth, info)))
			st = core_fail(&e, CORE_ENOMEM, "out of memory");
	}
	if (st) {
		/* reported below */
	} else if (c->o.json) {
		json_t *v = show_value(row, info_input(info));
		if (v && h)
			json_object_update_missing(h, v);
		if (!v || (h ? json_array_append(t->subs, h) : (t->view = json_incref(v), 0)))
			st = core_fail(&e, CORE_ENOMEM, "out of memory");
		json_decref(v);
	} else {
		if (h)
			st = c->o.text ? show_heading_text(h, &e) : cli_write_json(h, &e);
		if (!st)
			st = show_lines(row, info_input(info), c->o.text, &e);
	}
	if (depth) {
		json_decref(row);
		json_decref(info);
	}
	json_decref(h);
	return st == CORE_OK ? st : cli_report(&e);
}

static enum core_status run_show(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	struct core_err e = { 0 };
	struct show_ctx t = { 0 };
	enum core_status st = show_load(c, argv[0], 0, &t.top, &t.top_info);
	if (st)
		return st;
	const char *sid = json_string_value(json_object_get(t.top, "sessionId"));
	if (!(t.subs = json_array())) {
		core_fail(&e, CORE_ENOMEM, "out of memory");
		st = cli_report(&e);
	}
	if (!st)
		st = tree_walk(c, sid ? sid : "", show_visit, &t);
	if (!st && c->o.json) {
		if (json_array_size(t.subs))
			json_object_set(t.view, "delegations", t.subs);
		if ((st = cli_write_json(t.view, &e)))
			st = cli_report(&e);
	}
	json_decref(t.top);
	json_decref(t.top_info);
	json_decref(t.view);
	json_decref(t.subs);
	return st;
}

/* ---- log and export ---- */

struct log_ctx {
	const struct store *s;
	const struct opts *o;
	struct core_err *e;
	int shape;              /* log: shape and mark forks; export: raw */
	struct strset parents;  /* the parentIds seen, for fork marks */
	int depth;              /* log: a sub-session's depth under the session */
};

static enum core_status print_log_row(const json_t *row, void *ctx)
{
	struct log_ctx *c = ctx;
	json_t *r;
	enum core_status st;
	const char *parent;
	if (!c->shape)
		return cli_write_json(row, c->e);
	if (!(r = json_deep_copy(row)))
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	store_shape(r, store_now_ns(c->s), c->o->hb_timeout_ms);
	/* a detached run's row names the worker that held its lease */
	const json_t *w = json_object_get(json_object_get(row, STORE_INFO_KEY), "worker");
	if (w)
		json_object_set_new(r, "worker", json_deep_copy(w));
	/* a sub-session's row names the delegation that made it */
	const json_t *d = json_object_get(json_object_get(row, STORE_INFO_KEY), "delegation");
	if (c->depth && d)
		json_object_set_new(r, "delegation", json_deep_copy(d));
	if (c->depth)
		json_object_set_new(r, "depth", json_integer(c->depth));
	/* the turn's token counts (a detached run's: all its turns) */
	const json_t *u = json_object_get(json_object_get(row, STORE_INFO_KEY), "usage");
	if (json_is_object(u))
		json_object_set_new(r, "usage", json_deep_copy(u));
	parent = json_string_value(json_object_get(r, "parentId"));
	if (parent && *parent) {
		int seen = strset_add(&c->parents, parent);
		if (seen < 0) {
			json_decref(r);
			return core_fail(c->e, CORE_ENOMEM, "out of memory");
		}
		if (seen)
			json_object_set_new(r, "fork", json_true());
	}
	st = cli_write_json(r, c->e);
	json_decref(r);
	return st;
}

static enum core_status session_rows(struct store *s, const struct opts *o,
                                     const char *sid, int shape, unsigned flags)
{
	struct core_err e = { 0 };
	struct log_ctx c = { .s = s, .o = o, .e = &e, .shape = shape };
	enum core_status st = store_session_rows(s, sid, flags, print_log_row, &c, &e);
	strset_release(&c.parents);
	return st == CORE_OK ? st : cli_report(&e);
}

/* log's visit: the session's rows, metadata only, with their depth. */
static enum core_status log_visit(struct snap *c, const char *sid, int depth, void *ctx)
{
	struct core_err e = { 0 };
	struct log_ctx lc = { .s = c->s, .o = &c->o, .e = &e, .shape = 1, .depth = depth };
	enum core_status st = store_session_rows(c->s, sid, STORE_METADATA_ONLY, print_log_row,
	                                         &lc, &e);
	(void)ctx;
	strset_release(&lc.parents);
	return st == CORE_OK ? st : cli_report(&e);
}

static enum core_status run_log(void *ctx, int argc, char **argv)
{
	return tree_walk(ctx, argv[0], log_visit, NULL);
}

static enum core_status collect(const struct store_session_info *si, void *ctx)
{
	return json_array_append_new(ctx, json_string(si->session_id)) ? CORE_ENOMEM : CORE_OK;
}

static enum core_status run_export(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	struct store *s = c->s;
	const struct opts *o = &c->o;
	enum core_status rc = CORE_OK, st;
	struct core_err e = { 0 };
	json_t *all = NULL;
	size_t i, count;
	if (argc == 0) {
		all = json_array();
		if ((st = store_sessions(s, collect, all, &e)) != CORE_OK) {
			json_decref(all);
			return cli_report(&e);
		}
	}
	count = all ? json_array_size(all) : (size_t)argc;
	for (i = 0; i < count; i++) {
		const char *sid = all ? json_string_value(json_array_get(all, i)) : argv[i];
		st = session_rows(s, o, sid, 0, o->flags);
		rc = worse(rc, st);
		if (st != CORE_OK && st != CORE_ENOTFOUND)
			break;
	}
	json_decref(all);
	return rc;
}

/* ---- import ---- */

/*
 * Import is all-or-nothing with memory bounded by one row: a first pass
 * checks every line (copying a pipe to a private unnamed file as it goes),
 * then a second pass re-reads the file and feeds the rows one at a time
 * into one write transaction (store_put_stream()).  Each line is parsed
 * twice, but only the second pass holds the store's write lock, and it
 * reads a file, never a slow producer.
 */
struct import_src {
	int fd;
	off_t start;            /* where the rows begin in fd */
	const char *name;       /* for messages */
	struct core_lines r;
	int reading;            /* r is initialized */
};

/* One NDJSON line as a row the store accepts, or CORE_EINVAL naming it. */
static enum core_status import_parse(const struct core_lines *r, const char *line,
                                     size_t len, json_t **row, struct core_err *e)
{
	char why[sizeof e->msg];
	if (!(*row = jv_parse(line, len, r->name, r->lineno, e)))
		return e->st;
	if (store_check_row(*row, e) == CORE_OK)
		return CORE_OK;
	json_decref(*row);
	*row = NULL;
	memcpy(why, e->msg, sizeof why);
	return core_fail(e, CORE_EINVAL, "%s (at %s:%zu)", why, r->name, r->lineno);
}

static enum core_status import_rewind(void *ctx, struct core_err *e)
{
	struct import_src *c = ctx;
	if (c->reading)
		core_lines_release(&c->r);
	c->reading = 0;
	if (lseek(c->fd, c->start, SEEK_SET) < 0)
		return core_fail_sys(e, "import: cannot rewind %s", c->name);
	core_lines_init(&c->r, c->fd, c->name, CORE_LINES_DEFAULT_MAX);
	c->reading = 1;
	return CORE_OK;
}

static enum core_status import_next(void *ctx, json_t **row, struct core_err *e)
{
	struct import_src *c = ctx;
	enum core_status st;
	char *line;
	size_t len;
	*row = NULL;
	if ((st = core_lines_next(&c->r, &line, &len, e)) != CORE_OK || !line)
		return st;
	return import_parse(&c->r, line, len, row, e);
}

/* A private unnamed file in dir (the store's: the same filesystem, no
 * name for others to see), else in $TMPDIR. */
static int spool_file(const char *dir)
{
	FILE *f;
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || !(f = tmpfile()))
		return fd;
	fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 0);
	fclose(f);
	return fd;
}

static enum core_status spool_write(int fd, struct core_buf *b, struct core_err *e)
{
	size_t off = 0;
	while (off < b->len) {
		ssize_t n = write(fd, b->p + off, b->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return core_fail_sys(e, "import: cannot write the spool file");
		off += (size_t)n;
	}
	b->len = 0;
	return CORE_OK;
}

/* The first pass: check every line of in, count the rows, and copy them
 * to spool (when not -1). */
static enum core_status import_check(int in, const char *name, int spool, size_t *n,
                                     struct core_err *e)
{
	struct core_lines r;
	struct core_buf out = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st;
	char *line;
	size_t len;
	json_t *row;
	*n = 0;
	core_lines_init(&r, in, name, CORE_LINES_DEFAULT_MAX);
	while ((st = core_lines_next(&r, &line, &len, e)) == CORE_OK && line &&
	       (st = import_parse(&r, line, len, &row, e)) == CORE_OK) {
		json_decref(row);
		(*n)++;
		if (spool < 0)
			continue;
		if (core_buf_add(&out, line, len) != CORE_OK || core_buf_addc(&out, '\n') != CORE_OK) {
			st = core_fail(e, CORE_ENOMEM, "import: out of memory");
			break;
		}
		if (out.len >= ((size_t)1 << 20) && (st = spool_write(spool, &out, e)) != CORE_OK)
			break;
	}
	if (st == CORE_OK && spool >= 0)
		st = spool_write(spool, &out, e);
	core_lines_release(&r);
	core_buf_release(&out);
	return st;
}

static enum core_status import_rows(struct store *s, const char *dir, int in,
                                    const char *name)
{
	struct import_src c = { .fd = in, .name = name };
	struct store_rows src = { import_next, import_rewind, &c };
	struct core_err e = { 0 };
	struct stat sb;
	enum core_status st;
	size_t n = 0;
	json_t *out;
	int spool = -1;
	if (fstat(in, &sb) < 0 || !S_ISREG(sb.st_mode) || (c.start = lseek(in, 0, SEEK_CUR)) < 0) {
		if ((spool = spool_file(dir)) < 0) {
			core_fail_sys(&e, "import: cannot make a spool file");
			return cli_report(&e);
		}
		c.fd = spool;
		c.start = 0;
	}
	st = import_check(in, name, spool, &n, &e);
	if (st == CORE_OK && n)
		st = store_put_stream(s, &src, &n, &e);
	if (c.reading)
		core_lines_release(&c.r);
	if (spool >= 0)
		close(spool);
	if (st == CORE_OK) {
		out = json_pack("{s:I}", "imported", (json_int_t)n);
		st = cli_write_json(out, &e);
		json_decref(out);
	}
	return st == CORE_OK ? st : cli_report(&e);
}

/* import [FILE]: the one subcommand that creates the store.  A FILE that
 * does not exist is not found (4), and no store is created for it. */
static enum core_status run_import(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	const struct opts *o = &c->o;
	const char *file = argc ? argv[0] : "-";
	struct core_buf dir = CORE_BUF_INIT(4096);
	struct core_err e = { 0 };
	struct store *s = NULL;
	enum core_status st;
	int in = 0;
	if (strcmp(file, "-") && (in = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
		int err = errno;
		core_fail_sys(&e, "import: cannot open '%s'", file);
		if (err == ENOENT)
			e.st = CORE_ENOTFOUND;
		return cli_report(&e);
	}
	if ((st = store_default_path(o->store, &dir, &e)) != CORE_OK ||
	    (st = store_open(dir.p, &s, &e)) != CORE_OK)
		st = st == CORE_EUSAGE ? cli_usage("%s", e.msg) : cli_report(&e);
	else
		st = import_rows(s, dir.p, in, in ? file : "<stdin>");
	store_close(s);
	core_buf_release(&dir);
	if (in)
		close(in);
	return st;
}

/* ---- rm, prune ---- */

/* rm and prune take the deleted rows' worker logs with them. */
static enum core_status run_rm(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	struct store *s = c->s;
	const char *dir = c->dir.p;
	enum core_status rc = CORE_OK, st;
	int i;
	for (i = 0; i < argc; i++) {
		struct core_err e = { 0 };
		size_t deleted = 0;
		st = store_delete_session(s, argv[i], &deleted, detach_log_remove,
		                          (void *)dir, &e);
		if (st == CORE_OK) {
			json_t *out = json_pack("{s:s,s:I}", "sessionId", argv[i],
			                        "deleted", (json_int_t)deleted);
			st = cli_write_json(out, &e);
			json_decref(out);
		}
		if (st != CORE_OK) {
			cli_report(&e);
			rc = worse(rc, st);
			if (st != CORE_ENOTFOUND)
				break;
		}
	}
	return rc;
}

static enum core_status run_prune(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	const struct opts *o = &c->o;
	struct core_err e = { 0 };
	size_t deleted = 0;
	enum core_status st;
	json_t *out;
	if (!o->have_keep && !o->have_before)
		return cli_usage("prune needs --keep N, --before TIME or both");
	st = store_prune(c->s, argc ? argv[0] : NULL, o->have_keep ? o->keep : 0,
	                 o->have_before ? o->before_ns : 0, &deleted, detach_log_remove,
	                 (void *)c->dir.p, &e);
	if (st != CORE_OK)
		return cli_report(&e);
	out = json_pack("{s:I}", "deleted", (json_int_t)deleted);
	st = cli_write_json(out, &e);
	json_decref(out);
	return st == CORE_OK ? st : cli_report(&e);
}

/* ---- IDs, times, worker-log ---- */

static enum core_status check_ids(char **ids, int n, const char *what)
{
	struct core_err e = { 0 };
	int i;
	for (i = 0; i < n; i++)
		if (store_check_id(ids[i], what, &e) != CORE_OK)
			return cli_usage("%s", e.msg);
	return CORE_OK;
}

static enum core_status parse_time(const char *flag, const char *arg, int64_t *ns)
{
	int64_t ms;
	struct core_err e = { 0 };
	if (core_time_parse(arg, ns) == CORE_OK)
		return CORE_OK;
	if (core_parse_duration(arg, &ms, &e) == CORE_OK) {
		*ns = core_now_ns() - ms * 1000000;
		return CORE_OK;
	}
	return cli_usage("invalid %s '%s' (an RFC 3339 time or a duration)", flag, arg);
}

/* One line of a worker's log as its stderr file has it: "TIME TEXT". */
static enum core_status print_log_line(int64_t at_ns, const char *text, void *ctx)
{
	struct core_buf *b = ctx;
	char at[CORE_TIME_MAX];
	struct core_err e = { 0 };
	core_time_format(at_ns, at);
	core_buf_reset(b);
	if (core_buf_addf(b, "%s %s\n", at, text))
		return core_fail(&e, CORE_ENOMEM, "worker-log: out of memory"), cli_report(&e);
	return cli_write(b->p, b->len, &e) ? cli_report(&e) : CORE_OK;
}

/* The detached worker's log for snapshot id, read from the store: any
 * host's worker, from any host. */
static enum core_status run_worker_log(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	struct core_buf line = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_err e = { 0 };
	enum core_status st = store_log_lines(c->s, argv[0], print_log_line, &line, &e);
	if (st == CORE_ENOTFOUND)
		cli_warn("%s (only detached runs have one)", e.msg);
	else if (st != CORE_OK && e.st)         /* (print_log_line() reports its own) */
		st = cli_report(&e);
	core_buf_release(&line);
	return st;
}

/* ---- migrate ---- */

/* The migration as a person reads it: the versions, then each step and
 * its statements, one per line. */
static enum core_status migrate_text(const struct store_migration *m, int dry_run,
                                     struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	size_t n = json_array_size(m->steps), i, j;
	const json_t *step, *stmt;
	enum core_status st;
	json_array_foreach(m->steps, i, step) {
		core_buf_addf(&b, "step %lld%s:\n",
		              (long long)json_integer_value(json_object_get(step, "version")),
		              dry_run ? " (pending)" : " applied");
		json_array_foreach(json_object_get(step, "statements"), j, stmt)
			core_buf_addf(&b, "  %s\n", json_string_value(stmt));
	}
	if (m->version == m->latest)
		core_buf_addf(&b, "%s store at version %ld, this agentkit's: %s\n", m->backend,
		              m->version, n ? "up to date" : "nothing to migrate");
	else
		core_buf_addf(&b, "%s store at version %ld, this agentkit's is %ld: %zu step%s "
		              "pending (run 'agent-snap migrate')\n", m->backend, m->version,
		              m->latest, n, n == 1 ? "" : "s");
	st = b.p ? cli_write(b.p, b.len, e) : core_fail(e, CORE_ENOMEM, "out of memory");
	core_buf_release(&b);
	return st;
}

/* migrate [--dry-run]: the store opened as it is, then its steps shown or
 * applied.  Neither form creates an LMDB store; the dry run writes
 * nothing anywhere. */
static enum core_status run_migrate(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	const struct opts *o = &c->o;
	struct store_migration m = { 0 };
	struct core_err e = { 0 };
	unsigned flags = STORE_OPEN_EXISTING | STORE_OPEN_AS_IS |
	                 (o->dry_run ? STORE_OPEN_READONLY : 0);
	enum core_status st;
	json_t *out;
	if ((st = store_open_default(o->store, flags, &c->s, &e)) != CORE_OK)
		return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : cli_report(&e);
	if ((st = store_migrate(c->s, o->dry_run ? STORE_MIGRATE_DRY_RUN : 0, &m, &e)) == CORE_OK) {
		if (o->text) {
			st = migrate_text(&m, o->dry_run, &e);
		} else if (!(out = json_pack("{s:s,s:I,s:I,s:O}", "backend", m.backend,
		                             "version", (json_int_t)m.version, "latest",
		                             (json_int_t)m.latest, o->dry_run ? "pending" :
		                             "applied", m.steps))) {
			st = core_fail(&e, CORE_ENOMEM, "out of memory");
		} else {
			st = cli_write_json(out, &e);
			json_decref(out);
		}
	}
	json_decref(m.steps);
	return st == CORE_OK ? st : cli_report(&e);
}

/* ---- dispatch ---- */

/* What a handler needs opened (its row's SNAP_* flags).  The store is
 * never created to read it (only import creates one); rm and prune
 * change it. */
static enum core_status snap_open(struct snap *c, unsigned how)
{
	struct core_err e = { 0 };
	enum core_status st = CORE_OK;
	unsigned flags = STORE_OPEN_EXISTING | (how & SNAP_WRITE ? 0 : STORE_OPEN_READONLY);
	if ((how & SNAP_AGENT) && c->o.agent)
		st = agent_ext_snap_open(c->o.agent, c->o.agents_dir, &c->o.x, &e);
	if (st == CORE_OK && !(how & SNAP_NO_STORE))
		st = store_open_default(c->o.store, flags, &c->s, &e);
	if (st == CORE_OK && (how & SNAP_WRITE))
		st = store_default_path(c->o.store, &c->dir, &e);
	if (st == CORE_OK)
		return st;
	return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : cli_report(&e);
}

/* get ID..., and the plain form: IDs, or --session SID alone. */
static enum core_status run_get(void *ctx, int argc, char **argv)
{
	struct snap *c = ctx;
	return argc ? show_ids(c->s, &c->o, argv, argc) : show_latest(c->s, &c->o);
}

/*
 * --url: the plain form and get through the server's getSnapshot
 * (remote.h), printed as the server shaped them; the rest is the store's.
 */
static enum core_status run_remote(struct snap *c, const struct cli_sub *sub, int argc,
                                   char **argv)
{
	const struct opts *o = &c->o;
	const char *const *hv = (const char *const *)o->headers;
	enum core_status rc = CORE_OK, st;
	int meta = !!(o->flags & STORE_METADATA_ONLY);
	if (sub && strcmp(sub->name, "get"))
		return cli_usage("%s reads the store: with --url only rows by ID or --session "
		                 "are read, through the server's getSnapshot", sub->name);
	if (o->store || o->agent)
		return cli_usage("--url reads the server's rows, shaped by the server: not with "
		                 "--%s", o->store ? "store" : "agent");
	for (int i = 0; i < (argc ? argc : 1); i++) {
		struct core_err e = { 0 };
		json_t *row = NULL;
		const char *sid;
		st = remote_get_snapshot(o->url, hv, argc ? argv[i] : NULL, o->session, meta, NULL,
		                         NULL, &row, &e);
		if (st == CORE_OK && argc && o->session && (sid = json_string_value(
		        json_object_get(row, "sessionId"))) && strcmp(sid, o->session))
			st = core_fail(&e, CORE_EINVAL, "snapshot '%s' does not belong to session '%s' "
			               "(snapshot's session: '%s')", argv[i], o->session, sid);
		if (st == CORE_OK)
			st = cli_write_json(row, &e);
		json_decref(row);
		if (st != CORE_OK) {
			cli_report(&e);
			rc = worse(rc, st);
			if (st != CORE_ENOTFOUND && st != CORE_EINVAL)
				break;
		}
	}
	return rc;
}

/* The subcommand named by the first operand, else the plain form. */
static enum core_status run(struct snap *c, int argc, char **argv)
{
	const struct cli_sub *sub;
	enum core_status st;
	enum cli_kind kind;
	if ((st = cli_sub_find(&argc, &argv, &sub)) != CORE_OK)
		return st;
	if (!sub && !c->o.session && argc == 0)
		return cli_usage("expected snapshot IDs, --session SID or a subcommand");
	if ((st = cli_sub_check(sub, argc)) != CORE_OK)
		return st;
	if (c->o.session && (st = check_ids((char **)&c->o.session, 1, "session ID")))
		return st;
	kind = sub ? sub->kind : CLI_SNAPSHOT;
	if (kind != CLI_FILE &&
	    (st = check_ids(argv, argc, kind == CLI_SESSION ? "session ID" : "snapshot ID")))
		return st;
	if (c->o.url)
		return run_remote(c, sub, argc, argv);
	if ((st = snap_open(c, sub ? sub->flags : SNAP_AGENT)) == CORE_OK)
		st = sub ? sub->run(c, argc, argv) : run_get(c, argc, argv);
	store_close(c->s);
	agent_ext_free(c->o.x);
	core_buf_release(&c->dir);
	return st;
}

int main(int argc, char **argv)
{
	struct snap snap = { .dir = CORE_BUF_INIT(4096) };
	static struct opts o;   /* static: its --header vector stays reachable on every exit */
	struct core_err e = { 0 };
	const char *arg, *hb = NULL, *format = NULL;
	int c;

	cli_start(&prog);
	/* -a runs state transforms: before that child, keys and the store password
	 * out of its reach. */
	cli_protect_secrets();
	while ((c = cli_next(argc, argv, &arg)) != -1) {
		switch (c) {
		case OPT_STORE: o.store = arg; break;
		case OPT_SESSION: o.session = arg; break;
		case OPT_METADATA: o.flags |= STORE_METADATA_ONLY; break;
		case OPT_KEEP: {
			char *end;
			unsigned long long k = strtoull(arg, &end, 10);
			if (!*arg || *end || *arg == '-' || k == 0)
				return cli_finish(cli_usage("invalid --keep '%s' (a count of 1 or more)", arg));
			o.keep = (size_t)k;
			o.have_keep = 1;
			break;
		}
		case OPT_BEFORE:
			if (parse_time("--before", arg, &o.before_ns) != CORE_OK)
				return cli_finish(CORE_EUSAGE);
			o.have_before = 1;
			break;
		case OPT_HB_TIMEOUT: hb = arg; break;
		case OPT_SINCE:
			if (parse_time("--since", arg, &o.since_ns) != CORE_OK)
				return cli_finish(CORE_EUSAGE);
			break;
		case OPT_FORMAT: format = arg; break;
		case OPT_AGENT: o.agent = arg; break;
		case OPT_AGENTS: o.agents_dir = arg; break;
		case OPT_DRY_RUN: o.dry_run = 1; break;
		case OPT_QUEUE: o.queue = arg; break;
		case OPT_LIMIT: {
			int64_t n;
			if (cli_count("--limit", arg, LONG_MAX, &n) != CORE_OK)
				return cli_finish(CORE_EUSAGE);
			o.limit = (size_t)n;
			break;
		}
		case OPT_STATUS:
			if (strcmp(arg, "queued") && strcmp(arg, "running") && strcmp(arg, "aborting") &&
			    strcmp(arg, "expired"))
				return cli_finish(cli_usage("--status must be queued, running, aborting "
				                            "or expired, not '%s'", arg));
			o.status = arg;
			break;
		case OPT_URL: o.url = arg; break;
		case OPT_HEADER: {
			enum core_status hs = cli_push_header(&o.headers, &o.nheaders, arg);
			if (hs != CORE_OK)
				return cli_finish(hs);
			break;
		}
		}
	}
	if (format && strcmp(format, "text") && strcmp(format, "ndjson") && strcmp(format, "json"))
		return cli_finish(cli_usage("--format must be text, ndjson or json, not '%s'",
		                            format));
	o.text = format ? !strcmp(format, "text") : isatty(1);
	o.json = format && !strcmp(format, "json");
	if (store_heartbeat_timeout(hb, &o.hb_timeout_ms, &e) != CORE_OK)
		return cli_finish(cli_usage("%s", e.msg));
	snap.o = o;
	enum core_status st = run(&snap, argc - optind, argv + optind);
	free(snap.o.headers);
	return cli_finish(st);
}
