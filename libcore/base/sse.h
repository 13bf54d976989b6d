/*
 * sse.h - incremental parser for server-sent events and NDJSON streams.
 *
 * Bytes arrive from the network in arbitrary slices (one byte, half a line,
 * many events); sse_feed() takes each slice as it comes and calls the event
 * function once per complete event.  SSE framing follows the WHATWG "event
 * stream interpretation": lines end with CRLF, LF or a lone CR (a CR at the
 * end of one slice and an LF at the start of the next are one line end), a
 * leading BOM is dropped, ':' lines are comments, several data lines join
 * with '\n', "data:x" and "data: x" are the same, an empty line dispatches,
 * "id:" sets the last event id (sse_parser.last_id).
 * Two deliberate deviations (reference/model-protocols.md 6.2): an event
 * still pending at end of input is dispatched by sse_finish(), and a line
 * "error: {...}" (old llama.cpp) makes an event of type "error".
 *
 * In NDJSON mode every non-blank line (trailing CR removed) is one event
 * with a NULL type.
 *
 * Ownership: the parser owns its buffers; sse_release() frees them.  The
 * strings handed to the event function are borrowed for that call only.
 */
#ifndef CORE_SSE_H
#define CORE_SSE_H

#include "buf.h"

enum sse_mode { SSE_MODE_SSE, SSE_MODE_NDJSON };

/*
 * Called per event: type is the "event:" value ("message" when none was
 * given; NULL in NDJSON mode), data[0..n) the joined data (NUL-terminated).
 * A non-OK return stops sse_feed()/sse_finish(), which return it.
 */
typedef enum core_status (*sse_event_fn)(void *ctx, const char *type,
                                         const char *data, size_t n);

struct sse_parser {
	enum sse_mode mode;
	sse_event_fn fn;
	void *ctx;
	struct core_buf line;   /* the current, unfinished line */
	struct core_buf data;   /* data of the pending event */
	struct core_buf type;   /* event type of the pending event */
	int cr;                 /* last byte seen was a CR */
	int started;            /* past the first bytes (BOM check done) */
	int has_data;           /* the pending event has at least one data line */
	size_t events;          /* events dispatched so far */
	/* The last "id:" field seen (the stream's last event id, to resume it
	 * with Last-Event-ID); id_set 0 when none was, or it was over 255
	 * bytes.  Set when its event is dispatched.  sse_reset() forgets it. */
	char last_id[256];
	int id_set;
	char id_buf[256];       /* the id field seen, given at dispatch */
	int id_next;            /* 1: id_buf, -1: an id too long, 0: none */
};

/* max bounds one line and one event's data (CORE_ETOOBIG past it). */
void sse_init(struct sse_parser *p, enum sse_mode mode, size_t max,
              sse_event_fn fn, void *ctx);
/* Forget any partial input (a new response starts); keeps the memory. */
void sse_reset(struct sse_parser *p);
void sse_release(struct sse_parser *p);

/* Feed buf[0..n).  Errors: what the event function returned,
 * CORE_ETOOBIG (message in e), CORE_ENOMEM. */
enum core_status sse_feed(struct sse_parser *p, const char *buf, size_t n,
                          struct core_err *e);
/* End of input: finish a last unterminated line and dispatch a pending
 * event. */
enum core_status sse_finish(struct sse_parser *p, struct core_err *e);

#endif
