/*
 * open.c - the PostgreSQL backend's handle: opened from a location
 * (libpq loaded, the settings read, connected, the schema checked) and
 * closed, also in a child that inherited it.  See pg.h.
 */
#include "pg.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../../libcore/base/http.h"
#include "../../libcore/base/util.h"

enum core_status pg_open(const char *location, unsigned flags, struct store **out,
                         struct core_err *e)
{
	struct pg_store *s;
	char *conninfo;
	const char *x;
	enum core_status st;
	size_t i;
	struct core_err le = { 0 };
	if ((st = pq_load(&le)) != CORE_OK) {
		char where[sizeof s->where];
		core_url_redact(location, where, sizeof where);
		return core_fail(e, st, "cannot open the store at '%s': %s", where, le.msg);
	}
	s = calloc(1, sizeof *s);
	conninfo = strdup(strcasecmp(location, "pg:") ? location : "");
	if (!s || !conninfo) {
		free(s);
		free(conninfo);
		return core_fail(e, CORE_ENOMEM, "open the store: out of memory");
	}
	/* store.c matched the scheme without case; libpq knows it lower case */
	for (i = 0; conninfo[i] && conninfo[i] != ':'; i++)
		conninfo[i] = (char)tolower((unsigned char)conninfo[i]);
	core_url_redact(location, s->where, sizeof s->where);
	s->verify = (x = getenv("AGENTKIT_STORE_VERIFY")) && *x && strcmp(x, "0");
	if ((st = core_duration_setting(NULL, NULL, "AGENTKIT_STORE_LOCK_TIMEOUT",
	                                STORE_LOCK_TIMEOUT_MS, &s->lock_ms, e)) != CORE_OK ||
	    (st = pg_connect(s, conninfo, e)) != CORE_OK ||
	    (st = pg_schema(s, flags, e)) != CORE_OK) {
		s->conninfo = conninfo;
		s->head.pid = getpid();
		pg_close(&s->head);
		return st;
	}
	s->conninfo = conninfo;
	*out = &s->head;
	return CORE_OK;
}

void pg_close(struct store *h)
{
	struct pg_store *s = pg_store(h);
	int i;
	if (s->conn && h->pid != getpid()) {
		/* inherited across fork(): the session is the parent's, so
		 * PQfinish() must not say goodbye on its socket; this process's
		 * copy of the descriptor is pointed at /dev/null first */
		int fd = PQsocket(s->conn), nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (fd >= 0 && nul >= 0)
			dup2(nul, fd);
		if (nul >= 0)
			close(nul);
	}
	PQfinish(s->conn);
	for (i = 0; i < PG_NPREP; i++)
		free(s->prep[i].sql);
	json_decref(s->mc.msgs);
	free(s->secret);
	if (s->conninfo)
		explicit_bzero(s->conninfo, strlen(s->conninfo));
	free(s->conninfo);
	free(s);
}
