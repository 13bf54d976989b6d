/*
 * session.c - the live session of one invocation, the customPatch
 * emitter, the chunk sink and the shape of a snapshot row.  See session.h.
 */
#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/store.h"
#include "../base/jpatch.h"
#include "../base/json.h"
#include "transform.h"
#include "../base/util.h"

struct session {
	const struct agent *agent;
	enum core_status (*chunk)(void *ctx, const json_t *chunk);
	void *chunk_ctx;
	int (*cancelled)(void *ctx);
	void *cancel_ctx;
	struct transform *state_tf;

	char *id;               /* the session ID */
	json_t *state;          /* {artifacts?, custom?, messages, sessionId, usage?} */
	char *parent_id;        /* resume point: last committed row, or the resumed row */
	size_t base_kept;       /* leading messages that are parent_id's, unchanged,
	                           counted from the first loaded one */
	long turn_index;

	/* A deferred history (session_defer_history()). */
	size_t before;          /* messages of parent_id before the loaded ones */
	enum core_status (*load)(void *ctx, size_t n, json_t **msgs, struct core_err *e);
	void *load_ctx;
	struct core_err load_err;

	/* The turn in flight. */
	char *snapshot_id;      /* the reserved row ID, or NULL */
	int patch_first;        /* next customPatch is a whole-document replace */
	json_t *patch_baseline; /* the custom value last emitted */

	/* Usage summed over the model calls (session_add_usage()). */
	json_t *run_usage;      /* this invocation's */
	json_t *turn_usage;     /* the turn in flight's */
};

enum core_status session_new(const struct session_config *cfg, struct session **out,
                             struct core_err *e)
{
	struct session *s = calloc(1, sizeof *s);
	if (!s)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	s->agent = cfg->agent;
	s->chunk = cfg->chunk;
	s->chunk_ctx = cfg->chunk_ctx;
	s->cancelled = cfg->cancelled;
	s->cancel_ctx = cfg->cancel_ctx;
	s->state_tf = cfg->state_tf;
	if (!(s->run_usage = json_object()) || !(s->turn_usage = json_object())) {
		session_free(s);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	*out = s;
	return CORE_OK;
}

void session_free(struct session *s)
{
	if (!s)
		return;
	free(s->id);
	json_decref(s->state);
	free(s->parent_id);
	free(s->snapshot_id);
	json_decref(s->patch_baseline);
	json_decref(s->run_usage);
	json_decref(s->turn_usage);
	free(s);
}

void session_leave_at_exit(struct session *s)
{
	if (s && !CORE_EXIT_FREES)
		json_incref(s->state);
}

enum core_status session_load(struct session *s, json_t *state, const char *session_id,
                              const char *resumed_id, size_t base_kept, struct core_err *e)
{
	char uuid[37];
	if (!session_id || !*session_id) {
		core_uuid(uuid);
		session_id = uuid;
	}
	json_decref(s->state);
	free(s->id);
	free(s->parent_id);
	s->state = state ? state : json_object();
	s->id = strdup(session_id);
	s->parent_id = resumed_id ? strdup(resumed_id) : NULL;
	s->base_kept = base_kept;
	if (!s->state || !s->id || (resumed_id && !s->parent_id))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	json_object_set_new(s->state, "sessionId", json_string(s->id));
	session_loaded_messages(s);
	return CORE_OK;
}

const struct agent *session_agent(const struct session *s)
{
	return s->agent;
}

const char *session_id(const struct session *s)
{
	return s->id;
}

json_t *session_loaded_messages(struct session *s)
{
	json_t *m = json_object_get(s->state, "messages");
	if (!json_is_array(m)) {
		m = json_array();
		json_object_set_new(s->state, "messages", m);
	}
	return m;
}

void session_defer_history(struct session *s, size_t before,
                           enum core_status (*load)(void *ctx, size_t n, json_t **msgs,
                                                    struct core_err *e),
                           void *ctx)
{
	s->before = before;
	s->load = load;
	s->load_ctx = ctx;
}

size_t session_messages_before(const struct session *s)
{
	return s->before;
}

/* The deferred history loaded and put before the loaded messages. */
static void load_history(struct session *s)
{
	json_t *all = NULL;
	if (!s->before || s->load_err.st)
		return;
	if (s->load(s->load_ctx, s->before, &all, &s->load_err))
		return;
	if (json_array_size(all) != s->before ||
	    json_array_extend(all, session_loaded_messages(s))) {
		json_decref(all);
		core_fail(&s->load_err, CORE_ESYS, "the history of snapshot '%s' changed while "
		          "this turn ran", s->parent_id ? s->parent_id : "");
		return;
	}
	json_object_set_new(s->state, "messages", all);
	s->base_kept += s->before;
	s->before = 0;
}

enum core_status session_history_error(const struct session *s, struct core_err *e)
{
	if (s->load_err.st && e)
		*e = s->load_err;
	return s->load_err.st;
}

const json_t *session_state_loaded(const struct session *s)
{
	return s->state;
}

const json_t *session_last_message(const struct session *s)
{
	const json_t *m = json_object_get(s->state, "messages");
	size_t n = json_array_size(m);
	return n ? json_array_get(m, n - 1) : NULL;
}

const json_t *session_state(const struct session *s)
{
	/* the live state is the whole one: a deferred history comes in first
	 * (s is the caller's own; only the loading mutates it) */
	load_history((struct session *)s);
	return s->state;
}

json_t *session_messages(struct session *s)
{
	load_history(s);
	return session_loaded_messages(s);
}

json_t *session_appended(const struct session *s)
{
	if (!s->before)
		return NULL;
	const json_t *msgs = json_object_get(s->state, "messages");
	json_t *state = json_copy((json_t *)s->state), *tail = json_array();
	for (size_t i = s->base_kept; i < json_array_size(msgs); i++)
		json_array_append(tail, json_array_get(msgs, i));
	if (!state || !tail || json_object_set_new(state, "messages", tail)) {
		json_decref(state);
		return NULL;
	}
	json_t *shaped = session_shaped(s, state);
	json_decref(state);
	return shaped;
}

json_t *session_shaped(const struct session *s, const json_t *state)
{
	json_t *o = json_object();
	static const char *const keys[] = { "artifacts", "custom", "messages" };
	if (!o)
		return NULL;
	for (int i = 0; i < 3; i++) {
		json_t *v = json_object_get(state, keys[i]);
		if (v && !(i == 1 && json_is_null(v)))
			json_object_set(o, keys[i], v);
	}
	json_object_set_new(o, "sessionId", json_string(s->id));
	json_t *usage = json_object_get(state, "usage");
	if (json_object_size(usage))
		json_object_set(o, "usage", usage);
	return o;
}

/* ---- usage ---- */

/* sum[k] += v for a number v: integers stay integers, a real makes the
 * sum real; an object (GenerationUsage's custom) is summed member by
 * member, one level deep; anything else is left out. */
static void sum_number(json_t *sum, const char *k, const json_t *v, int depth)
{
	json_t *old = json_object_get(sum, k);
	if (json_is_object(v) && !depth) {
		const char *ck;
		json_t *cv;
		if (!json_is_object(old)) {
			old = json_object();
			if (json_object_set_new(sum, k, old))
				return;
		}
		json_object_foreach((json_t *)v, ck, cv)
			sum_number(old, ck, cv, 1);
	} else if (json_is_integer(v) && (!old || json_is_integer(old))) {
		json_object_set_new(sum, k, json_integer(json_integer_value(v)
		                    + (old ? json_integer_value(old) : 0)));
	} else if (json_is_number(v) && (!old || json_is_number(old))) {
		json_object_set_new(sum, k, json_real(json_number_value(v)
		                    + (old ? json_number_value(old) : 0)));
	}
}

void session_sum_usage(json_t *sum, const json_t *u)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)u, k, v)
		sum_number(sum, k, v, 0);
}

void session_add_usage(struct session *s, const json_t *u)
{
	json_t *call = json_is_object(u) ? json_copy((json_t *)u) : NULL;
	if (!call)
		return;
	/* a provider that reports input and output but no total */
	const json_t *in = json_object_get(call, "inputTokens"),
	             *out = json_object_get(call, "outputTokens");
	if (json_is_integer(in) && json_is_integer(out) && !json_object_get(call, "totalTokens"))
		json_object_set_new(call, "totalTokens", json_integer(json_integer_value(in)
		                    + json_integer_value(out)));
	session_sum_usage(s->run_usage, call);
	session_sum_usage(s->turn_usage, call);
	/* a new object: a shaped state or a row may share the old one */
	const json_t *old = json_object_get(s->state, "usage");
	json_t *total = json_is_object(old) ? json_deep_copy(old) : json_object();
	if (total) {
		session_sum_usage(total, call);
		json_object_set_new(s->state, "usage", total);
	}
	json_decref(call);
}

const json_t *session_run_usage(const struct session *s)
{
	return s->run_usage;
}

const json_t *session_turn_usage(const struct session *s)
{
	return s->turn_usage;
}

/* ---- identity and the turn in flight ---- */

const char *session_parent_id(const struct session *s)
{
	return s->parent_id;
}

const char *session_snapshot_id(const struct session *s)
{
	return s->snapshot_id;
}

long session_turn_index(const struct session *s)
{
	return s->turn_index;
}

size_t session_base_kept(const struct session *s)
{
	return s->before + s->base_kept;
}

json_t *session_context(const struct session *s)
{
	return json_pack("{s:s, s:s, s:s, s:I}", "sessionId", s->id,
	                 "snapshotId", s->snapshot_id ? s->snapshot_id : "",
	                 "parentSnapshotId", s->parent_id ? s->parent_id : "",
	                 "turnIndex", (json_int_t)s->turn_index);
}

enum core_status session_turn_begin(struct session *s, int reserve, struct core_err *e)
{
	s->patch_first = 1;
	json_decref(s->patch_baseline);
	s->patch_baseline = NULL;
	json_object_clear(s->turn_usage);
	free(s->snapshot_id);
	s->snapshot_id = NULL;
	if (reserve) {
		char uuid[37];
		core_uuid(uuid);
		if (!(s->snapshot_id = strdup(uuid)))
			return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
}

enum core_status session_turn_end(struct session *s, const char *written, struct core_err *e)
{
	s->turn_index++;
	if (!written)
		return CORE_OK;
	char *id = strdup(written);
	if (!id)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	free(s->parent_id);
	s->parent_id = id;
	s->base_kept = json_array_size(session_loaded_messages(s));
	return CORE_OK;
}

/* ---- messages ---- */

json_t *session_message_ordered(const json_t *m)
{
	json_t *o = json_object();
	static const char *const keys[] = { "content", "metadata", "role" };
	const char *k;
	json_t *v;
	for (int i = 0; i < 3; i++)
		if ((v = json_object_get(m, keys[i])))
			json_object_set(o, keys[i], v);
	json_object_foreach((json_t *)m, k, v)
		if (!json_object_get(o, k))
			json_object_set(o, k, v);
	return o;
}

/*
 * How many of the first limit messages of now are those of old, byte for
 * byte.  Keeps base_kept true when the history is replaced: the save can
 * then tell the store which messages it already holds (store_save_on), so
 * the store never compares or re-hashes them.
 */
static size_t kept_prefix(const json_t *old, const json_t *now, size_t limit)
{
	size_t i;
	for (i = 0; i < limit && i < json_array_size(old) && i < json_array_size(now); i++)
		if (!jv_same(json_array_get(old, i), json_array_get(now, i)))
			break;
	return i;
}

void session_add_message(struct session *s, const json_t *message)
{
	/* an append needs no history */
	json_array_append_new(session_loaded_messages(s), session_message_ordered(message));
}

void session_set_messages(struct session *s, const json_t *messages)
{
	load_history(s);                /* a replacement of the whole history */
	json_t *m = json_array();
	size_t i;
	json_t *v;
	json_array_foreach(messages, i, v)
		json_array_append_new(m, session_message_ordered(v));
	session_put_messages(s, m);
}

void session_put_messages(struct session *s, json_t *messages)
{
	s->base_kept = kept_prefix(session_loaded_messages(s), messages, s->base_kept);
	json_object_set_new(s->state, "messages", messages);
}

/* ---- custom state and artifacts (Session.UpdateCustom, SendArtifact) ---- */

static enum core_status custom_emit(struct session *s, json_t *cur, struct core_err *e)
{
	json_t *patch = NULL;
	if (s->patch_first || !s->patch_baseline) {
		patch = json_pack("[{s:s, s:s, s:O}]", "op", "replace", "path", "", "value", cur);
		if (!patch)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		s->patch_first = 0;
	} else {
		enum core_status st = jpatch_diff(s->patch_baseline, cur, 0, &patch, e);
		if (st)
			return st;
	}
	if (json_array_size(patch))
		session_emit(s, "customPatch", patch);
	else
		json_decref(patch);
	json_decref(s->patch_baseline);
	s->patch_baseline = json_deep_copy(cur);
	return CORE_OK;
}

/* The state transform's view of the custom value (§3.6): its answer for
 * the whole state, taken at .custom (null when omitted); *view NULL
 * without a transform. */
static enum core_status custom_view(struct session *s, json_t **view, struct core_err *e)
{
	json_t *shaped, *whole = NULL;
	*view = NULL;
	if (!s->state_tf)
		return CORE_OK;
	if (!(shaped = session_shaped(s, s->state)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	enum core_status st = transform_state(s->state_tf, shaped, s->id, &whole, e);
	json_decref(shaped);
	if (st)
		return st;
	const json_t *c = json_object_get(whole, "custom");
	*view = c ? json_incref((json_t *)c) : json_null();
	json_decref(whole);
	return CORE_OK;
}

enum core_status session_custom_changed(struct session *s, struct core_err *e)
{
	json_t *view = NULL;
	enum core_status st = custom_view(s, &view, e);
	if (!st) {
		json_t *cur = view ? view : json_object_get(s->state, "custom");
		st = custom_emit(s, cur ? cur : json_null(), e);
	}
	json_decref(view);
	return st;
}

enum core_status session_apply_custom(struct session *s, const json_t *value, int is_patch,
                                      struct core_err *e)
{
	if (!is_patch) {
		json_object_set_new(s->state, "custom", json_deep_copy(value));
		return CORE_OK;
	}
	json_t *doc = json_deep_copy(json_object_get(s->state, "custom"));
	if (!doc)
		doc = json_null();
	enum core_status st = jpatch_apply(&doc, value, JPATCH_INPLACE, e);
	if (st) {
		json_decref(doc);
		return st;
	}
	json_object_set_new(s->state, "custom", doc);
	return CORE_OK;
}

enum core_status session_update_custom(struct session *s, const json_t *value, int is_patch,
                                       struct core_err *e)
{
	enum core_status st = session_apply_custom(s, value, is_patch, e);
	if (st)
		return st == CORE_ENOMEM ? st : CORE_EINVAL;
	return session_custom_changed(s, e);
}

void session_add_artifact(struct session *s, const json_t *a)
{
	json_t *arts = json_object_get(s->state, "artifacts");
	if (!json_is_array(arts)) {
		arts = json_array();
		json_object_set_new(s->state, "artifacts", arts);
	}
	json_t *copy = json_deep_copy(a);
	const json_t *name = json_object_get(a, "name");
	size_t i;
	json_t *old;
	if (jv_is_string(name) && json_string_length(name))
		json_array_foreach(arts, i, old)
			if (jv_equal(json_object_get(old, "name"), name)) {
				json_array_set_new(arts, i, copy);
				goto sent;
			}
	json_array_append_new(arts, copy);
sent:
	session_emit(s, "artifact", json_deep_copy(a));
}

/* ---- the sink and the stop ---- */

void session_emit(struct session *s, const char *key, json_t *value)
{
	json_t *chunk = json_object();
	if (!chunk || json_object_set_new(chunk, key, value)) {
		json_decref(chunk);
		return;
	}
	if (s->chunk)
		s->chunk(s->chunk_ctx, chunk);
	json_decref(chunk);
}

void session_mute(struct session *s)
{
	s->chunk = NULL;
}

int session_cancelled(void *ctx)
{
	struct session *s = ctx;
	return s->cancelled && s->cancelled(s->cancel_ctx);
}

/* ---- the title ---- */

#define TITLE_MAX 72

/* One text folded into out (TITLE_MAX + 4 bytes); its length. */
static size_t title_of(const char *t, char *out)
{
	size_t n = 0, cut = 0;
	int blank = 0;
	for (; *t && n < TITLE_MAX; t++) {
		if (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r') {
			blank = n > 0;
			continue;
		}
		if (blank) {
			cut = n;
			out[n++] = ' ';
			blank = 0;
			if (n == TITLE_MAX)
				break;
		}
		if (((unsigned char)*t & 0xc0) != 0x80)
			cut = n;            /* a character starts here */
		out[n++] = *t;
	}
	if (*t) {                       /* shortened: drop the cut character */
		n = cut;
		memcpy(out + n, "\xe2\x80\xa6", 3);   /* U+2026 */
		n += 3;
	}
	return n;
}

json_t *session_title(struct session *s)
{
	json_t *m, *part;
	size_t i, j;
	json_array_foreach(session_messages(s), i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		if (!role || strcmp(role, "user"))
			continue;
		json_array_foreach(json_object_get(m, "content"), j, part) {
			const char *t = json_string_value(json_object_get(part, "text"));
			char out[TITLE_MAX + 4];
			size_t n = t ? title_of(t, out) : 0;
			if (n)
				return json_stringn(out, n);
		}
	}
	return NULL;
}

/* ---- snapshot rows ---- */

static void set_str(json_t *row, const char *key, const char *v, int omit_empty)
{
	if (v && (!omit_empty || *v))
		json_object_set_new(row, key, json_string(v));
}

static void set_val(json_t *row, const char *key, const json_t *v)
{
	if (v)
		json_object_set(row, key, (json_t *)v);
}

json_t *session_row(const struct session_row *r)
{
	json_t *row = json_object();
	if (!row)
		return NULL;
	set_str(row, "createdAt", r->created_at, 0);
	set_val(row, "error", r->error);
	set_str(row, "finishReason", r->finish_reason, 1);
	set_str(row, "heartbeatAt", r->heartbeat_at, 0);
	set_str(row, "parentId", r->parent_id, 1);
	set_str(row, "sessionId", r->session_id, 0);
	set_str(row, "snapshotId", r->snapshot_id, 0);
	set_val(row, "state", r->state);
	set_str(row, "status", r->status, 0);
	set_str(row, "updatedAt", r->updated_at, 0);
	set_val(row, STORE_INFO_KEY, r->info);
	return row;
}
