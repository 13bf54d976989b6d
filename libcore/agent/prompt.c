/*
 * prompt.c - Dotprompt files: the front matter (frontmatter.c) and the
 * template split apart, paths made relative to the file, and the template
 * rendered into Genkit messages.
 */
#include "prompt.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../base/frontmatter.h"
#include "../base/json.h"
#include "../base/template.h"

struct prompt {
	char *name;
	json_t *meta;
	struct tpl *tpl;
};

void prompt_free(struct prompt *p)
{
	if (!p)
		return;
	json_decref(p->meta);
	tpl_free(p->tpl);
	free(p->name);
	free(p);
}

const json_t *prompt_meta(const struct prompt *p)
{
	return p->meta;
}

const char *prompt_source(const struct prompt *p)
{
	return p->name;
}

int prompt_has_history_marker(const struct prompt *p)
{
	return tpl_has_history(p->tpl);
}

/* ------------------------------------------------------------------ file */

/* The line starting at p: its length without the newline, and the next line. */
static size_t line_len(const char *p, const char *end, const char **next)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

	*next = nl ? nl + 1 : end;
	if (n > 0 && p[n - 1] == '\r')
		n--;
	return n;
}

/* A "---" delimiter line (trailing blanks allowed). */
static int is_delim(const char *p, size_t n)
{
	if (n < 3 || memcmp(p, "---", 3) != 0)
		return 0;
	for (size_t i = 3; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t')
			return 0;
	return 1;
}

static size_t count_lines(const char *p, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += p[i] == '\n';
	return c;
}

static int blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* How many of p[0..n) are spaces, tabs or CRs (strspn would read past n:
 * the text need not be NUL-terminated). */
static size_t blank_span(const char *p, size_t n)
{
	size_t i = 0;
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'))
		i++;
	return i;
}

enum core_status prompt_parse(const char *text, size_t len,
                              const char *source_name, struct prompt **out,
                              struct core_err *e)
{
	const char *end = text + len, *p = text, *next, *body, *body_end;
	size_t line = 1, body_line;
	struct prompt *pr;
	enum core_status st;

	*out = NULL;
	if (!source_name)
		source_name = "<prompt>";
	if (len > PROMPT_MAX_FILE)
		return core_fail(e, CORE_ETOOBIG, "%s: prompt file is larger than %d bytes",
		                 source_name, PROMPT_MAX_FILE);
	const char *nul = memchr(text, 0, len);
	if (nul)
		return core_fail(e, CORE_EINVAL, "%s:%zu: NUL byte in prompt file",
		                 source_name, 1 + count_lines(text, (size_t)(nul - text)));
	json_t *utf8 = json_stringn(text, len);
	if (!utf8)
		return core_fail(e, CORE_EINVAL, "%s: not valid UTF-8 text", source_name);
	json_decref(utf8);
	if (!(pr = calloc(1, sizeof(*pr))) || !(pr->name = strdup(source_name))) {
		free(pr);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	if (len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0)
		p += 3;

	/* Dotprompt: blank and '#' lines may come before the opening "---". */
	const char *q = p;
	size_t qline = line, n;
	for (;;) {
		if (q >= end)
			break;
		n = line_len(q, end, &next);
		if (next == end && q + n == end)
			break;              /* last line without a newline */
		if (is_delim(q, n) || !(q[0] == '#' || blank_span(q, n) == n))
			break;
		q = next;
		qline++;
	}
	n = q < end ? line_len(q, end, &next) : 0;
	if (q < end && is_delim(q, n) && next > q + n) {
		const char *fm = next, *c = next;
		size_t fm_line = qline + 1, cl = fm_line;
		for (;;) {
			if (c >= end) {
				st = core_fail(e, CORE_EINVAL,
				               "%s:%zu: invalid front matter: no closing '---' line",
				               source_name, qline);
				goto fail;
			}
			n = line_len(c, end, &next);
			if (is_delim(c, n))
				break;
			c = next;
			cl++;
		}
		if ((st = frontmatter_parse(fm, (size_t)(c - fm), source_name, fm_line,
		                             &pr->meta, e)))
			goto fail;
		body = next;
		line = cl + 1;
		/* Dotprompt trims the body of a file with front matter. */
		while (body < end && blank(*body)) {
			if (*body == '\n')
				line++;
			body++;
		}
		body_end = end;
		while (body_end > body && blank(body_end[-1]))
			body_end--;
	} else {
		if (!(pr->meta = json_object())) {
			st = core_fail(e, CORE_ENOMEM, "out of memory");
			goto fail;
		}
		body = p;
		body_end = end;
	}
	body_line = line;
	if ((st = tpl_compile(body, (size_t)(body_end - body), source_name, body_line,
	                      &pr->tpl, e)))
		goto fail;
	*out = pr;
	return CORE_OK;
fail:
	prompt_free(pr);
	return st;
}

/* ---------------------------------------------------- relative paths */

/*
 * Characters of a command's first word that a shell reads literally: only
 * such a word is taken as a path to resolve (a word with quotes, '$' or
 * '~' is the shell's to expand, and one with '=' is an assignment: they
 * are left as written).
 */
static int literal_word(const char *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)w[i];
		if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9')
		    && !strchr("._-+/@%,", c))
			return 0;
	}
	return 1;
}

/*
 * A command string (exec:, docs:, stateTransform:, streamTransform:) whose
 * first word is a relative path with a '/' ("./handler", "bin/docs.sh")
 * runs that program from dir: the result is the command with dir, quoted
 * for /bin/sh, put before that word.  Any other command comes back NULL
 * (kept as written: "jq -c .", "/usr/bin/x", "$HOME/x").
 */
static char *resolve_command(const char *dir, const char *cmd)
{
	size_t lead = strspn(cmd, " \t"), n = strcspn(cmd + lead, " \t\n");
	const char *w = cmd + lead;
	if (!n || *w == '/' || !memchr(w, '/', n) || !literal_word(w, n))
		return NULL;
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	int bad = core_buf_add(&b, cmd, lead) || core_buf_adds(&b, "'");
	for (const char *d = dir; *d && !bad; d++)
		bad = *d == '\'' ? core_buf_adds(&b, "'\\''") : core_buf_add(&b, d, 1);
	if (bad || core_buf_addf(&b, "'/%s", w)) {
		core_buf_release(&b);
		return NULL;
	}
	return core_buf_detach(&b, NULL);
}

/*
 * Resolve what the front matter names by a relative path from dir, the
 * prompt file's directory, so an agent works the same from any working
 * directory (and under cron, which starts in $HOME): "model: script/PATH"
 * and the first word of the command keys.  stateSchema and the tools/
 * directory are resolved where they are read (agent_ext.c, agent.c).
 */
static enum core_status resolve_paths(json_t *meta, const char *dir)
{
	static const char *const commands[] = { "exec", "docs", "stateTransform",
	                                        "streamTransform" };
	const json_t *v = json_object_get(meta, "model");
	char *s = NULL;
	if (jv_is_string(v) && !strncmp(json_string_value(v), "script/", 7)) {
		const char *file = json_string_value(v) + 7;
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		if (*file && *file != '/') {
			if (core_buf_addf(&b, "script/%s/%s", dir, file)
			    || json_object_set_new(meta, "model", json_string(b.p))) {
				core_buf_release(&b);
				return CORE_ENOMEM;
			}
		}
		core_buf_release(&b);
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		v = json_object_get(meta, commands[i]);
		if (!jv_is_string(v) || !(s = resolve_command(dir, json_string_value(v))))
			continue;
		int bad = json_object_set_new(meta, commands[i], json_string(s));
		free(s);
		if (bad)
			return CORE_ENOMEM;
	}
	return CORE_OK;
}

enum core_status prompt_load(const char *path, struct prompt **out,
                             struct core_err *e)
{
	struct core_buf b = CORE_BUF_INIT(PROMPT_MAX_FILE);
	enum core_status st;

	*out = NULL;
	st = core_buf_read_file(&b, path, e);
	if (st == CORE_ENOTFOUND)
		st = core_fail(e, CORE_ENOTFOUND, "prompt file '%s' not found", path);
	if (st == CORE_OK)
		st = prompt_parse(b.p ? b.p : "", b.len, path, out, e);
	core_buf_release(&b);
	const char *slash = strrchr(path, '/');
	if (st == CORE_OK && slash && (*out)->meta) {
		char *dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
		if (!dir || resolve_paths((*out)->meta, dir)) {
			prompt_free(*out);
			*out = NULL;
			st = core_fail(e, CORE_ENOMEM, "out of memory");
		}
		free(dir);
	}
	return st;
}

/* ---------------------------------------------------------------- render */

/* One message being built, as Dotprompt's MessageSource. */
struct msrc {
	char role[8];
	json_t *meta;           /* role metadata, or NULL */
	json_t *parts;          /* content parts, or NULL while empty */
	json_t *hist;           /* a history message (already tagged), or NULL */
};

struct msrcs {
	struct msrc *v;
	size_t n, cap;
};

static struct msrc *src_push(struct msrcs *s, const char *role)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		struct msrc *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		s->v = v;
		s->cap = cap;
	}
	memset(&s->v[s->n], 0, sizeof(s->v[0]));
	snprintf(s->v[s->n].role, sizeof(s->v[0].role), "%s", role);
	return &s->v[s->n++];
}

static void srcs_release(struct msrcs *s)
{
	for (size_t i = 0; i < s->n; i++) {
		json_decref(s->v[i].meta);
		json_decref(s->v[i].parts);
		json_decref(s->v[i].hist);
	}
	free(s->v);
}

static int ws_only(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!blank(s[i]))
			return 0;
	return 1;
}

/* Append the parts of pieces [a, b) (content pieces only) to *parts. */
static enum core_status add_parts(const struct tpl_output *o, size_t a, size_t b,
                                  json_t **parts, struct core_err *e)
{
	if (!*parts && !(*parts = json_array()))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	for (size_t i = a; i < b; i++) {
		const struct tpl_piece *pc = &o->v[i];
		json_t *part = NULL;
		switch (pc->kind) {
		case TPL_TEXT:
			if (ws_only(pc->text, pc->text_len))
				continue;
			part = json_pack("{s:s%}", "text", pc->text, pc->text_len);
			break;
		case TPL_MEDIA:
			part = pc->extra ? json_pack("{s:{s:s,s:s}}", "media", "url", pc->text,
			                             "contentType", pc->extra)
			                 : json_pack("{s:{s:s}}", "media", "url", pc->text);
			break;
		case TPL_SECTION:
			part = json_pack("{s:{s:s,s:b}}", "metadata", "purpose", pc->text,
			                 "pending", 1);
			break;
		default:
			continue;
		}
		if (!part)
			return core_fail(e, CORE_EINVAL, "rendered text is not valid UTF-8");
		if (json_array_append_new(*parts, part))
			return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
}

/* A deep copy of history message i, tagged as history. */
static enum core_status tag_history(const json_t *m, size_t i, json_t **out,
                                    struct core_err *e)
{
	json_t *c, *md;

	if (!json_is_object(m))
		return core_fail(e, CORE_EINVAL, "history[%zu] is not a message object", i);
	md = json_object_get(m, "metadata");
	if (md && !json_is_object(md) && !json_is_null(md))
		return core_fail(e, CORE_EINVAL, "history[%zu].metadata is not an object", i);
	if (!(c = json_deep_copy(m)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	md = json_object_get(c, "metadata");
	if (!json_is_object(md)) {
		if (!(md = json_object()) || json_object_set_new(c, "metadata", md)) {
			json_decref(c);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
	}
	if (json_object_set_new(md, "_genkit_history", json_true())) {
		json_decref(c);
		return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	*out = c;
	return CORE_OK;
}

/* Dotprompt's toMessages() over the rendered pieces. */
static enum core_status to_messages(const struct tpl_output *o,
                                    const json_t *history, json_t *res,
                                    int *placed, struct core_err *e)
{
	struct msrcs S = {0};
	struct msrc *cur;
	enum core_status st = CORE_OK;
	size_t i = 0;

	*placed = 0;
	if (!(cur = src_push(&S, "user")))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	while (i < o->n && !st) {
		const struct tpl_piece *pc = &o->v[i];
		if (pc->kind == TPL_ROLE) {
			i++;
			if (cur->parts) {
				if (!(cur = src_push(&S, pc->text))) {
					st = core_fail(e, CORE_ENOMEM, "out of memory");
					break;
				}
				if (pc->meta && !(cur->meta = json_deep_copy(pc->meta)))
					st = core_fail(e, CORE_ENOMEM, "out of memory");
			} else {
				snprintf(cur->role, sizeof(cur->role), "%s", pc->text);
				if (pc->meta) {
					if (!cur->meta && !(cur->meta = json_object()))
						st = core_fail(e, CORE_ENOMEM, "out of memory");
					else if (json_object_update(cur->meta, pc->meta))
						st = core_fail(e, CORE_ENOMEM, "out of memory");
				}
			}
			continue;
		}
		if (pc->kind == TPL_HISTORY) {
			i++;
			*placed = 1;
			for (size_t h = 0; history && h < json_array_size(history) && !st; h++) {
				struct msrc *hs = src_push(&S, "");
				if (!hs)
					st = core_fail(e, CORE_ENOMEM, "out of memory");
				else
					st = tag_history(json_array_get(history, h), h, &hs->hist, e);
			}
			if (!st && !(cur = src_push(&S, "model")))
				st = core_fail(e, CORE_ENOMEM, "out of memory");
			continue;
		}
		/* a run of content pieces up to the next role/history marker */
		size_t a = i, b = i;
		int ws = 1;
		while (b < o->n && o->v[b].kind != TPL_ROLE && o->v[b].kind != TPL_HISTORY) {
			if (o->v[b].kind != TPL_TEXT || !ws_only(o->v[b].text, o->v[b].text_len))
				ws = 0;
			b++;
		}
		i = b;
		if (!ws)
			st = add_parts(o, a, b, &cur->parts, e);
	}
	for (size_t k = 0; k < S.n && !st; k++) {
		struct msrc *s = &S.v[k];
		json_t *m;
		if (s->hist) {
			m = json_incref(s->hist);
		} else if (s->parts && json_array_size(s->parts)) {
			m = json_pack("{s:s,s:O}", "role", s->role, "content", s->parts);
			if (m && s->meta && json_object_set(m, "metadata", s->meta)) {
				json_decref(m);
				m = NULL;
			}
		} else {
			continue;
		}
		if (!m || json_array_append_new(res, m))
			st = core_fail(e, CORE_ENOMEM, "out of memory");
	}
	srcs_release(&S);
	return st;
}

/* Dotprompt's insertHistory(): before a final user message, else at the end. */
static enum core_status insert_history(json_t *res, const json_t *history,
                                       struct core_err *e)
{
	size_t n = json_array_size(res), at = n;
	enum core_status st;

	if (n > 0) {
		const json_t *role = json_object_get(json_array_get(res, n - 1), "role");
		if (jv_is_string(role) && !strcmp(json_string_value(role), "user"))
			at = n - 1;
	}
	for (size_t h = 0; h < json_array_size(history); h++) {
		json_t *c;
		if ((st = tag_history(json_array_get(history, h), h, &c, e)))
			return st;
		if (json_array_insert_new(res, at + h, c))
			return core_fail(e, CORE_ENOMEM, "out of memory");
	}
	return CORE_OK;
}

enum core_status prompt_render(const struct prompt *p, const json_t *input,
                               const json_t *state, const json_t *history,
                               json_t **messages, struct core_err *e)
{
	struct tpl_output o = {0};
	json_t *ctx = NULL, *res = NULL;
	const json_t *in, *def;
	enum core_status st;
	int placed = 0;

	*messages = NULL;
	if (input && !json_is_object(input) && !json_is_null(input))
		return core_fail(e, CORE_EINVAL, "%s: prompt input must be a JSON object, got %s",
		                 p->name, jv_type_name(input));
	if (history && !json_is_array(history) && !json_is_null(history))
		return core_fail(e, CORE_EINVAL, "history must be an array of messages, got %s",
		                 jv_type_name(history));
	if (history && !json_is_array(history))
		history = NULL;
	if (!(ctx = json_object()) || !(res = json_array())) {
		st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto out;
	}
	in = json_object_get(p->meta, "input");
	def = in ? json_object_get(in, "default") : NULL;
	if ((def && json_is_object(def) && json_object_update(ctx, (json_t *)def)) ||
	    (input && json_is_object(input) && json_object_update(ctx, (json_t *)input))) {
		st = core_fail(e, CORE_ENOMEM, "out of memory");
		goto out;
	}
	if ((st = tpl_render(p->tpl, ctx, state, &o, e)))
		goto out;
	if ((st = to_messages(&o, history, res, &placed, e)))
		goto out;
	if (!placed && history && (st = insert_history(res, history, e)))
		goto out;
	*messages = res;
	res = NULL;
out:
	tpl_output_release(&o);
	json_decref(ctx);
	json_decref(res);
	return st;
}
