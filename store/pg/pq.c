/* pq.c - libpq by dlopen(), on a PostgreSQL store's first open; see pq.h. */
#define PQ_LOADER
#include "pq.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

struct pq_api pq_api;

#define PQ_LIBRARY "libpq.so.5"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct core_err failure;

static void load(void)
{
	/* RTLD_LOCAL: libpq's symbols (and its TLS library's) stay out of the
	 * process's namespace.  RTLD_LAZY: the calls of libpq's dependencies
	 * that are not linked to bind at load (Kerberos, GSSAPI) bind when
	 * first made, as in a process linked with libpq: 1.8 of the 12.6
	 * million instructions of the load (docs/store.md); a missing
	 * function of the table below still fails here, at its dlsym(). */
	void *h = dlopen(PQ_LIBRARY, RTLD_LAZY | RTLD_LOCAL);
	const char *why;
	if (!h) {
		why = dlerror();
		core_fail(&failure, CORE_ESYS, "cannot load " PQ_LIBRARY " (PostgreSQL's client "
		          "library, Debian's libpq5): %s", why ? why : "unknown reason");
		return;
	}
	/* dlsym() returns a function as void *: POSIX guarantees the round
	 * trip, and writing through a void ** is the form dlsym(3) shows. */
#define PQ_LOAD(f)                                                                       \
	if (!failure.st && !(*(void **)&pq_api.f = dlsym(h, #f)))                        \
		core_fail(&failure, CORE_ESYS, "cannot load " PQ_LIBRARY ": no %s in it", #f);
	PQ_FUNCTIONS(PQ_LOAD)
#undef PQ_LOAD
	/* dlsym() on a handle searches its dependencies too */
	*(void **)&pq_api.sha256_init = dlsym(h, "SHA256_Init");
	*(void **)&pq_api.sha256_update = dlsym(h, "SHA256_Update");
	*(void **)&pq_api.sha256_final = dlsym(h, "SHA256_Final");
	if (!pq_api.sha256_init || !pq_api.sha256_update || !pq_api.sha256_final)
		pq_api.sha256_init = NULL, pq_api.sha256_update = NULL, pq_api.sha256_final = NULL;
}

enum core_status pq_load(struct core_err *e)
{
	pthread_once(&once, load);
	if (failure.st && e)
		*e = failure;
	return failure.st;
}
