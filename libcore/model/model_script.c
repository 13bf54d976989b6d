/*
 * model_script.c - the "script/PATH" model: replays scripted responses.
 *
 * The script is a file of replies, one JSON object per line (blank lines
 * and lines starting with '#' are skipped).  docs/agent-run.md ("The script
 * model") documents the format with examples; in short, a reply has any of
 *
 *   "when":         {"user": TEXT, "match": REGEX, "models": N, "round": N,
 *                    "call": N}      which requests it answers
 *   "fallback":     true               answers what nothing else answers
 *   "chunks":       ["Hel", "lo"]      text streamed with these boundaries
 *   "text":         "Hello"            text streamed as one chunk
 *   "toolRequests": [{"name", "input"?, "ref"?}, ...]   (parallel requests)
 *   "content":      [Part, ...]        raw parts, streamed as one chunk
 *   "stream":       false | [CHUNK, ...]   stream nothing, or exactly these
 *                                       chunks (a CHUNK is an array of parts
 *                                       or a string, one text part), instead
 *                                       of the message as it is built
 *   "finishReason": "stop"             (the default)
 *   "usage":        {...}              passed through
 *   "error":        {"status": "UNAVAILABLE", "message": "model timeout"}
 *                                       fail after streaming the chunks
 *   "delay":        "200ms"            wait this long before each chunk (a
 *                                       slow stream; a duration as util.h
 *                                       spells it, or a number of seconds)
 *
 * The stream's cancelled() callback is polled between chunks and every few
 * milliseconds of a delay; a cancelled call fails with CORE_ECANCELLED.
 *
 * Selection.  With N the number of "model" messages in the request (the
 * model calls the conversation holds: the session's call order, derived
 * from the request so it survives across processes), U the text of its
 * last user message and C the number of script-model calls this process
 * made before this one (the invocation's call order), the first reply
 * whose "when" matches wins (every key given must match: "user" equals U,
 * "match" is a POSIX extended regular expression found in U ignoring case,
 * "models" equals N, "round" equals the number of model messages after the
 * last user message, "call" equals C); otherwise the N-th (0-based) reply
 * among those without "when" and "fallback"; otherwise the first
 * "fallback" reply.  After a "match", "$1".."$9" in the reply's strings are
 * its groups ("$0" the whole match, "$$" a '$'), so a script can answer
 * "add milk" and "add bread" with one line.
 *
 * Only "call" depends on more than the request: it is a process-wide
 * counter (atomic, since nothing forbids calls from several threads),
 * inherited by a detached worker, which forks.
 */
#include "model.h"

#include <regex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../base/buf.h"
#include "../base/json.h"
#include "../base/util.h"

#define SCRIPT_MAX_BYTES ((size_t)64 << 20)

static size_t count_model_messages(const json_t *messages)
{
	size_t n = 0, i;
	const json_t *m;
	json_array_foreach(messages, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		if (role && !strcmp(role, "model"))
			n++;
	}
	return n;
}

/* Model messages after the last user message: the round of the tool loop. */
static size_t count_round(const json_t *messages)
{
	size_t n = 0;
	for (size_t i = json_array_size(messages); i-- > 0;) {
		const char *role = json_string_value(json_object_get(json_array_get(messages, i), "role"));
		if (role && !strcmp(role, "user"))
			break;
		if (role && !strcmp(role, "model"))
			n++;
	}
	return n;
}

#define SCRIPT_GROUPS 10

/* What a request is matched on. */
struct request_facts {
	size_t models;     /* model messages in the request */
	size_t round;      /* model messages after the last user message */
	size_t call;       /* script-model calls this process made before */
	const char *user;  /* the last user message's text */
};

/*
 * A "when" that is an object of known keys with values of their types;
 * otherwise -1 with the message in e.  A misspelt key would otherwise be
 * ignored and the reply answer every request.
 */
static int when_check(const json_t *when, const char *path, size_t lineno, struct core_err *e)
{
	const char *k;
	const json_t *v;
	if (!json_is_object(when)) {
		core_fail(e, CORE_EINVAL, "script model: 'when' must be an object (at %s:%zu)", path, lineno);
		return -1;
	}
	json_object_foreach((json_t *)when, k, v) {
		if (!strcmp(k, "user") || !strcmp(k, "match")) {
			if (jv_is_string(v))
				continue;
			core_fail(e, CORE_EINVAL, "script model: 'when.%s' must be a string (at %s:%zu)",
			          k, path, lineno);
			return -1;
		}
		if (!strcmp(k, "models") || !strcmp(k, "round") || !strcmp(k, "call")) {
			if (json_is_integer(v) && json_integer_value(v) >= 0)
				continue;
			core_fail(e, CORE_EINVAL,
			          "script model: 'when.%s' must be a non-negative integer (at %s:%zu)",
			          k, path, lineno);
			return -1;
		}
		core_fail(e, CORE_EINVAL,
		          "script model: 'when' has an unknown key '%.64s' (want user, match, models, round or call) (at %s:%zu)",
		          k, path, lineno);
		return -1;
	}
	return 0;
}

static int count_is(const json_t *when, const char *key, size_t n)
{
	const json_t *v = json_object_get(when, key);
	return !v || json_integer_value(v) == (json_int_t)n;
}

/*
 * 1 when a checked "when" matches, 0 when not, -1 (message in e) for a
 * "match" that is not a regular expression.  groups receives a match's
 * groups.
 */
static int when_matches(const json_t *when, const struct request_facts *f, regmatch_t *groups,
                        const char *path, size_t lineno, struct core_err *e)
{
	const json_t *u = json_object_get(when, "user"), *m = json_object_get(when, "match");
	if (u && strcmp(json_string_value(u), f->user))
		return 0;
	if (!count_is(when, "models", f->models) || !count_is(when, "round", f->round)
	    || !count_is(when, "call", f->call))
		return 0;
	if (m) {
		regex_t re;
		int rc = regcomp(&re, json_string_value(m), REG_EXTENDED | REG_ICASE);
		if (rc) {
			core_fail(e, CORE_EINVAL, "script model: 'match' must be a POSIX extended regular expression (at %s:%zu)",
			          path, lineno);
			return -1;
		}
		rc = regexec(&re, f->user, SCRIPT_GROUPS, groups, 0);
		regfree(&re);
		if (rc)
			return 0;
	}
	return 1;
}

/* s with "$0".."$9" replaced by the groups of user ("$$" is '$'); NULL on
 * ENOMEM. */
static json_t *fill_string(const char *s, const char *user, const regmatch_t *g)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	int bad = core_buf_add(&b, "", 0);
	for (; *s && !bad; s++) {
		if (*s == '$' && s[1] >= '0' && s[1] <= '9') {
			const regmatch_t *m = &g[s[1] - '0'];
			if (m->rm_so >= 0)
				bad = core_buf_add(&b, user + m->rm_so, (size_t)(m->rm_eo - m->rm_so));
			s++;
		} else {
			bad = core_buf_add(&b, s, 1);
			if (*s == '$' && s[1] == '$')
				s++;
		}
	}
	json_t *v = bad ? NULL : json_stringn(b.p, b.len);
	core_buf_release(&b);
	return v;
}

/* A deep copy of v with fill_string() applied to every string; NULL on ENOMEM. */
static json_t *fill(const json_t *v, const char *user, const regmatch_t *g)
{
	json_t *out = NULL, *x, *c;
	const char *k;
	size_t i;
	if (json_is_string(v))
		return fill_string(json_string_value(v), user, g);
	if (json_is_array(v)) {
		if (!(out = json_array()))
			return NULL;
		json_array_foreach((json_t *)v, i, x)
			if (!(c = fill(x, user, g)) || json_array_append_new(out, c))
				goto nomem;
		return out;
	}
	if (json_is_object(v)) {
		if (!(out = json_object()))
			return NULL;
		json_object_foreach((json_t *)v, k, x)
			if (!(c = fill(x, user, g)) || json_object_set_new(out, k, c))
				goto nomem;
		return out;
	}
	return json_deep_copy(v);
nomem:
	json_decref(out);
	return NULL;
}

/*
 * Load the script and pick the reply for this request (new reference):
 * the first matching "when", else the N-th positional reply, else the
 * first fallback.  Lines after the reply chosen by "when" are not read.
 */
static enum core_status pick_reply(const char *path, const json_t *messages,
                                   size_t models_before, size_t call, json_t **reply,
                                   struct core_err *e)
{
	struct core_buf file = CORE_BUF_INIT(SCRIPT_MAX_BYTES), user = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st;
	struct core_err fe = { 0 };
	json_t *positional = NULL, *fallback = NULL;
	struct request_facts f = { models_before + count_model_messages(messages),
	                           count_round(messages), call, "" };
	size_t seen = 0, lineno = 0;

	*reply = NULL;
	if ((st = core_buf_read_file(&file, path, &fe))) {
		core_buf_release(&file);
		return core_fail(e, st, "script model: %s", fe.msg);
	}
	if ((st = model_last_user_text(messages, &user)))
		goto nomem;
	f.user = user.p;
	char *p = file.p ? file.p : "", *end = p + file.len;
	while (p < end && !*reply) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *stop = nl ? nl : end;
		lineno++;
		char *q = p;
		while (q < stop && (*q == ' ' || *q == '\t' || *q == '\r'))
			q++;
		if (q < stop && *q != '#') {
			json_t *r = jv_parse(p, (size_t)(stop - p), path, lineno, &fe);
			if (!r) {
				st = core_fail(e, fe.st, "script model: %s", fe.msg);
				goto out;
			}
			if (!json_is_object(r)) {
				json_decref(r);
				st = core_fail(e, CORE_EINVAL, "script model: a reply must be a JSON object (at %s:%zu)",
				               path, lineno);
				goto out;
			}
			const json_t *when = json_object_get(r, "when"), *fb = json_object_get(r, "fallback");
			if ((fb && !json_is_boolean(fb)) || (when && json_is_true(fb))) {
				json_decref(r);
				st = core_fail(e, CORE_EINVAL,
				               "script model: 'fallback' must be true or false, on a reply without 'when' (at %s:%zu)",
				               path, lineno);
				goto out;
			}
			if (when) {
				regmatch_t g[SCRIPT_GROUPS];
				int ok = when_check(when, path, lineno, e);
				if (!ok)
					ok = when_matches(when, &f, g, path, lineno, e);
				if (ok < 0) {
					json_decref(r);
					st = e->st;
					goto out;
				}
				if (ok && !json_object_get(when, "match"))
					*reply = json_incref(r);
				else if (ok && !(*reply = fill(r, user.p, g))) {
					json_decref(r);
					goto nomem;
				}
			} else if (json_is_true(fb)) {
				if (!fallback)
					fallback = json_incref(r);
			} else if (seen++ == f.models && !positional) {
				positional = json_incref(r);
			}
			json_decref(r);
		}
		p = stop + 1;
	}
	if (!*reply && (positional || fallback)) {
		*reply = positional ? positional : fallback;
		if (positional)
			positional = NULL;
		else
			fallback = NULL;
	}
	if (!*reply)
		st = core_fail(e, CORE_EPRECONDITION,
		               "script model: %s has no reply for this request (model messages so far: %zu, last user text: \"%.200s\")",
		               path, f.models, user.p);
	goto out;
nomem:
	st = core_fail(e, CORE_ENOMEM, "out of memory");
out:
	json_decref(positional);
	json_decref(fallback);
	core_buf_release(&file);
	core_buf_release(&user);
	return st;
}

#define CANCEL_POLL_MS 20

static int cancelled(const struct model_stream *stream)
{
	return stream && stream->cancelled && stream->cancelled(stream->ctx);
}

/* Wait delay_ms, polling cancellation. */
static enum core_status pause_for(const struct model_stream *stream, int64_t delay_ms)
{
	int64_t end = core_now_mono_ms() + delay_ms;
	for (;;) {
		if (cancelled(stream))
			return CORE_ECANCELLED;
		int64_t left = end - core_now_mono_ms();
		if (left <= 0)
			return CORE_OK;
		if (left > CANCEL_POLL_MS)
			left = CANCEL_POLL_MS;
		struct timespec ts = { 0, (long)left * 1000000L };
		nanosleep(&ts, NULL);
	}
}

/* Stream one chunk of content (nothing for an empty one, or when the reply
 * does not stream as it is built: live is 0) after the delay. */
static enum core_status emit(const struct model_stream *stream, int live, int64_t delay_ms,
                             json_t *content)
{
	if (!live || !json_array_size(content))
		return cancelled(stream) ? CORE_ECANCELLED : CORE_OK;
	enum core_status pst = pause_for(stream, delay_ms);
	if (pst)
		return pst;
	if (!stream || !stream->chunk)
		return CORE_OK;
	json_t *c = json_pack("{s:s, s:i, s:O}", "role", "model", "index", 0, "content", content);
	if (!c)
		return CORE_ENOMEM;
	enum core_status st = stream->chunk(stream->ctx, c);
	json_decref(c);
	return st;
}

static enum core_status bad(struct core_err *e, const char *path, const char *what)
{
	return core_fail(e, CORE_EINVAL, "script model: %s: %s", path, what);
}

#define BAD_STREAM "'stream' must be true, false or an array of chunks (each an array of parts or a string)"

/*
 * A reply's "stream": absent or true, the message streams as it is built
 * (*live = 1); false, nothing streams; an array, exactly its chunks stream
 * now, after the delay each, and the message is answered without
 * streaming, as a model whose chunks differ from its final message does.
 */
static enum core_status stream_scripted(const json_t *reply, const struct model_stream *stream,
                                        int64_t delay, int *live, const char *path,
                                        struct core_err *e)
{
	const json_t *s = json_object_get(reply, "stream"), *c, *part;
	size_t i, j;
	*live = !s || json_is_true(s);
	if (!s || json_is_boolean(s))
		return CORE_OK;
	if (!json_is_array(s))
		return bad(e, path, BAD_STREAM);
	json_array_foreach(s, i, c) {
		int text = jv_is_string(c);
		if (!text && !json_is_array(c))
			return bad(e, path, BAD_STREAM);
		json_array_foreach(c, j, part)
			if (!json_is_object(part))
				return bad(e, path, BAD_STREAM);
	}
	json_array_foreach(s, i, c) {
		json_t *one = jv_is_string(c) ? json_pack("[{s:O}]", "text", c) : json_incref((json_t *)c);
		if (!one)
			return core_fail(e, CORE_ENOMEM, "out of memory");
		enum core_status st = json_array_size(one) ? emit(stream, 1, delay, one) : CORE_OK;
		json_decref(one);
		if (st)
			return core_fail(e, st, "script model: %s", core_strerror(st));
	}
	return CORE_OK;
}

/* Calls made so far in this process: "when.call" matches on it. */
static atomic_size_t script_calls;

/* One piece of the reply's text (a JSON string), streamed as a chunk and
 * added to text, the whole reply's. */
static enum core_status emit_text(const struct model_stream *stream, int live, int64_t delay_ms,
                                  const json_t *v, struct core_buf *text, struct core_err *e)
{
	json_t *one = json_pack("[{s:O}]", "text", v);
	if (!one || core_buf_add(text, json_string_value(v), json_string_length(v))) {
		json_decref(one);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	enum core_status st = emit(stream, live, delay_ms, one);
	json_decref(one);
	return st ? core_fail(e, st, "script model: %s", core_strerror(st)) : CORE_OK;
}

/* The reply's "delay" (a duration or a number of seconds) in *delay; 0 without. */
static enum core_status reply_delay(const json_t *reply, const char *path, int64_t *delay,
                                    struct core_err *e)
{
	const json_t *d = json_object_get(reply, "delay");
	struct core_err de = { 0 };
	char num[64];
	const char *ds;

	*delay = 0;
	if (!d)
		return CORE_OK;
	ds = json_string_value(d);
	if (jv_is_number(d)) {
		snprintf(num, sizeof num, "%.17g", json_number_value(d));
		ds = num;
	}
	if (!ds || core_parse_duration(ds, delay, &de))
		return bad(e, path, "'delay' must be a duration (\"200ms\", \"1s\") or a number of seconds");
	return CORE_OK;
}

/* Text: streamed chunk by chunk, then one text part onto content. */
static enum core_status reply_text(const json_t *reply, const struct model_stream *stream,
                                   int live, int64_t delay, json_t *content,
                                   const char *path, struct core_err *e)
{
	const json_t *chunks = json_object_get(reply, "chunks"), *t = json_object_get(reply, "text");
	struct core_buf text = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_OK;
	size_t i;
	const json_t *v;

	if (chunks && !json_is_array(chunks))
		return bad(e, path, "'chunks' must be an array of strings");
	if (t && !jv_is_string(t))
		return bad(e, path, "'text' must be a string");
	json_array_foreach(chunks, i, v) {
		if (!jv_is_string(v)) {
			st = bad(e, path, "'chunks' must be an array of strings");
			goto out;
		}
		if ((st = emit_text(stream, live, delay, v, &text, e)))
			goto out;
	}
	if (t && (st = emit_text(stream, live, delay, t, &text, e)))
		goto out;
	if ((chunks || t) && json_array_append_new(content, json_pack("{s:s%}", "text",
	                                                              text.p ? text.p : "", text.len)))
		st = core_fail(e, CORE_ENOMEM, "out of memory");
out:
	core_buf_release(&text);
	return st;
}

/* Tool requests and raw parts: one chunk, as providers send them, then onto content. */
static enum core_status reply_rest(const json_t *reply, const struct model_stream *stream,
                                   int live, int64_t delay, json_t *content,
                                   const char *path, struct core_err *e)
{
	const json_t *reqs = json_object_get(reply, "toolRequests"), *parts = json_object_get(reply, "content");
	json_t *rest = json_array();
	enum core_status st = CORE_OK;
	size_t i;
	const json_t *v;

	if (!rest)
		return core_fail(e, CORE_ENOMEM, "out of memory");
	if ((reqs && !json_is_array(reqs)) || (parts && !json_is_array(parts))) {
		st = bad(e, path, "'toolRequests' and 'content' must be arrays");
		goto out;
	}
	json_array_foreach(parts, i, v)
		json_array_append(rest, (json_t *)v);
	json_array_foreach(reqs, i, v) {
		if (!json_is_object(v) || !jv_is_string(json_object_get(v, "name"))) {
			st = bad(e, path, "each tool request needs a 'name'");
			goto out;
		}
		json_array_append_new(rest, json_pack("{s:O}", "toolRequest", v));
	}
	if ((st = emit(stream, live, delay, rest))) {
		core_fail(e, st, "script model: %s", core_strerror(st));
		goto out;
	}
	json_array_extend(content, rest);
out:
	json_decref(rest);
	return st;
}

static enum core_status script_generate(const char *path, const struct model_request *req,
                                        const struct model_stream *stream,
                                        struct model_response *resp, struct core_err *e)
{
	json_t *reply = NULL, *content = NULL;
	enum core_status st;
	const json_t *v;
	int64_t delay;
	int live;

	if (!*path)
		return core_fail(e, CORE_ENOTFOUND, "model 'script/' names no script file");
	if ((st = pick_reply(path, req->messages, req->models_before, atomic_fetch_add(&script_calls, 1), &reply, e)))
		return st;
	if (!(content = json_array()))
		goto nomem;
	if ((st = reply_delay(reply, path, &delay, e)) ||
	    (st = stream_scripted(reply, stream, delay, &live, path, e)) ||
	    (st = reply_text(reply, stream, live, delay, content, path, e)) ||
	    (st = reply_rest(reply, stream, live, delay, content, path, e)))
		goto out;

	/* A reply that does not stream takes its delay once, as a whole. */
	if (json_is_false(json_object_get(reply, "stream")) && (st = pause_for(stream, delay))) {
		core_fail(e, st, "script model: %s", core_strerror(st));
		goto out;
	}
	const json_t *err = json_object_get(reply, "error");
	if (err) {
		const char *status = json_string_value(json_object_get(err, "status"));
		const char *msg = json_string_value(json_object_get(err, "message"));
		st = core_status_from_name(status ? status : "INTERNAL");
		if (st == CORE_OK)
			st = CORE_EINTERNAL;
		core_fail(e, st, "%s", msg ? msg : "scripted failure");
		goto out;
	}
	const json_t *fr = json_object_get(reply, "finishReason");
	if (fr && (!jv_is_string(fr) || json_string_length(fr) >= sizeof resp->finish_reason)) {
		st = bad(e, path, "'finishReason' must be a short string");
		goto out;
	}
	resp->message = json_pack("{s:s, s:O}", "role", "model", "content", content);
	if (!resp->message)
		goto nomem;
	snprintf(resp->finish_reason, sizeof resp->finish_reason, "%s", fr ? json_string_value(fr) : "stop");
	if ((v = json_object_get(reply, "usage")))
		resp->usage = json_deep_copy(v);
	st = CORE_OK;
	goto out;
nomem:
	st = core_fail(e, CORE_ENOMEM, "out of memory");
out:
	json_decref(reply);
	json_decref(content);
	return st;
}

const struct model_provider model_script = { .prefix = "script", .generate = script_generate };
