/* jpatch-diff.c - print the JSON Patch between two documents, or between
 * consecutive documents of an NDJSON stream. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../libcore/base/jfast.h"
#include "../libcore/base/jpatch.h"
#include "../libcore/base/json.h"
#include "../libcore/base/lines.h"
#include "../libcore/base/util.h"

enum {
	OPT_MINIMAL = 'm',
	OPT_STREAM = 's',
	OPT_FROM = 'f',
	OPT_EXIT_CODE = 'e',
	OPT_MAX_RECORD = CLI_LONG + 1,
};

static const struct cli_opt opts[] = {
	{ OPT_MINIMAL, "minimal", NULL,
	  "align arrays by content (inserting one element is one add) "
	  "instead of Genkit's by-index rule" },
	{ OPT_STREAM, "stream", NULL,
	  "read NDJSON documents (stdin or FILE) and print one patch per "
	  "consecutive pair" },
	{ OPT_FROM, "from", "FILE",
	  "with --stream: the document the first record is compared with "
	  "(default null)" },
	{ OPT_EXIT_CODE, "exit-code", NULL,
	  "exit 1 when the documents differ, 0 when they are equal" },
	{ OPT_MAX_RECORD, "max-record", "SIZE",
	  "refuse a document or NDJSON record larger than SIZE (default 64M "
	  "per record, 1G per document); memory peaks near 5 times the "
	  "input, so this also caps memory" },
	{ 0 }
};

static const struct cli_exitcode exits[] = {
	{ 0, "success (with --exit-code: the documents are equal)" },
	{ 1, "with --exit-code: the documents differ" },
	{ 100, "usage error" },
	{ 4, "an input file does not exist" },
	{ 101, "malformed input (invalid JSON, a record too large)" },
	{ 111, "system failure (cannot read input, cannot write output)" },
	{ -1, NULL }
};

static const struct cli_prog prog = {
	.name = "jpatch-diff",
	.purpose = "print the JSON Patch (RFC 6902) that turns one document into another",
	.synopsis = "[OPTION]... FROM TO\n[OPTION]... --stream [FILE]",
	.description =
	"Compares the JSON documents FROM and TO ('-' reads one of them from "
	"stdin) and prints, as one line, the JSON Patch array that turns FROM "
	"into TO.  The patch is Genkit's Diff exactly: object members are "
	"visited in byte-wise sorted key order, arrays are compared by index, "
	"elements appended at the end are added with the \"/-\" token in order, "
	"surplus elements are removed from the tail backwards, and any other "
	"change is a replace (of the whole document at path \"\").  Operations "
	"are written as {\"op\",\"path\",\"value\"}; a remove carries "
	"\"value\":null, as Genkit writes it.  Numbers compare by value "
	"(1 equals 1.0) and are otherwise kept exactly.\n\n"
	"With --minimal arrays are aligned by content (a longest common "
	"subsequence), so inserting one element in a list is one add rather "
	"than a replace of every later element.  Every patch applies with "
	"jpatch-apply, strict or lenient.\n\n"
	"With --stream the input is NDJSON, one document per line; for each "
	"document the patch from the previous one (the first against null, or "
	"against --from FILE) is printed, and flushed before jpatch-diff waits for "
	"more input, so a live state stream becomes a patch stream.",
	.opts = opts,
	.examples =
	"$ jpatch-diff old.json new.json\n"
	"  print the patch from old.json to new.json\n"
	"$ jpatch-diff --exit-code a.json b.json >/dev/null || echo changed\n"
	"  use it as a test for equality\n"
	"$ jpatch-diff --stream states.ndjson | jpatch-apply --stream\n"
	"  turn a stream of states into patches, and back",
	.exits = exits,
};

struct opts {
	unsigned flags;
	int stream, exit_code;
	const char *from;
	size_t max_record, max_doc;
};

static const char *display(const char *path)
{
	return strcmp(path, "-") ? path : "<stdin>";
}

/* Diff from and to and write the patch as one line.  *differ is set when
 * the patch is not empty. */
static enum core_status diff_one(const struct opts *o, const struct jn *from,
                                 const struct jn *to, struct core_buf *out,
                                 int *differ, struct core_err *e)
{
	size_t nops;
	enum core_status st;
	core_buf_reset(out);
	if ((st = jpatch_diff_jn(from, to, o->flags, out, &nops, e)))
		return st;
	if (nops)
		*differ = 1;
	return cli_write_line(out, e);
}

struct loader {
	const char *path;
	size_t max;
	struct jn_doc d;
	struct core_err e;
	enum core_status st;
};

static void *load_thread(void *arg)
{
	struct loader *l = arg;
	l->st = jn_load_file(l->path, l->max, &l->d, &l->e);
	return NULL;
}

/*
 * Two documents: parse FROM on a second thread while this one parses TO
 * (parsing is most of a large diff, and the documents are independent).
 */
static enum core_status run_files(const struct opts *o, const char *a,
                                  const char *b, int *differ,
                                  struct core_err *e)
{
	struct loader from = { a, o->max_doc, JN_DOC_INIT, { 0 }, CORE_OK };
	struct loader to = { b, o->max_doc, JN_DOC_INIT, { 0 }, CORE_OK };
	struct core_buf out = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st;
	pthread_t t;
	struct stat sa, sb;
	/* A thread pays off only for large documents (start-up matters for
	 * small ones). */
	int big = strcmp(a, "-") && strcmp(b, "-") && !stat(a, &sa) && !stat(b, &sb)
	          && sa.st_size + sb.st_size >= (off_t)1 << 20;
	int threaded = big && !pthread_create(&t, NULL, load_thread, &from);

	load_thread(&to);
	if (threaded)
		pthread_join(t, NULL);
	else
		load_thread(&from);
	if (from.st)
		*e = from.e, st = from.st;
	else if (to.st)
		*e = to.e, st = to.st;
	else
		st = diff_one(o, &from.d.root, &to.d.root, &out, differ, e);
	jn_drop_at_exit(&from.d);
	jn_drop_at_exit(&to.d);
	core_buf_release(&out);
	return st;
}

static enum core_status run_stream(const struct opts *o, const char *path,
                                   int *differ, struct core_err *e)
{
	struct core_lines r;
	struct core_buf out = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct jn_doc prev = JN_DOC_INIT, cur;
	enum core_status st = CORE_OK;
	int fd = 0;
	char *line;
	size_t len;

	if (path && strcmp(path, "-") && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return core_fail_sys(e, "cannot open '%s'", path);
	core_lines_init(&r, fd, display(path ? path : "-"), o->max_record);
	if (o->from)
		st = jn_load_file(o->from, o->max_doc, &prev, e);
	while (!st && !(st = cli_flush_idle(&r, e))
	       && !(st = core_lines_next(&r, &line, &len, e)) && line) {
		/* a copy of the line: the record is the next one's "from" */
		if ((st = jn_load_copy(line, len, r.name, r.lineno, &cur, e)))
			break;
		st = diff_one(o, &prev.root, &cur.root, &out, differ, e);
		if (st == CORE_EINVAL)
			core_err_prefix(e, "record at %s:%zu", r.name, r.lineno);
		jn_doc_release(&prev);
		prev = cur;
	}
	jn_doc_release(&prev);
	core_lines_release(&r);
	core_buf_release(&out);
	if (fd > 0)
		close(fd);
	return st;
}

int main(int argc, char **argv)
{
	struct opts o = { .max_record = CORE_LINES_DEFAULT_MAX,
	                  .max_doc = (size_t)1 << 30 };
	struct core_err e = { 0 };
	enum core_status st;
	const char *arg;
	int c, differ = 0;

	cli_start(&prog);
	jv_fast_alloc();
	while ((c = cli_next(argc, argv, &arg)) != -1) {
		switch (c) {
		case OPT_MINIMAL:
			o.flags |= JPATCH_MINIMAL;
			break;
		case OPT_STREAM:
			o.stream = 1;
			break;
		case OPT_FROM:
			o.from = arg;
			break;
		case OPT_EXIT_CODE:
			o.exit_code = 1;
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
			return cli_finish(cli_usage("--stream takes at most one FILE"));
		if (o.from && argc && !strcmp(o.from, "-") && !strcmp(argv[0], "-"))
			return cli_finish(cli_usage("--from and FILE cannot both be stdin"));
		if (o.from && !argc && !strcmp(o.from, "-"))
			return cli_finish(cli_usage("--from - needs the stream in a FILE"));
		st = run_stream(&o, argc ? argv[0] : NULL, &differ, &e);
	} else {
		if (argc != 2)
			return cli_finish(cli_usage("expected FROM and TO, got %d operand%s",
			                            argc, argc == 1 ? "" : "s"));
		if (o.from)
			return cli_finish(cli_usage("--from needs --stream"));
		if (!strcmp(argv[0], "-") && !strcmp(argv[1], "-"))
			return cli_finish(cli_usage("FROM and TO cannot both be stdin"));
		st = run_files(&o, argv[0], argv[1], &differ, &e);
	}
	if (st)
		return cli_finish(cli_report(&e));
	return cli_finish(o.exit_code && differ ? CORE_FAILED : CORE_OK);
}
