/* cli_ask.c - asking the person at the terminal; see cli_ask.h. */
#include "cli_ask.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../libcore/base/buf.h"
#include "../libcore/base/json.h"
#include "../libcore/base/util.h"

#define ASK_LINE_MAX 4096       /* an answer's bytes; the rest is dropped */
#define ASK_TRIES 3             /* answers a question refuses before it cancels */

struct tty {
	int fd;
	int64_t deadline;       /* core_now_mono_ms() */
};

int ask_available(void)
{
	int fd;
	if (!isatty(STDERR_FILENO) || (fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)) < 0)
		return 0;
	close(fd);
	return 1;
}

/* A server's text as the terminal may show it: control bytes (C0, DEL and
 * C1 in UTF-8), which could drive the terminal, become '?'; newlines stay
 * where keep_nl. */
static void add_text(struct core_buf *b, const char *t, int keep_nl)
{
	for (; t && *t; t++) {
		unsigned char c = (unsigned char)*t;
		if (c == 0xc2 && (unsigned char)t[1] >= 0x80 && (unsigned char)t[1] <= 0x9f) {
			core_buf_addc(b, '?');
			t++;
		} else {
			core_buf_addc(b, (c < 0x20 && !(keep_nl && c == '\n')) || c == 0x7f ? '?' : (char)c);
		}
	}
}

static void put(struct tty *t, struct core_buf *b)
{
	size_t off = 0;
	while (b->p && off < b->len) {
		ssize_t n = write(t->fd, b->p + off, b->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	core_buf_reset(b);
}

/* One line typed, without its end, in out: 1; 0 when the terminal ended
 * it (EOF), the deadline passed or a signal came (Ctrl-C). */
static int get_line(struct tty *t, struct core_buf *out)
{
	core_buf_reset(out);
	for (;;) {
		struct pollfd p = { t->fd, POLLIN, 0 };
		int64_t left = t->deadline - core_now_mono_ms();
		char c;
		if (left <= 0 || poll(&p, 1, left > 60000 ? 60000 : (int)left) < 0)
			return 0;
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		ssize_t n = read(t->fd, &c, 1);
		if (n <= 0)
			return 0;
		if (c == '\n')
			return 1;
		if (c != '\r' && out->len < ASK_LINE_MAX)
			core_buf_addc(out, c);
	}
}

/* The values a field allows (enum, or oneOf's consts), or NULL. */
static const json_t *values_of(const json_t *p, json_t **own)
{
	const json_t *v = json_object_get(p, "enum"), *one;
	size_t i;
	*own = NULL;
	if (json_is_array(v))
		return v;
	if (!json_is_array(one = json_object_get(p, "oneOf")) &&
	    !json_is_array(one = json_object_get(p, "anyOf")))
		return NULL;
	*own = json_array();
	json_array_foreach(one, i, v)
		if (json_object_get(v, "const"))
			json_array_append(*own, json_object_get(v, "const"));
	return *own;
}

/* The value one of values that text names (itself, or its place from 1). */
static json_t *choose(const json_t *values, const char *text)
{
	const json_t *v;
	size_t i;
	char *end;
	json_array_foreach(values, i, v)
		if (json_is_string(v) && !strcmp(json_string_value(v), text))
			return json_incref((json_t *)v);
	long k = strtol(text, &end, 10);
	if (*text && !*end && k >= 1 && (size_t)k <= json_array_size(values))
		return json_incref(json_array_get(values, (size_t)k - 1));
	return NULL;
}

/* text as a value of field p, or NULL when it is not one (why in *why). */
static json_t *parse(const json_t *p, const char *text, const char **why)
{
	const char *type = json_string_value(json_object_get(p, "type"));
	json_t *own, *out = NULL;
	const json_t *values = values_of(p, &own);
	char *end;
	*why = "not one of the choices";
	if (type && !strcmp(type, "array")) {
		json_t *iown;
		const json_t *ivals = values_of(json_object_get(p, "items"), &iown);
		char *copy = strdup(text), *save = NULL;
		out = json_array();
		for (char *w = strtok_r(copy, ",", &save); w && out; w = strtok_r(NULL, ",", &save)) {
			while (*w == ' ')
				w++;
			size_t n = strlen(w);
			while (n && w[n - 1] == ' ')
				w[--n] = 0;
			json_t *one = ivals ? choose(ivals, w) : json_string(w);
			if (!one) {
				json_decref(out);
				out = NULL;
			} else {
				json_array_append_new(out, one);
			}
		}
		free(copy);
		json_decref(iown);
	} else if (values) {
		out = choose(values, text);
	} else if (type && !strcmp(type, "boolean")) {
		*why = "answer y or n";
		if (!strcmp(text, "y") || !strcmp(text, "yes") || !strcmp(text, "true"))
			out = json_true();
		else if (!strcmp(text, "n") || !strcmp(text, "no") || !strcmp(text, "false"))
			out = json_false();
	} else if (type && !strcmp(type, "integer")) {
		*why = "not a whole number";
		errno = 0;
		long long v = strtoll(text, &end, 10);
		if (*text && !*end && !errno)
			out = json_integer(v);
	} else if (type && !strcmp(type, "number")) {
		*why = "not a number";
		double v = strtod(text, &end);
		if (*text && !*end && isfinite(v))
			out = json_real(v);
	} else {
		out = json_string(text);
	}
	json_decref(own);
	return out;
}

/* A field's question: "  Title: description (name, type, one of: 1 a, 2 b,
 * default d, required): ". */
static void question(struct core_buf *b, const char *name, const json_t *p, int required)
{
	const char *title = json_string_value(json_object_get(p, "title"));
	const char *desc = json_string_value(json_object_get(p, "description"));
	const char *type = json_string_value(json_object_get(p, "type"));
	const json_t *def = json_object_get(p, "default"), *v;
	json_t *own;
	const json_t *values = values_of(type && !strcmp(type, "array") ?
	                                 json_object_get(p, "items") : p, &own);
	size_t i;
	core_buf_adds(b, "  ");
	add_text(b, title ? title : name, 0);
	if (desc) {
		core_buf_adds(b, ": ");
		add_text(b, desc, 0);
	}
	core_buf_adds(b, " (");
	add_text(b, name, 0);
	if (values) {
		core_buf_adds(b, type && !strcmp(type, "array") ? ", any of:" : ", one of:");
		json_array_foreach(values, i, v) {
			char *s = json_dumps(v, JSON_ENCODE_ANY);
			core_buf_addf(b, "%s %zu ", i ? "," : "", i + 1);
			add_text(b, json_is_string(v) ? json_string_value(v) : s, 0);
			free(s);
		}
	} else if (type) {
		core_buf_adds(b, ", ");
		add_text(b, !strcmp(type, "string") ? "text" : type, 0);
	}
	if (def) {
		char *s = json_dumps(def, JSON_ENCODE_ANY);
		core_buf_adds(b, ", default ");
		add_text(b, json_is_string(def) ? json_string_value(def) : s, 0);
		free(s);
	}
	core_buf_adds(b, required ? ", required): " : "): ");
	json_decref(own);
}

/* One field into content: CORE_OK (answered, or left out), or
 * CORE_ECANCELLED. */
static enum core_status field(struct tty *t, const char *name, const json_t *p, int required,
                              json_t *content)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED), line = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = CORE_ECANCELLED;
	for (int tries = 0; tries < ASK_TRIES; tries++) {
		const char *why = "an answer is needed";
		json_t *v = NULL;
		question(&b, name, p, required);
		put(t, &b);
		if (!get_line(t, &line))
			break;
		if (!line.len && json_object_get(p, "default"))
			v = json_deep_copy(json_object_get(p, "default"));
		else if (!line.len && !required) {
			st = CORE_OK;
			break;
		} else if (line.len) {
			v = parse(p, line.p, &why);
		}
		if (v) {
			json_object_set_new(content, name, v);
			st = CORE_OK;
			break;
		}
		core_buf_addf(&b, "  %s\n", why);
		put(t, &b);
	}
	core_buf_release(&b);
	core_buf_release(&line);
	return st;
}

static int in_array(const json_t *arr, const char *s)
{
	const json_t *v;
	size_t i;
	json_array_foreach(arr, i, v)
		if (json_is_string(v) && !strcmp(json_string_value(v), s))
			return 1;
	return 0;
}

/* The first question: 'a' to answer, 'd' to decline, 'c' to cancel. */
static char first(struct tty *t, const char *server, const json_t *params)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED), line = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	char got = 'c';
	core_buf_adds(&b, "\nmcp server '");
	add_text(&b, server, 0);
	core_buf_adds(&b, "' asks: ");
	add_text(&b, json_string_value(json_object_get(params, "message")), 1);
	core_buf_adds(&b, "\n");
	for (int tries = 0; tries < ASK_TRIES; tries++) {
		core_buf_adds(&b, "  answer it? [Y]es, [n]o (decline), [c]ancel: ");
		put(t, &b);
		if (!get_line(t, &line))
			break;
		const char *a = line.p ? line.p : "";
		if (!*a || !strcmp(a, "y") || !strcmp(a, "yes") || !strcmp(a, "Y")) {
			got = 'a';
			break;
		}
		if (!strcmp(a, "n") || !strcmp(a, "no") || !strcmp(a, "N")) {
			got = 'd';
			break;
		}
		if (!strcmp(a, "c") || !strcmp(a, "C"))
			break;
	}
	core_buf_release(&b);
	core_buf_release(&line);
	return got;
}

enum core_status ask_elicit(void *ctx, const char *server, const json_t *params,
                            int64_t deadline_ms, json_t **result)
{
	struct tty t = { open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY), deadline_ms };
	const char *mode = json_string_value(json_object_get(params, "mode"));
	const json_t *schema = json_object_get(params, "requestedSchema"), *p;
	const json_t *required = json_object_get(schema, "required");
	const char *name, *action = "decline";
	json_t *content = json_object();
	(void)ctx;
	if (t.fd >= 0 && content && (!mode || !strcmp(mode, "form"))) {
		char a = first(&t, server, params);
		action = a == 'd' ? "decline" : "cancel";
		if (a == 'a') {
			action = "accept";
			json_object_foreach((json_t *)json_object_get(schema, "properties"), name, p)
				if (field(&t, name, p, in_array(required, name), content)) {
					action = "cancel";
					break;
				}
		}
		struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
		core_buf_addf(&b, "  %s\n", !strcmp(action, "accept") ? "sent" :
		              !strcmp(action, "decline") ? "declined" : "cancelled");
		put(&t, &b);
		core_buf_release(&b);
	}
	if (t.fd >= 0)
		close(t.fd);
	*result = !strcmp(action, "accept") ? json_pack("{s:s, s:O}", "action", action,
	                                                "content", content)
	                                    : json_pack("{s:s}", "action", action);
	json_decref(content);
	return *result ? CORE_OK : CORE_ENOMEM;
}

int ask_approve(void *ctx, const json_t *part)
{
	struct tty t = { open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY),
	                 core_now_mono_ms() + ASK_APPROVE_MS };
	const json_t *req = json_object_get(part, "toolRequest");
	const json_t *input = json_object_get(req, "input");
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED), line = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	struct core_buf js = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	int got = -1;
	(void)ctx;
	if (t.fd < 0)
		return -1;
	core_buf_adds(&b, "approve ");
	add_text(&b, json_string_value(json_object_get(req, "name")), 0);
	if (input && !jv_dump(input, &js) && js.p) {
		if (js.len > 72) {
			js.len = 72;
			while (js.len && ((unsigned char)js.p[js.len] & 0xC0) == 0x80)
				js.len--;
			js.p[js.len] = 0;
			core_buf_adds(&js, "...");
		}
		core_buf_adds(&b, " ");
		add_text(&b, js.p, 0);
	}
	core_buf_adds(&b, "? [y/N] ");
	for (int tries = 0; tries < ASK_TRIES; tries++) {
		if (tries)
			core_buf_adds(&b, "  y or n: ");
		put(&t, &b);
		if (!get_line(&t, &line))
			break;
		const char *a = line.p ? line.p : "";
		if (!strcmp(a, "y") || !strcmp(a, "yes") || !strcmp(a, "Y")) {
			got = 1;
			break;
		}
		if (!*a || !strcmp(a, "n") || !strcmp(a, "no") || !strcmp(a, "N")) {
			got = 0;
			break;
		}
	}
	if (got < 0) {
		core_buf_adds(&b, "\n");
		put(&t, &b);
	}
	close(t.fd);
	core_buf_release(&b);
	core_buf_release(&line);
	core_buf_release(&js);
	return got;
}
