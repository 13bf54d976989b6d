/* history.c - the history as a person reads it: sessions newest first,
 * filtered by agent and time, one line at a time.  Over the store
 * interface, so every backend has it.  See store_sessions_recent() in
 * store.h. */
#include "store.h"
#include "backend.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "../libcore/base/buf.h"
#include "../libcore/base/jfast.h"
#include "../libcore/base/json.h"
#include "../libcore/base/util.h"

/* ---- a session's listing entry (backend.h st_entry_make()) ---- */

/* The entry's fixed head: version, times, the text's splice points. */
enum {
	EN_VERSION = 1,
	EN_UPDATED = 1,         /* be64 st_updated_ns() */
	EN_BEAT = 9,            /* be64 st_expiry_beat() */
	EN_TIMEOUT = 17,        /* be64 the row's heartbeatTimeout, INT64_MIN: none */
	EN_STATUS = 25,         /* be32 the status's offset in the text */
	EN_STATUS_END = 29,     /* be32 its end */
	EN_ROWS = 33,           /* be32 where "snapshots" goes */
	EN_AGENT = 37,          /* be16 the agent's length, then the agent */
	EN_HEAD = 39
};

/* name (,"key":) and v's JSON text, when v is given. */
static enum core_status add_member(struct core_buf *b, const char *name, const json_t *v)
{
	enum core_status st;
	if (!v)
		return CORE_OK;
	if ((st = core_buf_adds(b, name)))
		return st;
	return jv_dump(v, b);
}

/* n in decimal. */
static enum core_status add_count(struct core_buf *b, size_t n)
{
	char d[24], *p = d + sizeof d;
	do
		*--p = (char)('0' + n % 10);
	while (n /= 10);
	return core_buf_add(b, p, (size_t)(d + sizeof d - p));
}

static const json_t *info_string(const json_t *info, const char *key)
{
	const json_t *v = json_object_get(info, key);
	return json_is_string(v) ? v : NULL;
}

enum core_status st_entry_make(const char *session_id, const json_t *latest,
                               struct core_buf *out, int64_t *updated_ns)
{
	const json_t *info = json_object_get(latest, STORE_INFO_KEY), *v;
	const json_t *updated = st_shown_updated(latest), *agent = info_string(info, "agent");
	const char *status = st_str(latest, "status");
	size_t at = out->len, text, an = agent ? json_string_length(agent) : 0;
	json_t *sid;
	enum core_status st;
	int64_t ns;
	unsigned char head[EN_HEAD];

	if (an > 0xffff)
		an = 0;                 /* past any agent name: no --agent match */
	head[0] = EN_VERSION;
	ns = st_updated_ns(latest);
	if (updated_ns)
		*updated_ns = ns;
	put_be64(head + EN_UPDATED, (uint64_t)ns);
	put_be64(head + EN_BEAT, (uint64_t)st_expiry_beat(latest));
	v = json_object_get(info, "heartbeatTimeout");
	put_be64(head + EN_TIMEOUT, (uint64_t)(json_is_integer(v) ? json_integer_value(v) : INT64_MIN));
	head[EN_AGENT] = (unsigned char)(an >> 8);
	head[EN_AGENT + 1] = (unsigned char)an;
	if ((st = core_buf_add(out, head, sizeof head)) ||
	    (an && (st = core_buf_add(out, json_string_value(agent), an))))
		return st;
	text = out->len;
	if (!(sid = json_string(session_id)))
		return CORE_ENOMEM;
	st = core_buf_adds(out, "{\"sessionId\":");
	if (!st)
		st = jv_dump(sid, out);
	json_decref(sid);
	v = json_object_get(latest, "snapshotId");
	if (!st)
		st = add_member(out, ",\"snapshotId\":", v ? v : json_null());
	if (!st)
		st = core_buf_adds(out, ",\"status\":");
	put_be32((unsigned char *)out->p + at + EN_STATUS, (uint32_t)(out->len - text));
	if (!st && (!status || !status[0]))
		st = core_buf_adds(out, "\"completed\"");
	else if (!st)
		st = jv_dump(json_object_get(latest, "status"), out);
	put_be32((unsigned char *)out->p + at + EN_STATUS_END, (uint32_t)(out->len - text));
	if (!st)
		st = add_member(out, ",\"updatedAt\":", updated ? updated : json_null());
	put_be32((unsigned char *)out->p + at + EN_ROWS, (uint32_t)(out->len - text));
	if (!st)
		st = add_member(out, ",\"agent\":", agent);
	if (!st)
		st = add_member(out, ",\"model\":", info_string(info, "model"));
	if (!st)
		st = add_member(out, ",\"title\":", info_string(info, "title"));
	/* the session's tokens so far, as its latest turn counted them */
	v = json_object_get(info, "sessionUsage");
	if (!st)
		st = add_member(out, ",\"usage\":", json_is_object(v) ? v : NULL);
	/* a completed turn that paused on an interrupt is what a person
	 * must act on */
	v = json_object_get(latest, "finishReason");
	if (!st)
		st = add_member(out, ",\"finishReason\":",
		                json_is_string(v) && json_string_length(v) ? v : NULL);
	if (!st)
		st = core_buf_addc(out, '}');
	if (st)
		out->len = at;
	return st;
}

/* An entry's parts, checked against its length; 0 when it is not one. */
struct entry {
	int64_t updated, beat, timeout;
	const char *agent, *text;
	size_t agent_len, text_len, status, status_end, rows;
};

static int entry_read(const void *p, size_t n, struct entry *en)
{
	const unsigned char *u = p;
	if (n < EN_HEAD || u[0] != EN_VERSION)
		return 0;
	en->updated = (int64_t)get_be64(u + EN_UPDATED);
	en->beat = (int64_t)get_be64(u + EN_BEAT);
	en->timeout = (int64_t)get_be64(u + EN_TIMEOUT);
	en->agent_len = (size_t)u[EN_AGENT] << 8 | u[EN_AGENT + 1];
	en->agent = (const char *)u + EN_HEAD;
	if (n - EN_HEAD < en->agent_len)
		return 0;
	en->text = en->agent + en->agent_len;
	en->text_len = n - EN_HEAD - en->agent_len;
	en->status = get_be32(u + EN_STATUS);
	en->status_end = get_be32(u + EN_STATUS_END);
	en->rows = get_be32(u + EN_ROWS);
	return en->status <= en->status_end && en->status_end <= en->rows &&
	       en->rows < en->text_len;
}

/* ---- the listing ---- */

struct store_line {
	const char *text;       /* the line's JSON text */
	size_t len;
	json_t *json;           /* the same as a value, or NULL until asked */
};

const char *store_line_text(const struct store_line *l, size_t *len)
{
	*len = l->len;
	return l->text;
}

json_t *store_line_json(struct store_line *l)
{
	if (!l->json)
		l->json = jv_parse_fast(l->text, l->len);
	return l->json;
}

struct recent_ctx {
	const struct store_session_filter *f;
	size_t limit, n;
	int done;               /* the limit or the time was reached */
	int64_t now_ns;
	store_line_fn fn;
	void *ctx;
	struct core_buf entry, line;
	struct core_err *e;
};

static enum core_status add_session(const struct store_session_info *si, void *ctx)
{
	struct recent_ctx *c = ctx;
	struct store_line l = { NULL, 0, NULL };
	struct entry en;
	const void *p = si->entry;
	size_t n = si->entry_len;
	int64_t timeout;
	int expired;
	enum core_status st;

	if (!p) {               /* the backend gave the row: its entry */
		c->entry.len = 0;
		if (st_entry_make(si->session_id, si->latest, &c->entry, NULL))
			return core_fail(c->e, CORE_ENOMEM, "out of memory");
		p = c->entry.p;
		n = c->entry.len;
	}
	if (!entry_read(p, n, &en))
		return core_fail(c->e, CORE_EINVAL, "list sessions: session '%s': its index "
		                 "entry is damaged", si->session_id);
	/* newest first: past since, every session left is older */
	if (c->f->since_ns && en.updated < c->f->since_ns) {
		c->done = 1;
		return CORE_ECANCELLED;
	}
	if (c->f->agent && (strlen(c->f->agent) != en.agent_len ||
	                    memcmp(c->f->agent, en.agent, en.agent_len)))
		return CORE_OK;
	timeout = en.timeout > c->f->hb_timeout_ms ? en.timeout : c->f->hb_timeout_ms;
	expired = st_expired(en.beat, c->now_ns, timeout);
	c->line.len = 0;
	if (core_buf_add(&c->line, en.text, en.status) ||
	    (expired ? core_buf_adds(&c->line, "\"expired\"")
	             : core_buf_add(&c->line, en.text + en.status, en.status_end - en.status)) ||
	    core_buf_add(&c->line, en.text + en.status_end, en.rows - en.status_end) ||
	    core_buf_adds(&c->line, ",\"snapshots\":") || add_count(&c->line, si->rows) ||
	    core_buf_add(&c->line, en.text + en.rows, en.text_len - en.rows))
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	l.text = c->line.p;
	l.len = c->line.len;
	st = c->fn(&l, c->ctx);
	json_decref(l.json);
	if (st == CORE_OK && c->limit && ++c->n == c->limit) {
		c->done = 1;
		return CORE_ECANCELLED;
	}
	return st;
}

enum core_status store_sessions_recent(struct store *s, const struct store_session_filter *f,
                                       size_t limit, store_line_fn fn, void *ctx,
                                       struct core_err *e)
{
	struct recent_ctx c = { f, limit, 0, 0, 0, fn, ctx,
	                        CORE_BUF_INIT(CORE_BUF_UNLIMITED),
	                        CORE_BUF_INIT(CORE_BUF_UNLIMITED), e };
	enum core_status st;
	if ((st = st_check_handle(s, e)) != CORE_OK)
		return st;
	c.now_ns = store_now_ns(s);
	/* with an agent to match, the first batch is a guess */
	st = s->backend->recent ? s->backend->recent(s, f->agent ? 0 : limit, add_session, &c, e)
	                        : st_recent_sorted(s, add_session, &c, e);
	core_buf_release(&c.entry);
	core_buf_release(&c.line);
	return st == CORE_ECANCELLED && c.done ? CORE_OK : st;
}

struct list_ctx {
	json_t *list;
	struct core_err *e;
};

static enum core_status append_line(struct store_line *line, void *ctx)
{
	struct list_ctx *c = ctx;
	json_t *v = store_line_json(line);
	if (!v || json_array_append(c->list, v))
		return core_fail(c->e, CORE_ENOMEM, "out of memory");
	return CORE_OK;
}

enum core_status store_recent_sessions(struct store *s,
                                       const struct store_session_filter *f,
                                       json_t **list, struct core_err *e)
{
	struct list_ctx c = { json_array(), e };
	enum core_status st;
	if (!(*list = c.list))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	st = store_sessions_recent(s, f, 0, append_line, &c, e);
	if (st != CORE_OK) {
		json_decref(*list);
		*list = NULL;
	}
	return st;
}

/* ---- the order by sorting, for a backend without the index ---- */

struct sorted {
	char *sid;
	json_t *latest;
	size_t rows;
	int64_t ns;
};

struct collect_ctx {
	struct sorted *v;
	size_t n, cap;
	struct core_err *e;
};

static enum core_status collect(const struct store_session_info *si, void *ctx)
{
	struct collect_ctx *c = ctx;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct sorted *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return core_fail(c->e, CORE_ENOMEM, "list sessions: out of memory");
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n].sid = strdup(si->session_id);
	c->v[c->n].latest = json_deep_copy(si->latest);
	c->v[c->n].rows = si->rows;
	c->v[c->n].ns = st_updated_ns(si->latest);
	if (!c->v[c->n].sid || !c->v[c->n].latest) {
		free(c->v[c->n].sid);
		json_decref(c->v[c->n].latest);
		return core_fail(c->e, CORE_ENOMEM, "list sessions: out of memory");
	}
	c->n++;
	return CORE_OK;
}

/* Newest first, then session ID ascending: the index's order. */
static int newer_first(const void *pa, const void *pb)
{
	const struct sorted *a = pa, *b = pb;
	if (a->ns != b->ns)
		return a->ns > b->ns ? -1 : 1;
	return strcmp(a->sid, b->sid);
}

enum core_status st_recent_sorted(struct store *s, store_session_fn fn, void *ctx,
                                  struct core_err *e)
{
	struct collect_ctx c = { NULL, 0, 0, e };
	enum core_status st = s->backend->sessions(s, collect, &c, e);
	size_t i;
	if (st == CORE_OK && c.n > 1)
		qsort(c.v, c.n, sizeof *c.v, newer_first);
	for (i = 0; i < c.n; i++) {
		struct store_session_info si = { c.v[i].sid, c.v[i].latest, c.v[i].rows, NULL, 0 };
		if (st == CORE_OK)
			st = fn(&si, ctx);
		free(c.v[i].sid);
		json_decref(c.v[i].latest);
	}
	free(c.v);
	return st;
}
