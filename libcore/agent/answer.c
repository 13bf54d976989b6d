/* answer.c - a person's answers made into a resume input; see answer.h. */
#include "answer.h"

#include <stdio.h>
#include <string.h>

json_t *answer_pending(const json_t *message)
{
	json_t *out = json_array(), *part;
	size_t i;
	if (!out)
		return NULL;
	json_array_foreach(json_object_get(message, "content"), i, part) {
		const json_t *req = json_object_get(part, "toolRequest");
		if (json_is_object(req) &&
		    json_object_get(json_object_get(part, "metadata"), "interrupt") &&
		    json_array_append(out, part)) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

static const char *req_str(const json_t *part, const char *key)
{
	const char *s = json_string_value(json_object_get(json_object_get(part, "toolRequest"),
	                                                  key));
	return s ? s : "";
}

void answer_describe(const json_t *pending, char *buf, size_t size)
{
	size_t i, len = 0;
	json_t *part;
	if (!size)
		return;
	*buf = 0;
	json_array_foreach(pending, i, part) {
		const char *ref = req_str(part, "ref");
		int n = snprintf(buf + len, size - len, "%s%s%s%s%s", i ? ", " : "",
		                 req_str(part, "name"), *ref ? " (ref " : "", ref, *ref ? ")" : "");
		if (n < 0 || (size_t)n >= size - len)
			return;
		len += (size_t)n;
	}
}

/* The index in pending of the request a answers: its ref, else the one
 * request of that name; -1 with e filled. */
static long find(const json_t *pending, const struct answer *a, struct core_err *e)
{
	long by_name = -1;
	size_t i, named = 0;
	json_t *part;
	json_array_foreach(pending, i, part) {
		if (*req_str(part, "ref") && !strcmp(req_str(part, "ref"), a->ref))
			return (long)i;
		if (!strcmp(req_str(part, "name"), a->ref)) {
			by_name = (long)i;
			named++;
		}
	}
	char what[512];
	answer_describe(pending, what, sizeof what);
	if (named == 1)
		return by_name;
	if (named > 1)
		core_fail(e, CORE_EINVAL, "%s '%s': %zu interrupted requests are of tool '%s'; "
		          "name one by its ref (interrupted: %s)", a->flag, a->ref, named, a->ref,
		          what);
	else
		core_fail(e, CORE_EINVAL, "%s '%s': no interrupted tool request has ref or name "
		          "'%s' (interrupted: %s)", a->flag, a->ref, a->ref, what);
	return -1;
}

/* The restart or respond entry of answer a to the request part. */
static json_t *entry(const json_t *part, const struct answer *a)
{
	const json_t *req = json_object_get(part, "toolRequest");
	json_t *body = json_object(), *out;
	if (!body)
		return NULL;
	json_object_set(body, "name", json_object_get(req, "name"));
	if (json_object_get(req, "ref"))
		json_object_set(body, "ref", json_object_get(req, "ref"));
	if (a->kind == ANSWER_APPROVE) {
		if (json_object_get(req, "input"))
			json_object_set(body, "input", json_object_get(req, "input"));
		return json_pack("{s:o, s:{s:{s:b}}}", "toolRequest", body, "metadata",
		                 "resumed", "approved", 1);
	}
	if (a->kind == ANSWER_DENY) {
		char msg[1200];
		snprintf(msg, sizeof msg, "denied by the user%s%s", a->reason ? ": " : "",
		         a->reason ? a->reason : "");
		out = json_pack("{s:s}", "error", msg);
	} else {
		out = json_incref((json_t *)a->output);
	}
	if (!out || json_object_set_new(body, "output", out)) {
		json_decref(body);
		return NULL;
	}
	return json_pack("{s:o}", "toolResponse", body);
}

enum core_status answer_resume(const json_t *message, const char *sid,
                               const struct answer *a, size_t n, json_t **input,
                               struct core_err *e)
{
	json_t *pending = answer_pending(message);
	json_t *restart = json_array(), *respond = json_array(), *taken = json_object();
	enum core_status st = CORE_OK;
	*input = NULL;
	if (!pending || !restart || !respond || !taken) {
		st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto out;
	}
	if (!json_array_size(pending)) {
		st = core_fail(e, CORE_EPRECONDITION, "session '%s' has no interrupted tool request "
		               "to answer (%s)", sid ? sid : "",
		               message ? "its latest turn did not end interrupted" : "it has no turn");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		long k = find(pending, &a[i], e);
		if (k < 0) {
			st = e->st;
			goto out;
		}
		char key[32];
		snprintf(key, sizeof key, "%ld", k);
		if (json_object_get(taken, key)) {
			const json_t *part = json_array_get(pending, (size_t)k);
			st = core_fail(e, CORE_EINVAL, "%s '%s': %s (ref %s) is answered twice",
			               a[i].flag, a[i].ref, req_str(part, "name"), req_str(part, "ref"));
			goto out;
		}
		json_object_set_new(taken, key, json_true());
		json_t *en = entry(json_array_get(pending, (size_t)k), &a[i]);
		if (!en || json_array_append_new(a[i].kind == ANSWER_APPROVE ? restart : respond, en)) {
			st = core_fail(e, CORE_ENOMEM, "out of memory");
			goto out;
		}
	}
	json_t *resume = json_object();
	if (!resume || (json_array_size(restart) && json_object_set(resume, "restart", restart)) ||
	    (json_array_size(respond) && json_object_set(resume, "respond", respond)) ||
	    !(*input = json_pack("{s:o}", "resume", resume)))
		st = core_fail(e, CORE_ENOMEM, "out of memory");
out:
	json_decref(pending);
	json_decref(restart);
	json_decref(respond);
	json_decref(taken);
	return st;
}
