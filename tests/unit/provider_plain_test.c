/*
 * provider_plain_test.c - prov_plain_scan(), the test that lets a stored
 * message go on the wire from its stored bytes (provider_common.h): the
 * session's one form of a plain message is taken, its texts found as
 * they are stored (escapes, quotes and brackets inside them included);
 * every other message, and every text that is not there whole, is left to
 * the parser.  And jv_string_end(), which finds where a text ends.
 */
#include <stdio.h>
#include <string.h>

#include "../../libcore/model/provider_common.h"
#include "tap.h"

struct tc {
	const char *json;
	int plain, model;
	size_t n;
	const char *texts[3];   /* the first three texts as stored */
};

static const struct tc cases[] = {
	{ "{\"content\":[{\"text\":\"hi\"}],\"role\":\"user\"}", 1, 0, 1, { "hi" } },
	{ "{\"content\":[{\"text\":\"hi\"}],\"role\":\"model\"}", 1, 1, 1, { "hi" } },
	{ "{\"content\":[],\"role\":\"model\"}", 1, 1, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"\"},{\"text\":\"a\\\"}],\\\\\"},{\"text\":\"\\u0000\"}],"
	  "\"role\":\"user\"}", 1, 0, 3, { "", "a\\\"}],\\\\", "\\u0000" } },
	{ "{\"content\":[{\"text\":\"ends in a backslash \\\\\"}],\"role\":\"user\"}", 1, 0, 1,
	  { "ends in a backslash \\\\" } },
	{ "{\"content\":[{\"text\":\"\xc3\xa9 and sixteen more bytes here\"}],\"role\":\"user\"}",
	  1, 0, 1, { "\xc3\xa9 and sixteen more bytes here" } },
	{ "{\"role\":\"model\",\"content\":[{\"text\":\"a\"},{\"text\":\"b\"}]}", 1, 1, 2,
	  { "a", "b" } },
	{ "{\"role\":\"user\",\"content\":[]}", 1, 0, 0, { NULL } },
	/* not plain: other roles, members, parts, orders, spacing */
	{ "{\"role\":\"user\",\"content\":[{\"text\":\"hi\"}],\"metadata\":{}}", 0, 0, 0, { NULL } },
	{ "{\"role\":\"tool\",\"content\":[{\"text\":\"hi\"}]}", 0, 0, 0, { NULL } },
	{ "{\"role\":\"user\",\"content\":[{\"text\":\"hi\"}]", 0, 0, 0, { NULL } },
	{ "{\"role\":\"user\"", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\"}],\"role\":\"system\"}", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\"}],\"role\":\"tool\"}", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\"}],\"metadata\":{},\"role\":\"user\"}", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\",\"metadata\":{}}],\"role\":\"user\"}", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"media\":{\"url\":\"x\"}}],\"role\":\"user\"}", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":1}],\"role\":\"user\"}", 0, 0, 0, { NULL } },
	{ "{\"content\": [{\"text\":\"hi\"}],\"role\":\"user\"}", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\"}],\"role\":\"user\"} ", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\"}],\"role\":\"user\",\"x\":1}", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\"}],\"role\":\"users\"}", 0, 0, 0, { NULL } },
	/* cut short anywhere: never plain, never read past the end */
	{ "{\"content\":[{\"text\":\"hi", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\\", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\"", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\"}", 0, 0, 0, { NULL } },
	{ "{\"content\":[{\"text\":\"hi\"},", 0, 0, 0, { NULL } },
	{ "{\"content\":[", 0, 0, 0, { NULL } },
};

int main(void)
{
	char name[160];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct tc *c = &cases[i];
		struct prov_plain m;
		/* a copy of its own size, so that a read past the end shows
		 * under ASan */
		size_t n = strlen(c->json);
		char *json = malloc(n);
		memcpy(json, c->json, n);
		int got = prov_plain_scan(json, n, &m);
		snprintf(name, sizeof name, "plain_scan %.100s", c->json);
		int ok = got == c->plain && (!got || (m.model == c->model && m.n == c->n));
		for (size_t k = 0; ok && got && k < m.n && k < 3; k++)
			ok = m.text[k].n == strlen(c->texts[k]) &&
			     !memcmp(m.text[k].p, c->texts[k], m.text[k].n);
		report(ok, name, got ? "scanned differently" : "not taken as plain");
		free(json);
	}
	/* up to PROV_PLAIN_MAX parts, and one more */
	for (int k = 0; k <= PROV_PLAIN_MAX + 1; k++) {
		struct prov_plain m;
		char full[2048] = "{\"content\":[";
		for (int j = 0; j < k; j++)
			strcat(full, j ? ",{\"text\":\"x\"}" : "{\"text\":\"x\"}");
		strcat(full, "],\"role\":\"user\"}");
		int got = prov_plain_scan(full, strlen(full), &m);
		snprintf(name, sizeof name, "plain_scan with %d parts", k);
		report(k <= PROV_PLAIN_MAX ? got && m.n == (size_t)k : !got, name, NULL);
	}
	/* jv_string_end: each offset of a quote and of an escape, around
	 * the sixteen-byte steps */
	for (size_t len = 0; len < 40; len++) {
		char s[64];
		int ok = 1;
		memset(s, 'a', sizeof s);
		s[len] = '"';
		ok = jv_string_end(s, len + 1) == len && jv_string_end(s, len) == len;
		for (size_t k = 0; k + 1 < len && ok; k++) {
			char t[64];
			memcpy(t, s, sizeof t);
			t[k] = '\\';
			t[k + 1] = '"';         /* an escaped quote is no end */
			ok = jv_string_end(t, len + 1) == len;
		}
		snprintf(name, sizeof name, "jv_string_end at %zu", len);
		report(ok, name, NULL);
	}
	check_int("jv_string_end: a backslash last", jv_string_end("ab\\", 3), 3);
	check_int("jv_string_end: none", jv_string_end("abc", 3), 3);
	return tap_end();
}
