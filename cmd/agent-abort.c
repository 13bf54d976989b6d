/* agent-abort.c - abort detached runs: flip pending rows to aborting (the
 * worker then finalizes them aborted), optionally wait for that. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../libcore/agent/remote.h"
#include "../libcore/base/json.h"
#include "../libcore/base/util.h"
#include "../store/store.h"

enum {
	OPT_STORE = 's',
	OPT_WAIT = 'w',
	OPT_TIMEOUT = 't',
	OPT_METADATA = 'm',
	OPT_HB_TIMEOUT = CLI_LONG + 1,
	OPT_URL,
	OPT_HEADER,
};

static const struct cli_opt opts[] = {
	{ OPT_STORE, "store", "PATH",
	  "the store directory (default $AGENTKIT_STORE, else "
	  "${XDG_STATE_HOME:-$HOME/.local/state}/agentkit/store)" },
	{ OPT_WAIT, "wait", NULL,
	  "then wait until every row is finalized; \"status\" is the final one" },
	{ OPT_TIMEOUT, "timeout", "DURATION", "with --wait: give up after DURATION (exit 124)" },
	{ OPT_METADATA, "metadata-only", NULL,
	  "taken as agent-wait and agent-snap take it; agent-abort's lines never carry a state, "
	  "so it changes nothing" },
	{ OPT_HB_TIMEOUT, "heartbeat-timeout", "DURATION",
	  "with --wait: a row whose heartbeat is older reads \"expired\" "
	  "(default $AGENTKIT_HEARTBEAT_TIMEOUT, else 60s)" },
	{ OPT_URL, "url", "URL",
	  "abort through the abort route of the agent a server serves at URL (agent-serve, "
	  "a Genkit app; docs/serve.md; NAME/AGENT: a genkit endpoint of the models file); "
	  "the lines are {\"snapshotId\", \"status\"}" },
	{ OPT_HEADER, "header", "'NAME: VALUE'", "with --url: send this header (repeatable)" },
	{ 0 }
};

static const struct cli_exitcode exits[] = {
	{ 0, "every row was found: aborted, or already settled" },
	{ 4, "a snapshot was not found (the others are still aborted), or there is no store" },
	{ 100, "usage error" },
	{ 111, "system failure (cannot open the store, cannot write output)" },
	{ 124, "--wait --timeout ran out" },
	{ -1, NULL }
};

static const struct cli_prog prog = {
	.name = "agent-abort",
	.purpose = "abort detached agentkit runs",
	.synopsis = "[OPTION]... ID...",
	.description =
	"Asks the detached runs behind snapshot IDs to stop, as Genkit's Abort "
	"does: a \"pending\" row becomes \"aborting\" (updatedAt set to now, "
	"heartbeatAt untouched) in one atomic read-modify-write, and its worker, "
	"woken at once, cancels its work and finalizes the row \"aborted\" with "
	"the state of its last finished turn.  A row that is already aborting "
	"or settled (completed, failed, aborted) is left as it is.  For each ID "
	"one line {\"snapshotId\", \"previousStatus\", \"status\"} is printed: "
	"the status before and after the call (an empty status reads "
	"\"completed\").  A queued run no agent-worker has claimed yet "
	"(agent-run --queue) is settled \"aborted\" at once: nobody else would "
	"finalize it.  A missing ID is reported on stderr; the exit status "
	"is then 4.\n\n"
	"With --wait the lines are printed once every row is terminal (as "
	"agent-wait decides: \"aborting\" is not, an expired heartbeat is), and "
	"\"status\" is the final status, e.g. \"aborted\", or \"completed\" if "
	"the run finished before it saw the abort.  If the worker is dead the "
	"row reads \"expired\" once its last heartbeat is older than the "
	"heartbeat timeout.",
	.opts = opts,
	.examples =
	"$ agent-abort 7f1c...\n"
	"  {\"snapshotId\":\"7f1c...\",\"previousStatus\":\"pending\",\"status\":\"aborting\"}\n"
	"$ agent-abort --wait --timeout 30s \"$id\"\n"
	"  abort and wait for the worker to finalize the row",
	.exits = exits,
	.operands = CLI_SNAPSHOT,
};

struct abort_ctx {
	const struct store *s;  /* whose clock times the flip */
	char previous[64];
	int found;
	int settled;            /* a queued run nobody claimed: aborted at once */
};

static const char *status_of(const json_t *row)
{
	const json_t *s = json_object_get(row, "status");
	const char *v = jv_is_string(s) ? json_string_value(s) : "";
	return *v ? v : "completed";
}

/* Genkit's abortPendingSnapshot: only a pending row changes. */
static enum core_status flip(const json_t *existing, json_t **next, void *ctx,
                             struct core_err *e)
{
	struct abort_ctx *c = ctx;
	char now[CORE_TIME_MAX];
	*next = NULL;
	if (!existing)
		return CORE_OK;
	c->found = 1;
	snprintf(c->previous, sizeof c->previous, "%s", status_of(existing));
	if (strcmp(c->previous, "pending"))
		return CORE_OK;
	if (!(*next = json_deep_copy(existing)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	core_time_format(store_now_ns(c->s), now);
	json_object_set_new(*next, "updatedAt", json_string(now));
	const json_t *q = store_queue_of(existing);
	if (q && json_integer_value(json_object_get(q, "attempt")) == 0) {
		/* no worker holds it: nobody else would finalize it (docs/queue.md) */
		c->settled = 1;
		return store_queue_settle(*next, "aborted", "aborted", NULL, store_now_ns(c->s), e);
	}
	json_object_set_new(*next, "status", json_string("aborting"));
	return CORE_OK;
}

static enum core_status print_result(const char *id, const char *previous,
                                     const char *status, struct core_err *e)
{
	json_t *line = json_pack("{s:s,s:s,s:s}", "snapshotId", id,
	                         "previousStatus", previous, "status", status);
	enum core_status st = line ? cli_write_json(line, e)
	                           : core_fail(e, CORE_ENOMEM, "out of memory");
	json_decref(line);
	return st;
}

struct opts {
	const char *store;
	int wait;
	int64_t timeout_ms, hb_timeout_ms;
	const char *url;
	const char **headers;
	size_t nheaders;
};

/* --url: POST URL/abort {"snapshotId"} for each, then (--wait) the
 * companions' wait (remote.h). */
static enum core_status abort_remote(const struct opts *o, int argc, char **argv)
{
	char url[4096];
	enum core_status st = CORE_OK, worst = CORE_OK;
	int64_t deadline = o->timeout_ms >= 0 ? core_now_mono_ms() + o->timeout_ms : -1;
	snprintf(url, sizeof url, "%s/abort", o->url);
	for (int i = 0; i < argc && !st; i++) {
		struct core_err e = { 0 };
		json_t *data = json_pack("{s:s}", "snapshotId", argv[i]), *res = NULL, *row = NULL;
		enum core_status one = data ? remote_call(url, o->headers, data, NULL, NULL, &res,
		                                          NULL, &e)
		                            : core_fail(&e, CORE_ENOMEM, "out of memory");
		if (!one && o->wait) {
			struct remote_wait_req w = { o->url, o->headers, argv[i], 1, deadline, NULL,
			                             NULL, NULL };
			if (!(one = remote_wait(&w, &row, &e)))
				json_object_set(res, "status", json_object_get(row, "status"));
		}
		if (!one) {
			json_t *line = json_pack("{s:s,s:O?}", "snapshotId", argv[i], "status",
			                         json_object_get(res, "status"));
			st = line ? cli_write_json(line, &e) : core_fail(&e, CORE_ENOMEM, "out of memory");
			json_decref(line);
			if (st)
				cli_report(&e);
		} else if (one == CORE_ENOTFOUND || one == CORE_ETIMEOUT) {
			if (one == CORE_ENOTFOUND)
				cli_warn("snapshot '%s' not found", argv[i]);
			else
				cli_report(&e);
			if (core_exit_code(one) > core_exit_code(worst))
				worst = one;
		} else {
			st = cli_report(&e);
		}
		json_decref(data);
		json_decref(res);
		json_decref(row);
	}
	return st ? st : worst;
}

static enum core_status run(const struct opts *o, int argc, char **argv)
{
	struct core_err e = { 0 };
	struct store *s = NULL;
	struct abort_ctx *res = NULL;
	const char **ids = NULL;
	json_t **rows = NULL;
	enum core_status st = CORE_OK, worst = CORE_OK;
	size_t i, n = (size_t)argc, found = 0;

	if (!argc)
		return cli_usage("expected snapshot IDs");
	for (i = 0; i < n; i++)
		if (store_check_id(argv[i], "snapshot ID", &e) != CORE_OK)
			return cli_usage("%s", e.msg);
	if (o->url)
		return abort_remote(o, argc, argv);
	if ((st = store_open_default(o->store, STORE_OPEN_EXISTING, &s, &e)) != CORE_OK) {
		return st == CORE_EUSAGE ? cli_usage("%s", e.msg) : cli_report(&e);
	}
	res = calloc(n, sizeof *res);
	ids = calloc(n, sizeof *ids);
	rows = calloc(n, sizeof *rows);
	if (!res || !ids || !rows) {
		st = core_fail(&e, CORE_ENOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; i < n; i++) {
		res[i].s = s;
		if ((st = store_save(s, argv[i], STORE_METADATA_ONLY, flip, &res[i], NULL,
		                     &e)) != CORE_OK)
			goto fail;
		if (!res[i].found) {
			cli_warn("snapshot '%s' not found", argv[i]);
			worst = CORE_ENOTFOUND;
			continue;
		}
		if (!o->wait) {
			const char *now = strcmp(res[i].previous, "pending") ? res[i].previous
			                  : res[i].settled ? "aborted" : "aborting";
			if ((st = print_result(argv[i], res[i].previous, now, &e)) != CORE_OK)
				goto fail;
		}
		ids[found++] = argv[i];
	}
	if (o->wait && found) {
		size_t k = 0;
		st = store_wait_terminal(s, ids, found, STORE_METADATA_ONLY, o->hb_timeout_ms,
		                         o->timeout_ms >= 0 ? core_now_mono_ms() + o->timeout_ms
		                                            : -1,
		                         2000, rows, NULL, NULL, &e);
		if (st == CORE_ETIMEOUT) {
			core_fail(&e, CORE_ETIMEOUT, "timed out after %lldms waiting for the "
			          "rows to be finalized", (long long)o->timeout_ms);
			worst = CORE_ETIMEOUT;
		} else if (st != CORE_OK) {
			goto fail;
		}
		for (i = 0; i < n && k < found; i++) {
			const char *final;
			if (!res[i].found)
				continue;
			final = rows[k] ? status_of(rows[k]) : NULL;
			if (!final && worst != CORE_ETIMEOUT) {
				cli_warn("snapshot '%s' not found", ids[k]);
				worst = CORE_ENOTFOUND;
			} else if (final && (st = print_result(ids[k], res[i].previous, final,
			                                       &e)) != CORE_OK) {
				goto fail;
			}
			k++;
		}
		if (worst == CORE_ETIMEOUT)
			cli_report(&e);
	}
	st = worst;
	goto out;
fail:
	cli_report(&e);
out:
	if (rows)
		for (i = 0; i < found; i++)
			json_decref(rows[i]);
	free(rows);
	free(ids);
	free(res);
	store_close(s);
	return st;
}

int main(int argc, char **argv)
{
	struct opts o = { NULL, 0, -1, 0, NULL, NULL, 0 };
	struct core_err e = { 0 };
	const char *arg, *hb = NULL;
	int c;

	cli_start(&prog);
	/* A store password (PGPASSWORD, one in AGENTKIT_STORE) out of /proc/PID/environ. */
	cli_protect_secrets();
	while ((c = cli_next(argc, argv, &arg)) != -1) {
		switch (c) {
		case OPT_STORE: o.store = arg; break;
		case OPT_WAIT: o.wait = 1; break;
		case OPT_TIMEOUT:
			if (core_parse_duration(arg, &o.timeout_ms, &e) != CORE_OK)
				return cli_finish(cli_usage("--timeout: %s", e.msg));
			break;
		case OPT_HB_TIMEOUT: hb = arg; break;
		case OPT_METADATA: break;       /* its lines hold no state (above) */
		case OPT_URL: o.url = arg; break;
		case OPT_HEADER: {
			enum core_status hs = cli_push_header(&o.headers, &o.nheaders, arg);
			if (hs != CORE_OK)
				return cli_finish(hs);
			break;
		}
		}
	}
	if (o.timeout_ms >= 0 && !o.wait)
		return cli_finish(cli_usage("--timeout needs --wait"));
	if (store_heartbeat_timeout(hb, &o.hb_timeout_ms, &e) != CORE_OK)
		return cli_finish(cli_usage("%s", e.msg));
	return cli_finish(run(&o, argc - optind, argv + optind));
}
