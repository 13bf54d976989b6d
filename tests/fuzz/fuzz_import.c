/*
 * fuzz_import.c - import rows (agent-snap import): NDJSON read with
 * core_lines, each line jv_parse()d and checked by store_check_row(), then
 * all written in one transaction with store_put_rows() (store/).
 *
 * Input: the NDJSON rows.
 * Invariants:
 *  - a refused line says why, and a refused import writes nothing;
 *  - an accepted import reads back: each snapshot ID gives the last row
 *    written under it, equal to what was imported (stores persist
 *    verbatim), whatever its state holds;
 *  - deleting the imported sessions removes every row.
 * The store lives in the run's private directory; rows are deleted after
 * each input so it stays small.
 */
#include "fuzz.h"

#include <string.h>
#include <unistd.h>

#include "../../libcore/base/json.h"
#include "../../libcore/base/lines.h"
#include "../../store/store.h"

static struct store *store;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct core_err e = { 0 };
	size_t n = strlen(fuzz_tmpdir()) + 8;
	char *path = malloc(n);
	snprintf(path, n, "%s/store", fuzz_tmpdir());
	if (store_open(path, &store, &e)) {
		fprintf(stderr, "fuzz: %s\n", e.msg);
		abort();
	}
	free(path);
	(void)argc;
	(void)argv;
	return 0;
}

/* The rows of data, as agent-snap import reads them; NULL when refused. */
static json_t *read_rows(const uint8_t *data, size_t size)
{
	int fds[2];
	struct core_lines r;
	struct core_err e = { 0 };
	json_t *rows = json_array();
	char *line;
	size_t len;
	enum core_status st;
	if (pipe(fds))
		abort();
	/* Inputs are a few KiB at most: the pipe holds them whole. */
	if (write(fds[1], data, size) != (ssize_t)size)
		abort();
	close(fds[1]);
	core_lines_init(&r, fds[0], "<stdin>", CORE_LINES_DEFAULT_MAX);
	while ((st = core_lines_next(&r, &line, &len, &e)) == CORE_OK && line) {
		json_t *v = jv_parse(line, len, r.name, r.lineno, &e);
		if (!v) {
			st = e.st;
			break;
		}
		if ((st = store_check_row(v, &e)) != CORE_OK) {
			json_decref(v);
			break;
		}
		json_array_append_new(rows, v);
	}
	core_lines_release(&r);
	close(fds[0]);
	if (st != CORE_OK) {
		FUZZ_CHECK(e.msg[0], "a refused row without a message");
		json_decref(rows);
		return NULL;
	}
	return rows;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct core_err e = { 0 };
	json_t *rows = read_rows(data, size);
	size_t i, n;
	const json_t *row;
	if (!rows)
		return 0;
	n = json_array_size(rows);
	if (!n) {
		json_decref(rows);
		return 0;
	}
	json_t **list = malloc(n * sizeof *list);
	for (i = 0; i < n; i++)
		list[i] = json_array_get(rows, i);
	enum core_status st = store_put_rows(store, list, n, &e);
	free(list);
	if (st != CORE_OK) {
		/* A documented refusal (a row too big, ...): nothing written. */
		FUZZ_CHECK(e.msg[0], "a refused import without a message");
		json_array_foreach(rows, i, row) {
			json_t *got = NULL;
			struct core_err ge = { 0 };
			FUZZ_CHECK(store_get(store, json_string_value(json_object_get(row, "snapshotId")),
			                     0, &got, &ge) == CORE_ENOTFOUND,
			           "a refused import wrote a row: %s", e.msg);
		}
		json_decref(rows);
		return 0;
	}
	json_array_foreach(rows, i, row) {
		const char *id = json_string_value(json_object_get(row, "snapshotId"));
		const json_t *last = row, *later;
		size_t j;
		json_t *got = NULL;
		struct core_err ge = { 0 };
		for (j = i + 1; j < n; j++) {
			later = json_array_get(rows, j);
			if (!strcmp(json_string_value(json_object_get(later, "snapshotId")), id))
				last = later;
		}
		st = store_get(store, id, 0, &got, &ge);
		FUZZ_CHECK(st == CORE_OK, "an imported row does not read back: %s", ge.msg);
		if (!jv_equal(got, last)) {
			char *want = fuzz_dump(last), *have = fuzz_dump(got);
			FUZZ_CHECK(0, "row '%s' reads back changed:\n%s\n%s", id, want, have);
		}
		json_decref(got);
	}
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "%zu rows imported and read back\n", n);
	json_array_foreach(rows, i, row) {
		const char *sid = json_string_value(json_object_get(row, "sessionId"));
		struct core_err de = { 0 };
		st = store_delete_session(store, sid, NULL, NULL, NULL, &de);
		FUZZ_CHECK(st == CORE_OK || st == CORE_ENOTFOUND, "cannot delete: %s", de.msg);
	}
	json_array_foreach(rows, i, row) {
		json_t *got = NULL;
		struct core_err ge = { 0 };
		FUZZ_CHECK(store_get(store, json_string_value(json_object_get(row, "snapshotId")), 0,
		                     &got, &ge) == CORE_ENOTFOUND, "a deleted row still reads");
	}
	json_decref(rows);
	return 0;
}
