/* sse.c - server-sent events and NDJSON framing, fed in arbitrary slices. */
#include "sse.h"

#include <string.h>

void sse_init(struct sse_parser *p, enum sse_mode mode, size_t max,
              sse_event_fn fn, void *ctx)
{
	memset(p, 0, sizeof *p);
	p->mode = mode;
	p->fn = fn;
	p->ctx = ctx;
	core_buf_init(&p->line, max);
	core_buf_init(&p->data, max);
	core_buf_init(&p->type, 256);
}

void sse_reset(struct sse_parser *p)
{
	core_buf_reset(&p->line);
	core_buf_reset(&p->data);
	core_buf_reset(&p->type);
	p->cr = p->started = p->has_data = 0;
	p->events = 0;
	p->id_set = p->id_next = 0;
	p->last_id[0] = p->id_buf[0] = 0;
}

void sse_release(struct sse_parser *p)
{
	core_buf_release(&p->line);
	core_buf_release(&p->data);
	core_buf_release(&p->type);
}

static enum core_status toobig(struct sse_parser *p, enum core_status st,
                               struct core_err *e)
{
	if (st == CORE_ETOOBIG)
		return core_fail(e, st, "stream event longer than %zu bytes",
		                 p->line.max);
	return core_fail(e, st, "stream parser: %s", core_strerror(st));
}

static enum core_status dispatch(struct sse_parser *p)
{
	enum core_status st = CORE_OK;
	if (p->id_next) {
		p->id_set = p->id_next > 0;
		memcpy(p->last_id, p->id_buf, sizeof p->last_id);
	}
	if (p->has_data) {
		/* The data buffer holds "line\n" per data line; drop the last \n. */
		size_t n = p->data.len ? p->data.len - 1 : 0;
		if (p->data.p)
			p->data.p[n] = 0;
		p->events++;
		st = p->fn(p->ctx, p->type.len ? p->type.p : "message",
		           p->data.p ? p->data.p : "", n);
	}
	core_buf_reset(&p->data);
	core_buf_reset(&p->type);
	p->has_data = 0;
	return st;
}

/* One complete SSE line s[0..n). */
static enum core_status sse_line(struct sse_parser *p, const char *s, size_t n,
                                 struct core_err *e)
{
	const char *colon, *val;
	size_t flen, vlen;
	enum core_status st;
	if (n == 0)
		return dispatch(p);
	if (s[0] == ':')
		return CORE_OK;
	colon = memchr(s, ':', n);
	flen = colon ? (size_t)(colon - s) : n;
	val = colon ? colon + 1 : s + n;
	vlen = (size_t)(s + n - val);
	if (vlen && val[0] == ' ')
		val++, vlen--;
	if (flen == 4 && !memcmp(s, "data", 4)) {
		if ((st = core_buf_add(&p->data, val, vlen)) ||
		    (st = core_buf_addc(&p->data, '\n')))
			return toobig(p, st, e);
		p->has_data = 1;
	} else if (flen == 5 && !memcmp(s, "event", 5)) {
		core_buf_reset(&p->type);
		if ((st = core_buf_add(&p->type, val, vlen)))
			return toobig(p, st, e);
	} else if (flen == 5 && !memcmp(s, "error", 5)) {
		/* Old llama.cpp: "error: {json}" as a field of its own. */
		core_buf_reset(&p->type);
		core_buf_reset(&p->data);
		if ((st = core_buf_adds(&p->type, "error")) ||
		    (st = core_buf_add(&p->data, val, vlen)) ||
		    (st = core_buf_addc(&p->data, '\n')))
			return toobig(p, st, e);
		p->has_data = 1;
	} else if (flen == 2 && !memcmp(s, "id", 2) && !memchr(val, 0, vlen)) {
		/* The last event id buffer (WHATWG), the stream's last event
		 * id once the event is dispatched; one too long to keep is
		 * forgotten, not cut. */
		p->id_next = vlen < sizeof p->id_buf ? 1 : -1;
		memcpy(p->id_buf, val, p->id_next > 0 ? vlen : 0);
		p->id_buf[p->id_next > 0 ? vlen : 0] = 0;
	}
	/* retry and unknown fields: nothing this client needs. */
	return CORE_OK;
}

static enum core_status nd_line(struct sse_parser *p, const char *s, size_t n,
                               struct core_err *e)
{
	size_t i;
	enum core_status st;
	for (i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t')
			break;
	if (i == n)
		return CORE_OK;
	p->events++;
	if (s == p->line.p)
		return p->fn(p->ctx, NULL, s, n);
	/* A line whole in the caller's slice ends in its '\n', not a NUL: copy
	 * it so the event function gets the NUL-terminated data sse.h
	 * promises (one memcpy per line; parsing the line costs far more). */
	if ((st = core_buf_add(&p->line, s, n)))
		return toobig(p, st, e);
	st = p->fn(p->ctx, NULL, p->line.p, n);
	core_buf_reset(&p->line);
	return st;
}

static enum core_status one_line(struct sse_parser *p, const char *s, size_t n,
                                 struct core_err *e)
{
	return p->mode == SSE_MODE_SSE ? sse_line(p, s, n, e) : nd_line(p, s, n, e);
}

enum core_status sse_feed(struct sse_parser *p, const char *buf, size_t n,
                          struct core_err *e)
{
	const char *end = buf + n;
	enum core_status st;
	if (!p->started && n) {
		/* A BOM may itself arrive split; wait for three bytes. */
		static const char bom[] = "\xEF\xBB\xBF";
		size_t have = p->line.len;
		if (have + n < 3 && !memcmp(buf, bom + have, n) &&
		    (!have || !memcmp(p->line.p, bom, have)))
			return core_buf_add(&p->line, buf, n) ? toobig(p, CORE_ETOOBIG, e) : CORE_OK;
		if ((st = core_buf_add(&p->line, buf, n)))
			return toobig(p, st, e);
		p->started = 1;
		if (p->line.len >= 3 && !memcmp(p->line.p, bom, 3)) {
			memmove(p->line.p, p->line.p + 3, p->line.len - 3);
			p->line.len -= 3;
			p->line.p[p->line.len] = 0;
		}
		/* Re-scan what is buffered as if it had just arrived. */
		{
			struct core_buf tmp = p->line;
			core_buf_init(&p->line, tmp.max);
			st = sse_feed(p, tmp.p, tmp.len, e);
			core_buf_release(&tmp);
			return st;
		}
	}
	while (buf < end) {
		const char *q;
		if (p->cr) {
			p->cr = 0;
			if (*buf == '\n') {
				buf++;
				continue;
			}
		}
		/* Find the next CR or LF. */
		for (q = buf; q < end && *q != '\n' && *q != '\r'; q++)
			;
		if (q == end) {
			if ((st = core_buf_add(&p->line, buf, (size_t)(end - buf))))
				return toobig(p, st, e);
			break;
		}
		if (*q == '\r')
			p->cr = 1;
		if (p->line.len) {
			if ((st = core_buf_add(&p->line, buf, (size_t)(q - buf))))
				return toobig(p, st, e);
			st = one_line(p, p->line.p, p->line.len, e);
			core_buf_reset(&p->line);
		} else {
			st = one_line(p, buf, (size_t)(q - buf), e);
		}
		if (st)
			return st;
		buf = q + 1;
	}
	return CORE_OK;
}

enum core_status sse_finish(struct sse_parser *p, struct core_err *e)
{
	enum core_status st;
	if (p->line.len) {
		st = one_line(p, p->line.p, p->line.len, e);
		core_buf_reset(&p->line);
		if (st)
			return st;
	}
	if (p->mode == SSE_MODE_SSE)
		return dispatch(p);
	return CORE_OK;
}
