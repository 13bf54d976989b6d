/*
 * pq.h - libpq, loaded when a PostgreSQL store is opened (pq_load()) and
 * never before.
 *
 * Linked in, libpq brings 22 more shared objects into every process (its
 * TLS, Kerberos and LDAP libraries): about 13 million instructions of
 * symbol resolution and start-up code, most of the cost of a whole
 * agent-run with the embedded store, which never uses it.  So the binaries
 * do not link it: the backend opens "libpq.so.5" with dlopen() on its first
 * open and calls libpq through the table below.  The names below are
 * macros for the table's entries, so the backend's code reads as plain
 * libpq; include this header instead of <libpq-fe.h> (pg.h does).
 *
 * Every pointer is set once pq_load() returned CORE_OK, and stays set for
 * the process's life (the library is never closed).
 */
#ifndef STORE_PG_PQ_H
#define STORE_PG_PQ_H

#include <libpq-fe.h>
#include <stddef.h>

#include "../../libcore/base/status.h"

/* The functions agentkit calls, each X(name). */
#define PQ_FUNCTIONS(X) \
	X(PQclear) X(PQconnectdbParams) X(PQconninfoFree) X(PQconninfoParse) \
	X(PQconsumeInput) X(PQenterPipelineMode) X(PQerrorMessage) \
	X(PQexitPipelineMode) X(PQfinish) X(PQflush) X(PQfreemem) X(PQgetResult) \
	X(PQgetisnull) X(PQgetlength) X(PQgetvalue) X(PQisBusy) X(PQnotifies) X(PQntuples) X(PQparameterStatus) \
	X(PQpipelineSync) X(PQreset) X(PQresultErrorField) X(PQresultStatus) \
	X(PQsendPrepare) X(PQsendQuery) X(PQsendQueryParams) \
	X(PQsendQueryPrepared) X(PQsetNoticeProcessor) X(PQsetnonblocking) \
	X(PQsocket) X(PQstatus) X(PQtransactionStatus)

#define PQ_ENTRY(f) __typeof__(f) *f;
struct pq_api {
	PQ_FUNCTIONS(PQ_ENTRY)
	/* OpenSSL's SHA256_Init(), SHA256_Update() and SHA256_Final() (c
	 * is OpenSSL's SHA256_CTX, 112 bytes; PQ_SHA256_CTX has room for
	 * it), from the TLS library libpq brings along; all NULL unless all
	 * three are there (a libpq without OpenSSL).  With the CPU's SHA
	 * instructions they hash a 1.5 KB message in 1.5 us, libmd's portable
	 * code in 9.5-13.7 us: a writer hashes every new message (ops.c
	 * chain_new()).  Not the one-shot SHA256(): OpenSSL 3 first loads its
	 * configuration and providers for it, 5.3 million instructions. */
	int (*sha256_init)(void *c);
	int (*sha256_update)(void *c, const void *d, size_t n);
	int (*sha256_final)(unsigned char *md, void *c);
};
#undef PQ_ENTRY
#define PQ_SHA256_CTX 256

extern struct pq_api pq_api;

/*
 * Load libpq (once per process; later calls return the first outcome).
 * CORE_ESYS with the loader's reason when the library or one of its
 * functions is missing: "cannot load libpq.so.5 (PostgreSQL's client
 * library, Debian's libpq5): REASON".
 */
enum core_status pq_load(struct core_err *e);

#ifndef PQ_LOADER              /* pq.c names the table's entries itself */
#define PQclear (pq_api.PQclear)
#define PQconnectdbParams (pq_api.PQconnectdbParams)
#define PQconninfoFree (pq_api.PQconninfoFree)
#define PQconninfoParse (pq_api.PQconninfoParse)
#define PQconsumeInput (pq_api.PQconsumeInput)
#define PQenterPipelineMode (pq_api.PQenterPipelineMode)
#define PQerrorMessage (pq_api.PQerrorMessage)
#define PQexitPipelineMode (pq_api.PQexitPipelineMode)
#define PQfinish (pq_api.PQfinish)
#define PQflush (pq_api.PQflush)
#define PQfreemem (pq_api.PQfreemem)
#define PQgetResult (pq_api.PQgetResult)
#define PQgetisnull (pq_api.PQgetisnull)
#define PQgetlength (pq_api.PQgetlength)
#define PQgetvalue (pq_api.PQgetvalue)
#define PQisBusy (pq_api.PQisBusy)
#define PQnotifies (pq_api.PQnotifies)
#define PQntuples (pq_api.PQntuples)
#define PQparameterStatus (pq_api.PQparameterStatus)
#define PQpipelineSync (pq_api.PQpipelineSync)
#define PQreset (pq_api.PQreset)
#define PQresultErrorField (pq_api.PQresultErrorField)
#define PQresultStatus (pq_api.PQresultStatus)
#define PQsendPrepare (pq_api.PQsendPrepare)
#define PQsendQuery (pq_api.PQsendQuery)
#define PQsendQueryParams (pq_api.PQsendQueryParams)
#define PQsendQueryPrepared (pq_api.PQsendQueryPrepared)
#define PQsetNoticeProcessor (pq_api.PQsetNoticeProcessor)
#define PQsetnonblocking (pq_api.PQsetnonblocking)
#define PQsocket (pq_api.PQsocket)
#define PQstatus (pq_api.PQstatus)
#define PQtransactionStatus (pq_api.PQtransactionStatus)
#endif

#endif
