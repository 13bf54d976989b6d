/* jpatch-apply.c - apply JSON Patches to a document, once or along an
 * NDJSON stream of patches. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../libcore/base/jfast.h"
#include "../libcore/base/jpatch.h"
#include "../libcore/base/json.h"
#include "../libcore/base/lines.h"
#include "../libcore/base/util.h"

enum {
	OPT_LENIENT = 'l',
	OPT_STREAM = 's',
	OPT_FINAL = CLI_LONG + 1,
	OPT_MAX_RECORD,
};

static const struct cli_opt opts[] = {
	{ OPT_LENIENT, "lenient", NULL,
	  "apply as Genkit's ApplyPatch: create missing containers, ignore "
	  "removals of missing members; in --stream mode skip a bad patch "
	  "with a warning" },
	{ OPT_STREAM, "stream", NULL,
	  "read NDJSON patches on stdin and print the document after each "
	  "one (starting from INITIAL, default null)" },
	{ OPT_FINAL, "final", NULL,
	  "with --stream: print only the last document" },
	{ OPT_MAX_RECORD, "max-record", "SIZE",
	  "refuse a document or NDJSON record larger than SIZE (default 64M "
	  "per record, 1G per document); memory peaks near 5 times the "
	  "input, so this also caps memory" },
	{ 0 }
};

static const struct cli_exitcode exits[] = {
	{ 0, "success" },
	{ 1, "a 'test' operation failed" },
	{ 4, "an input file does not exist" },
	{ 100, "usage error" },
	{ 101, "malformed input: invalid JSON, a malformed patch, or (strict) "
	       "a patch that does not apply" },
	{ 111, "system failure (cannot read input, cannot write output)" },
	{ -1, NULL }
};

static const struct cli_prog prog = {
	.name = "jpatch-apply",
	.purpose = "apply JSON Patches (RFC 6902) to a JSON document",
	.synopsis = "[OPTION]... DOC PATCH\n[OPTION]... --stream [INITIAL]",
	.description =
	"Applies the JSON Patch in the file PATCH to the document in the file "
	"DOC ('-' reads one of them from stdin) and prints the result as one "
	"line.  The patch is all or nothing: on any error nothing is printed.  "
	"Operations are numbered from 0, as a JSON Pointer into the patch "
	"would number them.\n\n"
	"By default the rules are RFC 6902 and RFC 6901 to the letter: the "
	"six operations, '~0' and '~1' escapes, '-' for the end of an array, "
	"array indexes without leading zeros and within range, 'test' by deep "
	"equality with numbers compared by value.  --lenient applies Genkit's "
	"rules instead (a missing container is created as an object, removing "
	"or replacing a missing member is a no-op, an index out of range is "
	"ignored) with Genkit's error messages.\n\n"
	"With --stream, stdin is NDJSON: each line is a patch (an array) or an "
	"agent-run chunk; a chunk with \"customPatch\" is applied, any other "
	"chunk (modelChunk, turnEnd, output...) is skipped.  The document after "
	"each applied patch is printed, and flushed before jpatch-apply waits for "
	"more input (with --final only the last one, at the end).  A bad line stops the stream with an error "
	"naming it; with --lenient it is skipped with a warning and the last "
	"good document stays, as Genkit's AgentConnection does.",
	.opts = opts,
	.examples =
	"$ jpatch-apply doc.json patch.json\n"
	"  print doc.json with patch.json applied\n"
	"$ agent-run -m hi my-agent | jpatch-apply --stream --lenient\n"
	"  follow an agent's custom state live\n"
	"$ jpatch-apply --stream --final state.json <patches.ndjson\n"
	"  apply a log of patches and print the end state",
	.exits = exits,
};

struct opts {
	unsigned flags;
	int stream, final;
	size_t max_record, max_doc;
};

static const char *display(const char *path)
{
	return strcmp(path, "-") ? path : "<stdin>";
}

static enum core_status write_fail(enum core_status st, struct core_err *e)
{
	return core_fail(e, st, "cannot write the document: %s",
	                 st == CORE_EINVAL ? "nested too deep" : core_strerror(st));
}

static enum core_status write_doc(const struct jn *doc, struct core_buf *out,
                                  struct core_err *e)
{
	enum core_status st;
	core_buf_reset(out);
	if ((st = jn_dump(doc, out)))
		return write_fail(st, e);
	return cli_write_line(out, e);
}

/* The live document again: what did not change is the last line's bytes. */
static enum core_status write_again(struct jn *doc, struct jn_redump *r,
                                    struct core_err *e)
{
	enum core_status st;
	if ((st = jn_redump(r, doc)))
		return write_fail(st, e);
	return cli_write_line(&r->line, e);
}

static enum core_status run_files(const struct opts *o, const char *docpath,
                                  const char *patchpath, struct core_err *e)
{
	struct jn_doc doc = JN_DOC_INIT, patch = JN_DOC_INIT;
	struct core_buf out = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st;

	if (!(st = jn_load_file(docpath, o->max_doc, &doc, e))
	    && !(st = jn_load_file(patchpath, o->max_doc, &patch, e))) {
		/* The document is ours and dropped on error: patch it in place. */
		st = jpatch_apply_jn(&doc.root, &patch.root,
		                     o->flags | JPATCH_INPLACE, e);
		jn_doc_release(&patch);
		if (st == CORE_EINVAL || st == CORE_FAILED) {
			size_t n = strlen(e->msg);
			snprintf(e->msg + n, sizeof e->msg - n, " (at %s)",
			         display(patchpath));
		}
		if (!st)
			st = write_doc(&doc.root, &out, e);
	}
	jn_drop_at_exit(&doc);
	core_buf_release(&out);
	return st;
}

/*
 * The patch a stream record carries: the record itself when it is an
 * array, its "customPatch" when it is an agent-run chunk with one.  NULL
 * (and CORE_OK) for any other agent-run chunk: nothing to apply.
 */
static enum core_status record_patch(const struct jn *rec,
                                     const struct jn **patch,
                                     struct core_err *e)
{
	*patch = NULL;
	if (rec->t == JN_ARR) {
		*patch = rec;
		return CORE_OK;
	}
	if (rec->t == JN_OBJ) {
		*patch = jn_get(rec, "customPatch", strlen("customPatch"));
		return CORE_OK;
	}
	return core_fail(e, CORE_EINVAL,
	                 "a record must be a patch (an array) or an agent-run "
	                 "chunk (an object), not %s", jn_type_name(rec));
}

static void add_where(struct core_err *e, const struct core_lines *r)
{
	size_t n = strlen(e->msg);
	if (!strstr(e->msg, "(at "))
		snprintf(e->msg + n, sizeof e->msg - n, " (at %s:%zu)", r->name,
		         r->lineno);
}

static enum core_status run_stream(const struct opts *o, const char *initial,
                                   struct core_err *e)
{
	struct core_lines r;
	struct jn_redump live = JN_REDUMP_INIT;
	struct jn_doc doc = JN_DOC_INIT;
	struct jn rec;
	enum core_status st = CORE_OK;
	int lenient = (o->flags & JPATCH_LENIENT) != 0;
	char *line;
	size_t len;

	core_lines_init(&r, 0, "<stdin>", o->max_record);
	if (initial)
		st = jn_load_file(initial, o->max_doc, &doc, e);
	while (!st && !(st = cli_flush_idle(&r, e))
	       && !(st = core_lines_next(&r, &line, &len, e)) && line) {
		const struct jn *patch = NULL;
		struct core_err pe = { 0 };
		enum core_status ps;

		/* The record borrows the line: the patch copies what it keeps. */
		ps = jn_parse(line, len, r.name, r.lineno, &rec, &pe);
		if (!ps)
			ps = record_patch(&rec, &patch, &pe);
		/* Strict: the document is dropped on error, so patch in place.
		 * Lenient: an atomic patch keeps the last good document. */
		if (!ps && patch)
			ps = jpatch_apply_jn(&doc.root, patch,
			                     o->flags | (lenient ? 0 : JPATCH_INPLACE), &pe);
		jn_release(&rec);
		if (ps == CORE_EINVAL || ps == CORE_FAILED) {
			add_where(&pe, &r);
			if (lenient) {
				cli_warn("%s; patch skipped", pe.msg);
				continue;
			}
		}
		if (ps) {
			*e = pe;
			st = ps;
			break;
		}
		if (patch && !o->final)
			st = write_again(&doc.root, &live, e);
	}
	if (!st && o->final)
		st = write_again(&doc.root, &live, e);
	jn_doc_release(&doc);
	core_lines_release(&r);
	jn_redump_release(&live);
	return st;
}

int main(int argc, char **argv)
{
	struct opts o = { .max_record = CORE_LINES_DEFAULT_MAX,
	                  .max_doc = (size_t)1 << 30 };
	struct core_err e = { 0 };
	enum core_status st;
	const char *arg;
	int c;

	cli_start(&prog);
	jv_fast_alloc();
	while ((c = cli_next(argc, argv, &arg)) != -1) {
		switch (c) {
		case OPT_LENIENT:
			o.flags |= JPATCH_LENIENT;
			break;
		case OPT_STREAM:
			o.stream = 1;
			break;
		case OPT_FINAL:
			o.final = 1;
			break;
		case OPT_MAX_RECORD:
			if (cli_size("--max-record", arg, &o.max_record))
				return cli_finish(CORE_EUSAGE);
			o.max_doc = o.max_record;
			break;
		}
	}
	argc -= optind;
	argv += optind;
	if (o.stream) {
		if (argc > 1)
			return cli_finish(cli_usage("--stream takes at most one INITIAL document"));
		if (argc && !strcmp(argv[0], "-"))
			return cli_finish(cli_usage("with --stream the patches are on stdin; "
			                            "INITIAL must be a file"));
		st = run_stream(&o, argc ? argv[0] : NULL, &e);
	} else {
		if (o.final)
			return cli_finish(cli_usage("--final needs --stream"));
		if (argc != 2)
			return cli_finish(cli_usage("expected DOC and PATCH, got %d operand%s",
			                            argc, argc == 1 ? "" : "s"));
		if (!strcmp(argv[0], "-") && !strcmp(argv[1], "-"))
			return cli_finish(cli_usage("DOC and PATCH cannot both be stdin"));
		st = run_files(&o, argv[0], argv[1], &e);
	}
	if (st)
		return cli_finish(cli_report(&e));
	return cli_finish(CORE_OK);
}
