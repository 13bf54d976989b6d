/* attach.c - a file as a message part; see attach.h. */
#include "attach.h"

#include <magic.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "utf8.h"
#include "util.h"

#define LIBMAGIC "libmagic.so.1"

/* libmagic's calls, resolved on first use. */
static struct {
	magic_t (*open)(int);
	int (*load)(magic_t, const char *);
	const char *(*buffer)(magic_t, const void *, size_t);
	const char *(*error)(magic_t);
	magic_t cookie;
	char why[256];
} mg;

/* The MIME type of n bytes at p (static until the next call), or NULL
 * with e filled. */
static const char *mime_of(const char *name, const char *p, size_t n, struct core_err *e)
{
	static const char *const names[] = { "magic_open", "magic_load", "magic_buffer",
	                                     "magic_error" };
	void **const slots[] = { (void **)&mg.open, (void **)&mg.load, (void **)&mg.buffer,
	                         (void **)&mg.error };
	if (!mg.cookie) {
		if (!mg.open && !core_dl_load(LIBMAGIC, names, slots, 4, mg.why, sizeof mg.why)) {
			core_fail(e, CORE_EUSAGE, "attach '%s': cannot tell its type: %s (install "
			          "libmagic1)", name, mg.why);
			return NULL;
		}
		magic_t c = mg.open(MAGIC_MIME_TYPE | MAGIC_ERROR);
		if (!c || mg.load(c, NULL)) {
			core_fail(e, CORE_EUSAGE, "attach '%s': cannot load libmagic's database: %s",
			          name, c && mg.error(c) ? mg.error(c) : "out of memory");
			return NULL;
		}
		mg.cookie = c;  /* kept for the process */
	}
	const char *t = mg.buffer(mg.cookie, p, n);
	if (!t)
		core_fail(e, CORE_EUSAGE, "attach '%s': cannot tell its type: %s", name,
		          mg.error(mg.cookie) ? mg.error(mg.cookie) : "unknown");
	return t;
}

static int is_text(const char *t)
{
	static const char *const apps[] = { "application/json", "application/xml",
		"application/javascript", "application/x-ndjson", "application/x-sh",
		"application/x-shellscript", "application/toml", "application/x-yaml",
		"application/yaml", "application/sql", NULL };
	if (!strncmp(t, "text/", 5))
		return 1;
	for (int i = 0; apps[i]; i++)
		if (!strcmp(t, apps[i]))
			return 1;
	return 0;
}

static int is_media(const char *t)
{
	return !strncmp(t, "image/", 6) || !strncmp(t, "audio/", 6) ||
	       !strcmp(t, "application/pdf");
}

static enum core_status base64(const unsigned char *p, size_t n, struct core_buf *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
		             (i + 2 < n ? p[i + 2] : 0);
		char q[4] = { tab[v >> 18 & 63], tab[v >> 12 & 63],
		              i + 1 < n ? tab[v >> 6 & 63] : '=', i + 2 < n ? tab[v & 63] : '=' };
		if (core_buf_add(out, q, 4))
			return CORE_ENOMEM;
	}
	return CORE_OK;
}

static json_t *media_part(const char *type, const struct core_buf *b)
{
	struct core_buf url = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *part = NULL;
	if (!core_buf_addf(&url, "data:%s;base64,", type) &&
	    !base64((const unsigned char *)b->p, b->len, &url) && !core_buf_addc(&url, '\0'))
		part = json_pack("{s:{s:s, s:s}}", "media", "contentType", type, "url", url.p);
	core_buf_release(&url);
	return part;
}

static json_t *text_part(const char *name, const struct core_buf *b)
{
	struct core_buf t = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	json_t *part = NULL;
	if (core_buf_adds(&t, "<file name=\""))
		goto out;
	for (const char *c = name; *c; c++)     /* the name cannot close its quotes */
		if (core_buf_addc(&t, *c == '"' || (unsigned char)*c < 0x20 ? '?' : *c))
			goto out;
	if (!core_buf_adds(&t, "\">\n") && !core_buf_add(&t, b->p, b->len) &&
	    !core_buf_adds(&t, b->len && b->p[b->len - 1] == '\n' ? "</file>" : "\n</file>"))
		part = json_pack("{s:s%}", "text", t.p, t.len);
out:
	core_buf_release(&t);
	return part;
}

enum core_status attach_part(const char *path, size_t *used, json_t **part,
                             struct core_err *e)
{
	const char *name = strcmp(path, "-") ? path : "stdin";
	size_t left = ATTACH_TOTAL_MAX - (*used < ATTACH_TOTAL_MAX ? *used : ATTACH_TOTAL_MAX);
	struct core_buf b = CORE_BUF_INIT(left < ATTACH_MAX ? left : ATTACH_MAX);
	enum core_status st;
	char type[128];
	*part = NULL;
	if ((st = core_buf_read_file(&b, path, e))) {
		if (st == CORE_ETOOBIG)
			st = core_fail(e, CORE_EUSAGE, "attach '%s': larger than %u MiB%s", name,
			          (b.max == ATTACH_MAX ? ATTACH_MAX : (unsigned)left) >> 20,
			          b.max == ATTACH_MAX ? "" : " (what is left of the 50 MiB for all "
			          "attachments)");
		goto out;
	}
	*used += b.len;
	if (!b.len) {
		st = core_fail(e, CORE_EUSAGE, "attach '%s': the file is empty", name);
		goto out;
	}
	const char *t = mime_of(name, b.p, b.len, e);
	if (!t) {
		st = e->st;
		goto out;
	}
	snprintf(type, sizeof type, "%s", strcmp(t, "audio/x-wav") ? t : "audio/wav");
	if (is_text(type)) {
		if (utf8_valid(b.p, b.len) != b.len) {
			st = core_fail(e, CORE_EUSAGE, "attach '%s': %s that is not UTF-8 text (convert "
			               "it, e.g. with iconv)", name, type);
			goto out;
		}
		*part = text_part(name, &b);
	} else if (is_media(type)) {
		*part = media_part(type, &b);
	} else {
		st = core_fail(e, CORE_EUSAGE, "attach '%s': its type is %s; images, PDFs, audio "
		               "and text files can be attached", name, type);
		goto out;
	}
	if (!*part)
		st = core_fail(e, CORE_ENOMEM, "out of memory");
out:
	core_buf_release(&b);
	return st;
}
