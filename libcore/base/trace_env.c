/*
 * trace_env.c - the tracing configuration from the standard OTEL_*
 * variables, as the OpenTelemetry SDKs read them: the endpoint, headers,
 * timeout, TLS files, resource attributes, exporter and protocol, and the
 * inbound TRACEPARENT.  See trace.h (struct trace_config).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "json.h"
#include "trace.h"
#include "util.h"

#define DEFAULT_ENDPOINT "http://localhost:4318/v1/traces"
#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_WAIT_MS 1000
#define DEFAULT_QUEUE_MAX 2048  /* OTEL_BSP_MAX_QUEUE_SIZE's default */

/* ---- configuration ---- */

static const char *otel_env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* The first of the two variables that is set. */
static const char *env2(const char *specific, const char *general)
{
	const char *v = otel_env(specific);
	return v ? v : otel_env(general);
}

static int truthy(const char *v)
{
	return v && (!strcmp(v, "1") || !strcasecmp(v, "true"));
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decode p[0..n) trimmed of blanks into a new string; NULL on a
 * bad escape (%00 included) or without memory (*bad says which). */
static char *decode(const char *p, size_t n, int *bad)
{
	while (n && isspace((unsigned char)*p))
		p++, n--;
	while (n && isspace((unsigned char)p[n - 1]))
		n--;
	char *out = malloc(n + 1), *o = out;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '%') {
			*o++ = p[i];
			continue;
		}
		int a = i + 1 < n ? hexval(p[i + 1]) : -1;
		int b = i + 2 < n ? hexval(p[i + 2]) : -1;
		int h = a >= 0 && b >= 0 ? a * 16 + b : -1;
		/* %00 would cut the C string: the value would be sent in part. */
		if (h <= 0) {
			free(out);
			*bad = 1;
			return NULL;
		}
		*o++ = (char)h;
		i += 2;
	}
	*o = 0;
	return out;
}

/*
 * Split "k1=v1,k2=v2" (W3C Baggage style, percent-encoded) and call fn with
 * each decoded pair.  -1 when an entry is malformed (nothing more is
 * given), -2 without memory.
 */
static int kv_each(const char *s, int (*fn)(void *ctx, const char *k, const char *v), void *ctx)
{
	while (s && *s) {
		const char *end = strchr(s, ','), *eq;
		size_t len = end ? (size_t)(end - s) : strlen(s);
		/* Baggage metadata (";...") is not part of the value. */
		const char *semi = memchr(s, ';', len);
		size_t vlen = semi ? (size_t)(semi - s) : len;
		if (vlen && strspn(s, " \t") < len) {
			if (!(eq = memchr(s, '=', vlen)) || eq == s)
				return -1;
			int bad = 0;
			char *k = decode(s, (size_t)(eq - s), &bad);
			char *v = k ? decode(eq + 1, vlen - (size_t)(eq - s) - 1, &bad) : NULL;
			int r = k && v && *k ? fn(ctx, k, v) : bad || (k && !*k) ? -1 : -2;
			free(k);
			free(v);
			if (r)
				return r;
		}
		s = end ? end + 1 : NULL;
	}
	return 0;
}

static int add_header(void *ctx, const char *k, const char *v)
{
	struct trace_config *c = ctx;
	size_t n = 0, klen = strlen(k);
	for (; c->headers[n]; n++) {
		if (!strncasecmp(c->headers[n], k, klen) && c->headers[n][klen] == ':') {
			/* The traces-specific variable comes second and wins. */
			free(c->headers[n]);
			memmove(&c->headers[n], &c->headers[n + 1],
			        (TRACE_HEADERS_MAX - n) * sizeof c->headers[0]);
			n--;
		}
	}
	if (n >= TRACE_HEADERS_MAX)
		return 0;
	/* A header value is never allowed to carry a line break: it would
	 * end the header and forge the next (http.c refuses it as well). */
	if (strpbrk(k, "\r\n:") || strpbrk(v, "\r\n"))
		return -1;
	size_t len = klen + strlen(v) + 3;
	if (!(c->headers[n] = malloc(len)))
		return -2;
	snprintf(c->headers[n], len, "%s: %s", k, v);
	c->headers[n + 1] = NULL;
	return 0;
}

/* Set key in an OTLP KeyValue array (replacing), consuming kv (NULL: a
 * failed allocation, nothing set). */
static void kv_set(json_t *arr, json_t *kv)
{
	const char *k = json_string_value(json_object_get(kv, "key"));
	size_t i;
	json_t *e;
	if (!kv)
		return;
	json_array_foreach(arr, i, e) {
		if (!strcmp(json_string_value(json_object_get(e, "key")), k)) {
			json_array_set_new(arr, i, kv);
			return;
		}
	}
	json_array_append_new(arr, kv);
}

static json_t *kv_str(const char *k, const char *v)
{
	return json_pack("{s:s, s:{s:s}}", "key", k, "value", "stringValue", v);
}

static int add_resource(void *ctx, const char *k, const char *v)
{
	kv_set(ctx, kv_str(k, v));
	return 0;
}

void trace_endpoint(const char *traces_endpoint, const char *base, char *out, size_t n)
{
	if (traces_endpoint && *traces_endpoint) {
		/* As given; only an empty path becomes "/" (exporter.md). */
		const char *sch = strstr(traces_endpoint, "://");
		int bare = sch && !strchr(sch + 3, '/');
		snprintf(out, n, "%s%s", traces_endpoint, bare ? "/" : "");
	} else if (base && *base) {
		size_t len = strlen(base);
		snprintf(out, n, "%s%sv1/traces", base, len && base[len - 1] == '/' ? "" : "/");
	} else {
		snprintf(out, n, "%s", DEFAULT_ENDPOINT);
	}
}

int trace_parse_parent(const char *v, char trace_id[33], char span_id[17], unsigned *flags)
{
	/* version "-" trace-id "-" parent-id "-" flags; a later version may
	 * append fields after another "-". */
	if (!v || strlen(v) < TRACE_PARENT_LEN || v[2] != '-' || v[35] != '-' || v[52] != '-' ||
	    (v[TRACE_PARENT_LEN] && (v[0] == '0' && v[1] == '0')) ||
	    (v[TRACE_PARENT_LEN] && v[TRACE_PARENT_LEN] != '-'))
		return -1;
	if (!strncmp(v, "ff", 2))
		return -1;
	int zt = 1, zs = 1;
	for (int i = 0; i < TRACE_PARENT_LEN; i++) {
		if (i == 2 || i == 35 || i == 52)
			continue;
		int h = hexval(v[i]);
		if (h < 0 || isupper((unsigned char)v[i]))
			return -1;
		if (i > 2 && i < 35 && h)
			zt = 0;
		if (i > 35 && i < 52 && h)
			zs = 0;
	}
	if (zt || zs)
		return -1;
	memcpy(trace_id, v + 3, 32);
	trace_id[32] = 0;
	memcpy(span_id, v + 36, 16);
	span_id[16] = 0;
	*flags = (unsigned)(hexval(v[53]) * 16 + hexval(v[54]));
	return 0;
}

static void note(struct trace_config *c, const char *fmt, const char *what)
{
	if (!c->note[0])
		snprintf(c->note, sizeof c->note, fmt, what);
}

/* The exporter's bounds: AGENTKIT_TRACE_EXIT_TIMEOUT (a duration, 0 allowed)
 * and OTEL_BSP_MAX_QUEUE_SIZE (spans); a bad value keeps the default. */
static void read_bounds(struct trace_config *c)
{
	const char *w = otel_env("AGENTKIT_TRACE_EXIT_TIMEOUT"), *q = otel_env("OTEL_BSP_MAX_QUEUE_SIZE");
	struct core_err e = { 0 };
	c->wait_ms = DEFAULT_WAIT_MS;
	if (w && core_parse_duration(w, &c->wait_ms, &e)) {
		c->wait_ms = DEFAULT_WAIT_MS;
		note(c, "AGENTKIT_TRACE_EXIT_TIMEOUT: invalid duration '%s': 1s used", w);
	}
	char *end = NULL;
	long long n = q ? strtoll(q, &end, 10) : 0;
	c->queue_max = DEFAULT_QUEUE_MAX;
	if (q && (end == q || *end || n <= 0))
		note(c, "OTEL_BSP_MAX_QUEUE_SIZE: '%s' is not a positive number of spans: 2048 used",
		     q);
	else if (q)
		c->queue_max = (size_t)n;
}

/* OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. */
static void read_sampler(struct trace_config *c)
{
	static const struct { const char *name; enum trace_sampler s; } names[] = {
		{ "always_on", TRACE_ALWAYS_ON }, { "always_off", TRACE_ALWAYS_OFF },
		{ "traceidratio", TRACE_RATIO }, { "parentbased_always_on", TRACE_PARENT_ALWAYS_ON },
		{ "parentbased_always_off", TRACE_PARENT_ALWAYS_OFF },
		{ "parentbased_traceidratio", TRACE_PARENT_RATIO },
	};
	const char *v = otel_env("OTEL_TRACES_SAMPLER"), *arg = otel_env("OTEL_TRACES_SAMPLER_ARG");
	size_t i = 0;
	c->sampler = TRACE_PARENT_ALWAYS_ON;
	c->ratio = 1.0;
	for (; v && i < sizeof names / sizeof names[0] && strcmp(v, names[i].name); i++)
		;
	if (v && i == sizeof names / sizeof names[0])
		note(c, "OTEL_TRACES_SAMPLER '%s' is not a known sampler: parentbased_always_on "
		     "used", v);
	else if (v)
		c->sampler = names[i].s;
	if (c->sampler != TRACE_RATIO && c->sampler != TRACE_PARENT_RATIO)
		return;
	char *end = NULL;
	double r = arg ? strtod(arg, &end) : 1.0;
	if (arg && (end == arg || *end || !(r >= 0 && r <= 1)))
		note(c, "OTEL_TRACES_SAMPLER_ARG '%s' is not a ratio from 0 to 1: 1.0 used", arg);
	else
		c->ratio = r;
}

/* The OTLP exporter's settings: 0, 1 when they turn tracing off (noted,
 * c released), -1 without memory. */
static int read_otlp(struct trace_config *c)
{
	const char *proto = env2("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	                         "OTEL_EXPORTER_OTLP_PROTOCOL");
	if (proto && !strcmp(proto, "grpc")) {
		note(c, "tracing off: OTLP protocol '%s' is not supported: set "
		     "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf or http/json (a collector's "
		     "port 4318)", proto);
		trace_config_release(c);
		return 1;
	}
	if (proto && strcmp(proto, "http/json") && strcmp(proto, "http/protobuf")) {
		note(c, "tracing off: OTLP protocol '%s' is not one of http/protobuf, http/json",
		     proto);
		trace_config_release(c);
		return 1;
	}
	/* http/protobuf is the SDKs' default (exporter.md: SHOULD). */
	c->protocol = proto && !strcmp(proto, "http/json") ? TRACE_JSON : TRACE_PROTOBUF;
	const char *z = env2("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
	                     "OTEL_EXPORTER_OTLP_COMPRESSION");
	c->gzip = z && !strcmp(z, "gzip");
	if (z && !c->gzip && strcmp(z, "none"))
		note(c, "trace export: compression '%s' is not one of gzip, none: none used", z);
	char url[2048];
	trace_endpoint(otel_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
	               otel_env("OTEL_EXPORTER_OTLP_ENDPOINT"), url, sizeof url);
	if (!(c->url = strdup(url)))
		return -1;
	const char *hv[] = { "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS" };
	for (int i = 0; i < 2; i++) {
		int r = kv_each(otel_env(hv[i]), add_header, c);
		if (r == -2)
			return -1;
		if (r == -1)
			note(c, "trace headers: %s is malformed (or a value holds a line "
			     "break or %%00): ignored from the bad entry on", hv[i]);
	}
	const char *t = env2("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT");
	char *end = NULL;
	long long ms = t ? strtoll(t, &end, 10) : 0;
	c->timeout_ms = DEFAULT_TIMEOUT_MS;
	if (t && (end == t || *end || ms <= 0))
		note(c, "trace export: timeout '%s' is not a positive number of milliseconds: "
		     "10000 used", t);
	else if (t)
		c->timeout_ms = ms;
	const char *tls[3] = {
		env2("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE"),
		env2("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
		     "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"),
		env2("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY"),
	};
	char **dst[3] = { &c->ca_file, &c->cert_file, &c->key_file };
	for (int i = 0; i < 3; i++)
		if (tls[i] && !(*dst[i] = strdup(tls[i])))
			return -1;
	return 0;
}

/* The resource: OTEL_RESOURCE_ATTRIBUTES, the service's name and version
 * and the SDK's; CORE_ENOMEM without memory. */
static enum core_status read_resource(struct trace_config *c, const char *default_service,
                                      const char *version)
{
	if (!(c->resource = json_array()))
		return CORE_ENOMEM;
	int r = kv_each(otel_env("OTEL_RESOURCE_ATTRIBUTES"), add_resource, c->resource);
	if (r == -2)
		return CORE_ENOMEM;
	if (r == -1) {
		/* specification/resource/sdk.md: discard the whole value. */
		json_array_clear(c->resource);
		note(c, "%s is malformed: ignored", "OTEL_RESOURCE_ATTRIBUTES");
	}
	int has_name = 0;
	size_t i;
	json_t *kv;
	json_array_foreach(c->resource, i, kv)
		has_name |= !strcmp(json_string_value(json_object_get(kv, "key")), "service.name");
	if (otel_env("OTEL_SERVICE_NAME") || !has_name)
		kv_set(c->resource, kv_str("service.name", otel_env("OTEL_SERVICE_NAME")
		                            ? otel_env("OTEL_SERVICE_NAME") : default_service));
	kv_set(c->resource, kv_str("service.version", version));
	kv_set(c->resource, kv_str("telemetry.sdk.name", "agentkit"));
	kv_set(c->resource, kv_str("telemetry.sdk.language", "c"));
	return CORE_OK;
}

enum core_status trace_config_from_env(struct trace_config *c, int flag_on, const char *file,
                                       const char *default_service, const char *version)
{
	memset(c, 0, sizeof *c);
	int on = flag_on || file || truthy(otel_env("AGENTKIT_TRACE"));
	const char *ex = otel_env("OTEL_TRACES_EXPORTER");
	/* Only a case-insensitive "true" disables (sdk-environment-variables.md). */
	const char *off = otel_env("OTEL_SDK_DISABLED");
	if (!on || (off && !strcasecmp(off, "true")))
		return CORE_OK;
	const char *gk = otel_env("GENKIT_TELEMETRY_SERVER");
	if (gk) {
		size_t len = strlen(gk);
		if (asprintf(&c->genkit_url, "%.*s/api/traces",
		             (int)(len && gk[len - 1] == '/' ? len - 1 : len), gk) < 0) {
			c->genkit_url = NULL;
			goto nomem;
		}
	}
	if (file)
		c->exporter = TRACE_CONSOLE;
	else if (!ex || !strcmp(ex, "otlp"))
		c->exporter = TRACE_OTLP;
	else if (!strcmp(ex, "console"))
		c->exporter = TRACE_CONSOLE;
	else if (strcmp(ex, "none")) {
		note(c, "tracing off: OTEL_TRACES_EXPORTER '%s' is not one of otlp, console, none",
		     ex);
		trace_config_release(c);
		return CORE_OK;
	}
	if (!trace_config_on(c))
		return CORE_OK;
	read_bounds(c);
	read_sampler(c);
	if (file && !(c->file = strdup(file)))
		goto nomem;
	if (c->exporter == TRACE_OTLP) {
		int r = read_otlp(c);
		if (r < 0)
			goto nomem;
		if (r > 0)
			return CORE_OK;
	}
	if (read_resource(c, default_service, version))
		goto nomem;
	const char *tp = otel_env("TRACEPARENT");
	char tid[33], sid[17];
	unsigned fl;
	if (tp && trace_parse_parent(tp, tid, sid, &fl))
		note(c, "TRACEPARENT '%.60s' is not a W3C traceparent: a new trace is started", tp);
	else if (tp)
		snprintf(c->parent, sizeof c->parent, "%.55s", tp);
	if (c->parent[0] && otel_env("TRACESTATE") && !(c->tracestate = strdup(otel_env("TRACESTATE"))))
		goto nomem;
	return CORE_OK;
nomem:
	trace_config_release(c);
	return CORE_ENOMEM;
}

int trace_config_on(const struct trace_config *c)
{
	return c->exporter != TRACE_OFF || c->genkit_url;
}

void trace_config_release(struct trace_config *c)
{
	free(c->url);
	free(c->genkit_url);
	for (int i = 0; c->headers[i]; i++)
		free(c->headers[i]);
	free(c->file);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	free(c->tracestate);
	json_decref(c->resource);
	char keep[sizeof c->note];
	memcpy(keep, c->note, sizeof keep);
	memset(c, 0, sizeof *c);
	memcpy(c->note, keep, sizeof keep);
}

