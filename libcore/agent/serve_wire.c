/* serve_wire.c - agent-serve's answers: Genkit's envelopes and HTTP codes,
 * the access log's IDs, a request's trace headers, a request's release
 * (serve_int.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_int.h"
#include "../base/json.h"

/* Genkit's status package: the canonical names and their HTTP codes. */
static const struct { const char *name; int code; } http_codes[] = {
	{ "OK", 200 }, { "CANCELLED", 499 }, { "UNKNOWN", 500 },
	{ "INVALID_ARGUMENT", 400 }, { "DEADLINE_EXCEEDED", 504 }, { "NOT_FOUND", 404 },
	{ "ALREADY_EXISTS", 409 }, { "PERMISSION_DENIED", 403 }, { "UNAUTHENTICATED", 401 },
	{ "RESOURCE_EXHAUSTED", 429 }, { "FAILED_PRECONDITION", 400 }, { "ABORTED", 409 },
	{ "OUT_OF_RANGE", 400 }, { "UNIMPLEMENTED", 501 }, { "INTERNAL", 500 },
	{ "UNAVAILABLE", 503 }, { "DATA_LOSS", 500 },
};

int serve_http_code(const char *status_name)
{
	for (size_t i = 0; status_name && i < sizeof http_codes / sizeof *http_codes; i++)
		if (!strcmp(http_codes[i].name, status_name))
			return http_codes[i].code;
	return 500;
}

void serve_log(struct serve *s, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	if (!s->cfg.log)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	s->cfg.log(s->cfg.log_ctx, line);
}

/* ---- answers ---- */

enum MHD_Result serve_answer(struct serve_req *r, int code, const char *type,
                             const char *body, size_t len)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	if (type)
		MHD_add_response_header(resp, "Content-Type", type);
	if (code == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
	if (code == 503)
		MHD_add_response_header(resp, "Retry-After", "1");
	r->code = code;
	r->answered = 1;
	if (r->defer && !r->late) {
		r->late = resp;
		r->late_code = (unsigned)code;
		return MHD_YES;
	}
	ret = MHD_queue_response(r->conn, (unsigned)code, resp);
	MHD_destroy_response(resp);
	return ret;
}

enum MHD_Result serve_answer_late(struct serve_req *r)
{
	enum MHD_Result ret = MHD_YES;
	if (r->late) {
		ret = MHD_queue_response(r->conn, r->late_code, r->late);
		MHD_destroy_response(r->late);
		r->late = NULL;
	}
	r->defer = 0;
	return ret;
}

/* {"status", "message"}: the body of Genkit's HTTP errors (express's
 * getCallableJSON), with HTTP code (0: the status's). */
enum MHD_Result serve_error_code(struct serve_req *r, int code, const char *status,
                                 const char *fmt, ...)
{
	char msg[1024];
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *v;
	enum MHD_Result ret = MHD_NO;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	v = json_pack("{s:s,s:s}", "status", status, "message", msg);
	if (v && jv_dump(v, &b) == CORE_OK)
		ret = serve_answer(r, code ? code : serve_http_code(status), "application/json",
		                   b.p, b.len);
	json_decref(v);
	core_buf_release(&b);
	return ret;
}

/* {"result": v} with 200 (v consumed). */
enum MHD_Result serve_result(struct serve_req *r, json_t *v)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *env = json_pack("{s:o}", "result", v ? v : json_null());
	enum MHD_Result ret = MHD_NO;
	if (env && jv_dump(env, &b) == CORE_OK)
		ret = serve_answer(r, 200, "application/json", b.p, b.len);
	json_decref(env);
	core_buf_release(&b);
	return ret;
}

/* Remember the IDs an answer names, for the access log. */
void serve_note_ids(struct serve_req *r, const json_t *v)
{
	const json_t *id;
	if ((id = json_object_get(v, "sessionId")) && json_is_string(id))
		snprintf(r->session, sizeof r->session, "%s", json_string_value(id));
	if ((id = json_object_get(v, "snapshotId")) && json_is_string(id))
		snprintf(r->snapshot, sizeof r->snapshot, "%s", json_string_value(id));
}

const char *serve_trace_header(struct MHD_Connection *conn, const char *name)
{
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
	int ok = v && *v && strlen(v) <= 512;
	for (const char *p = v; ok && *p; p++)
		ok = *p > ' ' && *p < 0x7f;
	return ok ? v : NULL;
}

void serve_slot_free(struct serve_req *r)
{
	if (r->turn_slot)
		atomic_fetch_sub(&r->s->turns, 1);
	r->turn_slot = 0;
}

void serve_req_release(struct serve_req *r)
{
	if (atomic_fetch_sub(&r->refs, 1) != 1)
		return;
	serve_slot_free(r);
	if (r->late)
		MHD_destroy_response(r->late);
	core_buf_release(&r->body);
	free(r->path);
	free(r->context);
	atomic_fetch_sub(&r->s->active, 1);
	free(r);
}

