/* agent-worker.c - drain queues of runs from the store: claim a queued run,
 * run it in an agent-run child as its detached worker, loop (docs/queue.md).
 *
 * The claim is the store's (store_claim(): SKIP LOCKED on PostgreSQL, the
 * one write transaction on LMDB); this file holds the slots of the runs in
 * flight, each an agent-run --claimed child waited for by a thread of its
 * own (libcore/base/run.c), the wait for work on the store's signal, the
 * hand-back of a run whose child died, and the drain on SIGTERM. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "../libcore/agent/detach.h"
#include "../libcore/base/json.h"
#include "../libcore/base/run.h"
#include "../libcore/base/spawn.h"
#include "../libcore/base/util.h"
#include "../store/store.h"

enum {
	OPT_QUEUE = 'q', OPT_CONCURRENCY = 'c', OPT_STORE = 's',
	OPT_ONCE = CLI_LONG + 1, OPT_MAX_RUNS, OPT_IDLE_EXIT, OPT_DRAIN_TIMEOUT, OPT_AGENT_RUN,
	OPT_MAX_ATTEMPTS,
};

static const struct cli_opt opts[] = {
	{ OPT_QUEUE, "queue", "NAME", "take runs queued on NAME (repeatable; default: the queue "
	  "named default)" },
	{ OPT_CONCURRENCY, "concurrency", "N", "run at most N runs at once (default 1)" },
	{ OPT_STORE, "store", "PATH|URL", "the store (default $AGENTKIT_STORE, else "
	  "${XDG_STATE_HOME:-$HOME/.local/state}/agentkit/store)" },
	{ OPT_MAX_ATTEMPTS, "max-attempts", "N", "give up (failed) on a run after N claims whose "
	  "worker was lost, unless the run sets its own (agent-run --max-attempts, front "
	  "matter maxAttempts); default 3" },
	{ OPT_ONCE, "once", NULL, "take the runs that are ready now, wait for them, and exit" },
	{ OPT_MAX_RUNS, "max-runs", "N", "exit once N runs have ended" },
	{ OPT_IDLE_EXIT, "idle-exit", "DURATION", "exit after DURATION with no run in flight "
	  "and none ready" },
	{ OPT_DRAIN_TIMEOUT, "drain-timeout", "DURATION", "on SIGTERM or SIGINT, let the runs in "
	  "flight finish for this long, then hand them back to the queue (default 30s)" },
	{ OPT_AGENT_RUN, "agent-run", "PATH", "the agent-run to start for each run (default: "
	  "the one beside agent-worker, else agent-run on PATH)" },
	{ 0 }
};

static const struct cli_exitcode exits[] = {
	{ 0, "stopped as asked: --once, --max-runs, --idle-exit, or a drain after SIGTERM "
	     "or SIGINT" },
	{ 100, "usage error" },
	{ 111, "system failure (cannot open the store, cannot start agent-run)" },
	{ -1, NULL }
};

static const struct cli_prog prog = {
	.name = "agent-worker",
	.purpose = "run the queued runs of an agentkit store, on any host",
	.synopsis = "[OPTION]... [--queue NAME]...",
	.description =
	"Takes runs that agent-run --queue NAME wrote to the store and runs each in an "
	"agent-run child, as a detached run's worker: it heartbeats the run's row, "
	"watches for agent-abort, writes its log to the store (agent-snap worker-log) "
	"and finalizes the row.  Any number of workers on any number of hosts may share "
	"one store: each run is claimed by one of them (FOR UPDATE SKIP LOCKED on "
	"PostgreSQL, one write transaction on LMDB), and the claim is a lease with an "
	"epoch, as a detached run's.\n\n"
	"A run whose worker died (its lease ran out: the heartbeat timeout) is claimed "
	"again by any worker and runs again from the run's parent, its last committed "
	"turn; the claims are counted on the row, with a backoff between them that "
	"doubles from 0.5s.  Past the run's --max-attempts (default 3) the next claim "
	"settles it failed: \"gave up after 3 attempts: worker lost\".  An agent's "
	"concurrency (agent-run --concurrency, front matter concurrency: N) holds across "
	"every worker and queue.  A run queued with --not-before waits until then.\n\n"
	"Waiting for work costs no CPU: agent-worker sleeps on the store's change signal "
	"(the LMDB wake-up, PostgreSQL's LISTEN/NOTIFY) and wakes when the next queued "
	"run is due.  SIGTERM or SIGINT drains: no new claim, the runs in flight finish "
	"within --drain-timeout, and those still running then are handed back to the "
	"queue (not counted as attempts) for another worker; a second signal hands them "
	"back at once.  Each run's start and end is one line on stderr.\n\n"
	"agent-worker passes the store's location to each agent-run on its stdin (never "
	"in argv), and the provider keys in its environment, but not the store's "
	"credentials.  Paths in a run's options (tools, script models, --agents) are "
	"resolved in agent-worker's working directory; agents by name on its agent path.",
	.opts = opts,
	.examples =
	"$ agent-worker --queue triage --concurrency 4 &\n"
	"$ agent-run triage --queue triage --key \"triage-$(date +%F-%H)\" -m 'new issues'\n"
	"  a worker, and a run cron may launch from every host: it runs once\n"
	"$ agent-worker --queue nightly --once\n"
	"  run what is queued now, then exit",
	.exits = exits,
};

/* One run in flight: its agent-run child, waited for by a thread. */
struct slot {
	int used;
	pthread_t thread;
	struct run_child c;
	char **argv;            /* child_argv()'s */
	char id[STORE_ID_MAX + 1];
	json_int_t epoch;
	int64_t t0;
	atomic_int done;        /* the thread is over: join it */
	atomic_int kill;        /* hand it back: SIGKILL the child */
	struct core_buf err;    /* its stderr's first bytes (its log is in the store) */
	json_t *row;            /* the claimed row: argv's strings are its */
};

struct worker {
	const char *const *queues;
	size_t concurrency;
	int once;
	long max_runs;
	int64_t max_attempts;           /* --max-attempts (0: the store's default) */
	int64_t idle_ms, drain_ms;
	const char *agent_run;
	struct core_buf location;       /* the store's, for the children */
	struct store *s;
	struct store *watch;            /* the watcher thread's handle */
	char **env;
	struct slot *slots;
	size_t running;
	long ended;
};

/*
 * The main thread sleeps on one condition, poked by whatever it waits
 * for: a change in the store (the watcher thread, on a handle of its
 * own, sleeping on the store's signal), a child's end (its slot's
 * thread), a stop signal (the signal thread; the others block them).
 * A poke is sticky: one that comes while the main thread is busy is
 * seen by its next wait.
 */
static pthread_mutex_t poke_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t poke_cv;
static int poked;
static atomic_int stops;

static void poke(void)
{
	pthread_mutex_lock(&poke_mu);
	poked = 1;
	pthread_cond_signal(&poke_cv);
	pthread_mutex_unlock(&poke_mu);
}

/* Sleep until poked or ms pass. */
static void nap(int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000)
		ts.tv_sec++, ts.tv_nsec -= 1000000000;
	pthread_mutex_lock(&poke_mu);
	while (!poked && pthread_cond_timedwait(&poke_cv, &poke_mu, &ts) == 0)
		;
	poked = 0;
	pthread_mutex_unlock(&poke_mu);
}

static void *signal_main(void *arg)
{
	sigset_t *set = arg;
	for (;;) {
		int sig;
		if (sigwait(set, &sig) == 0) {
			atomic_fetch_add(&stops, 1);
			poke();
		}
	}
	return NULL;
}

/* The watcher: a poke for every change in the store (status changes,
 * deletions: a run that settled, a run that became claimable by being
 * aborted), on its own handle. */
static void *watch_main(void *arg)
{
	struct store *s = arg;
	uint32_t last = store_change_seq(s);
	for (;;) {
		struct core_err e = { 0 };
		uint32_t now;
		if (store_wait_change(s, last, 60000, &e) == CORE_ESYS) {
			/* the server is away: try again in a second (not nap(),
			 * whose poke is the main thread's) */
			struct timespec second = { 1, 0 };
			nanosleep(&second, NULL);
		}
		if ((now = store_change_seq(s)) != last) {
			last = now;
			poke();
		}
	}
	return NULL;
}

static int cancelled(void *ctx)
{
	struct slot *sl = ctx;
	return atomic_load(&sl->kill);
}

static void *slot_main(void *arg)
{
	struct slot *sl = arg;
	struct run_child *c = &sl->c;
	struct core_err e = { 0 };
	if (run_wait_all(&c, 1, cancelled, sl, &e))
		cli_warn("%s: %s", sl->id, e.msg);
	atomic_store(&sl->done, 1);
	poke();
	return NULL;
}

/* The agent-run beside this program, or NULL. */
static char *beside_me(void)
{
	char self[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 16);
	if (n <= 0)
		return NULL;
	self[n] = 0;
	if (!(slash = strrchr(self, '/')))
		return NULL;
	snprintf(slash + 1, sizeof self - (size_t)(slash + 1 - self), "agent-run");
	return access(self, X_OK) == 0 ? strdup(self) : NULL;
}

/* The children's environment: ours with the provider keys (the agent's
 * model needs them) but never the store's credentials. */
static char **child_env(void)
{
	extern char **environ;
	const char **allow = NULL;
	size_t n = 0;
	char **env;
	for (char **p = environ; *p; p++) {
		const char *eq = strchr(*p, '=');
		if (!eq || !spawn_provider_key(*p) || store_secret_variable(*p))
			continue;
		const char **a = realloc(allow, (n + 2) * sizeof *allow);
		if (!a) {
			free(allow);
			return NULL;
		}
		allow = a;
		if (!(allow[n] = strndup(*p, (size_t)(eq - *p)))) {
			allow[n] = NULL;
			goto out;
		}
		allow[++n] = NULL;
	}
out:
	env = run_env(allow, NULL);
	for (size_t i = 0; i < n; i++)
		free((char *)allow[i]);
	free(allow);
	return env;
}

/* Hand run id back to its queue: its claim by epoch is over (the child
 * died or was stopped).  counted: the attempt stays counted (a lost
 * worker), else it is taken back (a drain). */
struct back_ctx {
	json_int_t epoch;
	int counted;
	int64_t now_ns;
	int done;
};

static enum core_status fn_back(const json_t *existing, json_t **next, void *ctx,
                                struct core_err *e)
{
	struct back_ctx *b = ctx;
	const json_t *info = json_object_get(existing, STORE_INFO_KEY), *q = store_queue_of(existing);
	json_t *n, *i2, *q2;
	*next = NULL;
	if (!q || store_status_terminal(json_string_value(json_object_get(existing, "status"))) ||
	    json_integer_value(json_object_get(info, "epoch")) != b->epoch)
		return CORE_OK;         /* settled, or claimed again meanwhile */
	if (!(n = json_copy((json_t *)existing)) || !(i2 = json_copy((json_t *)info)) ||
	    json_object_set_new(n, STORE_INFO_KEY, i2) || !(q2 = json_copy((json_t *)q)) ||
	    json_object_set_new(i2, "queue", q2) ||
	    json_object_set_new(i2, "epoch", json_integer(b->epoch + 1))) {
		json_decref(n);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	if (b->counted) {
		/* the lease ends now: claimable once the backoff has passed */
		char hb[CORE_TIME_MAX];
		core_time_format(b->now_ns - store_row_hb_timeout(existing, 0) * 1000000, hb);
		json_object_set_new(n, "heartbeatAt", json_string(hb));
	} else {
		json_int_t a = json_integer_value(json_object_get(q, "attempt"));
		json_object_set_new(q2, "attempt", json_integer(a > 0 ? a - 1 : 0));
		json_object_del(n, "heartbeatAt");
		json_object_del(i2, "worker");
	}
	b->done = 1;
	*next = n;
	return CORE_OK;
}

static void hand_back(struct worker *w, struct slot *sl, int counted)
{
	struct back_ctx b = { sl->epoch, counted, store_now_ns(w->s), 0 };
	struct core_err e = { 0 };
	if (store_save(w->s, sl->id, STORE_METADATA_ONLY, fn_back, &b, NULL, &e))
		cli_warn("%s: cannot hand the run back: %s", sl->id, e.msg);
	else if (b.done)
		cli_warn("%s: handed back to its queue%s", sl->id,
		         counted ? " (the attempt counts)" : "");
}

/* What a slot holds besides its child. */
static void slot_release(struct slot *sl)
{
	core_buf_release(&sl->err);
	json_decref(sl->row);
	free(sl->argv);
	sl->row = NULL;
	sl->argv = NULL;
	sl->used = 0;
}

/* Join the slots whose child has ended and say how. */
static void reap(struct worker *w)
{
	for (size_t i = 0; i < w->concurrency; i++) {
		struct slot *sl = &w->slots[i];
		struct core_buf how = CORE_BUF_INIT(256);
		char d[CORE_DURATION_MAX];
		if (!sl->used || !atomic_load(&sl->done))
			continue;
		pthread_join(sl->thread, NULL);
		run_describe_end(&how, sl->c.code, sl->c.signal);
		cli_warn("%s: agent-run %s after %s", sl->id, how.p ? how.p : "ended",
		         core_duration_text(core_now_mono_ms() - sl->t0, d));
		core_buf_release(&how);
		/* a child that did not settle its row is a lost worker; one
		 * stopped by a drain is handed back uncounted */
		hand_back(w, sl, !atomic_load(&sl->kill));
		if ((sl->c.code || sl->c.signal) && sl->err.len)
			fprintf(stderr, "%.*s%s", (int)sl->err.len, sl->err.p,
			        sl->err.p[sl->err.len - 1] == '\n' ? "" : "\n");
		run_child_release(&sl->c);
		slot_release(sl);
		w->running--;
		w->ended++;
	}
}

/* The slot's child's words: agent-run --claimed ID --store-fd 0, then
 * the run's own options (strings of sl->row).  NULL: the row's options
 * are not a list of words (a row no agent-run wrote), or no memory. */
static char **child_argv(const struct worker *w, struct slot *sl, const json_t *args)
{
	size_t i, n = 0;
	const json_t *a;
	char **v = calloc(json_array_size(args) + 6, sizeof *v);
	if (!v)
		return NULL;
	v[n++] = (char *)w->agent_run;
	v[n++] = "--claimed";
	v[n++] = sl->id;
	v[n++] = "--store-fd";
	v[n++] = "0";
	json_array_foreach(args, i, a) {
		if (!json_is_string(a)) {
			free(v);
			return NULL;
		}
		v[n++] = (char *)json_string_value(a);
	}
	return v;
}

/* Start the claimed run row in a free slot.  A row whose options are not
 * agent-run's settles failed (no worker could run it); a child that
 * cannot be started is handed back, and the worker stops (CORE_ESYS). */
static enum core_status start(struct worker *w, const json_t *row, struct core_err *e)
{
	const json_t *info = json_object_get(row, STORE_INFO_KEY);
	const json_t *q = json_object_get(info, "queue");
	struct slot *sl = NULL;
	for (size_t i = 0; i < w->concurrency && !sl; i++)
		if (!w->slots[i].used)
			sl = &w->slots[i];
	memset(sl, 0, sizeof *sl);
	snprintf(sl->id, sizeof sl->id, "%s", json_string_value(json_object_get(row, "snapshotId")));
	sl->epoch = json_integer_value(json_object_get(info, "epoch"));
	if (!(sl->argv = child_argv(w, sl, json_object_get(json_object_get(info, "run"), "args")))) {
		struct core_err why = { 0 };
		core_fail(&why, CORE_EINVAL, "the run's options are not agent-run's");
		cli_warn("%s: %s: settled failed", sl->id, why.msg);
		if (detach_settle_failed(w->s, row, &why, e))
			return cli_report(e);
		return CORE_OK;
	}
	sl->row = json_incref((json_t *)row);
	sl->c = (struct run_child){
		.argv = sl->argv, .env = w->env, .what = "agent-run", .in = w->location.p,
		.in_len = w->location.len, .cancel_grace_ms = 0,
		.err = &sl->err, .err_keep = 8192,
	};
	core_buf_init(&sl->err, CORE_BUF_UNLIMITED);
	sl->t0 = core_now_mono_ms();
	cli_warn("%s: claimed (queue %s, agent %s, attempt %lld)", sl->id,
	         json_string_value(json_object_get(q, "name")),
	         json_string_value(json_object_get(q, "agent")),
	         (long long)json_integer_value(json_object_get(q, "attempt")));
	enum core_status st = run_start(&sl->c, e);
	if (!st && pthread_create(&sl->thread, NULL, slot_main, sl)) {
		run_kill(&sl->c);
		st = core_fail(e, CORE_ESYS, "cannot start a thread");
	}
	if (st) {
		run_child_release(&sl->c);
		hand_back(w, sl, 0);
		slot_release(sl);
		return CORE_ESYS;
	}
	sl->used = 1;
	w->running++;
	return CORE_OK;
}

/* How long to sleep when nothing pokes: until the next run is due, or
 * the idle exit; a minute at most (a lost wake-up costs no more). */
static int64_t sleep_ms(const struct worker *w, int64_t next_ns, int64_t idle_left)
{
	int64_t ms = 60000;
	if (next_ns) {
		int64_t due = (next_ns - store_now_ns(w->s)) / 1000000 + 1;
		ms = due < 1 ? 1 : due < ms ? due : ms;
	}
	if (idle_left >= 0 && idle_left < ms)
		ms = idle_left < 1 ? 1 : idle_left;
	return ms;
}

static enum core_status work(struct worker *w, struct core_err *e)
{
	int64_t idle_since = core_now_mono_ms(), drain_end = -1;
	int handed = 0;
	for (;;) {
		int64_t next_ns = 0, idle_left = -1;
		int claimed = 0;
		enum core_status st;
		reap(w);
		int nstops = atomic_load(&stops);
		if (nstops && drain_end < 0) {
			cli_warn("draining: %zu run%s in flight", w->running, w->running == 1 ? "" : "s");
			drain_end = core_now_mono_ms() + (nstops > 1 ? 0 : w->drain_ms);
		}
		if (drain_end >= 0) {
			if (!w->running)
				break;
			if (!handed && (nstops > 1 || core_now_mono_ms() >= drain_end)) {
				for (size_t i = 0; i < w->concurrency; i++)
					if (w->slots[i].used)
						atomic_store(&w->slots[i].kill, 1);
				handed = 1;
			}
		}
		while (drain_end < 0 && w->running < w->concurrency &&
		       (!w->max_runs || w->ended + (long)w->running < w->max_runs)) {
			json_t *row = NULL;
			st = store_claim(w->s, w->queues, w->max_attempts, &row, &next_ns, e);
			if (st == CORE_ENOTFOUND)
				break;
			if (st)
				return st;
			if (!row)
				continue;       /* settled rows only: claim again */
			st = start(w, row, e);
			json_decref(row);
			if (st)
				return st;
			claimed = 1;
		}
		if (w->running || claimed)
			idle_since = core_now_mono_ms();
		if (!w->running && drain_end < 0) {
			if (w->max_runs && w->ended >= w->max_runs)
				break;
			if (w->once && !claimed)
				break;
			if (w->idle_ms >= 0) {
				idle_left = idle_since + w->idle_ms - core_now_mono_ms();
				if (idle_left <= 0)
					break;
			}
		}
		if (claimed)
			continue;
		if (drain_end >= 0) {
			int64_t left = drain_end - core_now_mono_ms();
			nap(handed || left < 1 ? 1000 : left);
		} else {
			nap(sleep_ms(w, next_ns, idle_left));
		}
	}
	return CORE_OK;
}

/* The signal and watcher threads (never joined: they end with the
 * process), the stop signals blocked in every thread but the first. */
static enum core_status start_threads(struct worker *w, struct core_err *e)
{
	static sigset_t set;
	pthread_condattr_t ca;
	pthread_t t;
	enum core_status st;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&poke_cv, &ca);
	pthread_condattr_destroy(&ca);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if ((st = store_open(w->location.p, &w->watch, e)))
		return st;
	if (pthread_create(&t, NULL, signal_main, &set) ||
	    pthread_create(&t, NULL, watch_main, w->watch))
		return core_fail(e, CORE_ESYS, "cannot start a thread");
	return CORE_OK;
}

int main(int argc, char **argv)
{
	struct worker w = { .concurrency = 1, .idle_ms = -1, .drain_ms = 30000 };
	struct core_err e = { 0 };
	const char *arg, *store = NULL, **queues = NULL;
	static const char *const dflt[] = { "default", NULL };
	size_t nq = 0;
	enum core_status st;
	char *found = NULL;
	int64_t n;
	int c;

	cli_start(&prog);
	cli_protect_secrets();
	core_buf_init(&w.location, CORE_BUF_UNLIMITED);
	while ((c = cli_next(argc, argv, &arg)) != -1) {
		switch (c) {
		case OPT_QUEUE:
			if (!*arg || strlen(arg) > STORE_QUEUE_NAME_MAX)
				return cli_finish(cli_usage("--queue: a queue's name is 1 to %d bytes",
				                            STORE_QUEUE_NAME_MAX));
			if ((st = cli_push_arg(&queues, &nq, arg)))
				return cli_finish(st);
			break;
		case OPT_CONCURRENCY:
			if ((st = cli_count("--concurrency", arg, 1024, &n)))
				return cli_finish(st);
			w.concurrency = (size_t)n;
			break;
		case OPT_MAX_ATTEMPTS:
			if ((st = cli_count("--max-attempts", arg, 1000, &w.max_attempts)))
				return cli_finish(st);
			break;
		case OPT_MAX_RUNS:
			if ((st = cli_count("--max-runs", arg, LONG_MAX / 2, &n)))
				return cli_finish(st);
			w.max_runs = (long)n;
			break;
		case OPT_STORE: store = arg; break;
		case OPT_ONCE: w.once = 1; break;
		case OPT_IDLE_EXIT:
			if (core_parse_duration(arg, &w.idle_ms, &e))
				return cli_finish(cli_usage("--idle-exit: %s", e.msg));
			break;
		case OPT_DRAIN_TIMEOUT:
			if (core_parse_duration(arg, &w.drain_ms, &e))
				return cli_finish(cli_usage("--drain-timeout: %s", e.msg));
			break;
		case OPT_AGENT_RUN: w.agent_run = arg; break;
		}
	}
	if (optind < argc)
		return cli_finish(cli_usage("unexpected argument '%s'", argv[optind]));
	w.queues = queues ? queues : dflt;
	if (!w.agent_run)
		w.agent_run = (found = beside_me()) ? found : "agent-run";
	if (!spawn_program_found(w.agent_run)) {
		cli_warn("cannot find agent-run ('%s'): give --agent-run PATH", w.agent_run);
		st = CORE_ESYS;
		goto out;
	}
	if ((st = store_default_path(store, &w.location, &e)) ||
	    (st = store_open(w.location.p, &w.s, &e))) {
		st = st == CORE_EUSAGE ? cli_usage("%s", e.msg) : cli_report(&e);
		goto out;
	}
	if (!(w.env = child_env()) || !(w.slots = calloc(w.concurrency, sizeof *w.slots))) {
		st = cli_report(&(struct core_err){ .st = CORE_ENOMEM, .msg = "out of memory" });
		goto out;
	}
	if ((st = start_threads(&w, &e)) || (st = work(&w, &e)))
		cli_report(&e);
	/* a failure leaves runs in flight: they finish, their rows say how */
	for (size_t i = 0; w.slots && i < w.concurrency; i++)
		if (w.slots[i].used)
			pthread_join(w.slots[i].thread, NULL);
	reap(&w);
out:
	store_close(w.s);
	core_buf_release(&w.location);
	free(w.env);
	free(w.slots);
	free(queues);
	free(found);
	return cli_finish(st);
}
