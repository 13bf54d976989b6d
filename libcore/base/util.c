/* util.c - durations, sizes, clocks. */
#include "util.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum core_status core_parse_duration(const char *s, int64_t *ms,
                                     struct core_err *e)
{
	char *end;
	double v, unit = 1000;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !isfinite(v) || v < 0)
		goto bad;
	if (!strcmp(end, "ms"))
		unit = 1;
	else if (!strcmp(end, "s") || !*end)
		unit = 1000;
	else if (!strcmp(end, "m"))
		unit = 60000;
	else if (!strcmp(end, "h"))
		unit = 3600000;
	else
		goto bad;
	if (v * unit > 9e15)
		goto bad;
	*ms = (int64_t)llround(v * unit);
	return CORE_OK;
bad:
	return core_fail(e, CORE_EUSAGE,
	                 "invalid duration '%s' (use e.g. 250ms, 30s, 5m, 1h)", s);
}

enum core_status core_duration_setting(const char *flag_name, const char *flag_value,
                                       const char *env, int64_t dflt_ms, int64_t *ms,
                                       struct core_err *e)
{
	const char *v = flag_value, *name = flag_name;
	struct core_err pe = { 0 };
	if (!v) {
		v = env ? getenv(env) : NULL;
		name = env;
	}
	*ms = dflt_ms;
	if (!v || !*v)
		return CORE_OK;
	if (core_parse_duration(v, ms, &pe))
		return core_fail(e, CORE_EUSAGE, "%s: %s", name, pe.msg);
	if (*ms <= 0)
		return core_fail(e, CORE_EUSAGE, "%s: must be positive", name);
	return CORE_OK;
}

enum core_status core_parse_size(const char *s, uint64_t *bytes,
                                 struct core_err *e)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;
	errno = 0;
	if (*s == '-')
		goto bad;
	v = strtoull(s, &end, 10);
	if (end == s || errno)
		goto bad;
	if (!strcmp(end, "K") || !strcmp(end, "k"))
		shift = 10;
	else if (!strcmp(end, "M"))
		shift = 20;
	else if (!strcmp(end, "G"))
		shift = 30;
	else if (*end)
		goto bad;
	if (v > (UINT64_MAX >> shift))
		goto bad;
	*bytes = (uint64_t)v << shift;
	return CORE_OK;
bad:
	return core_fail(e, CORE_EUSAGE,
	                 "invalid size '%s' (use e.g. 4096, 64K, 16M, 1G)", s);
}

const char *core_duration_text(int64_t ms, char buf[CORE_DURATION_MAX])
{
	snprintf(buf, CORE_DURATION_MAX, ms % 1000 ? "%lldms" : "%llds",
	         (long long)(ms % 1000 ? ms : ms / 1000));
	return buf;
}

int64_t core_now_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#include <uuid/uuid.h>

int64_t core_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void core_time_format(int64_t ns, char *buf)
{
	time_t sec = (time_t)(ns / 1000000000);
	long frac = (long)(ns % 1000000000);
	struct tm tm;
	size_t n;
	if (frac < 0) {
		frac += 1000000000;
		sec--;
	}
	gmtime_r(&sec, &tm);
	n = strftime(buf, CORE_TIME_MAX, "%Y-%m-%dT%H:%M:%S", &tm);
	if (frac) {
		int digits = 9;
		while (frac % 10 == 0) {
			frac /= 10;
			digits--;
		}
		n += (size_t)snprintf(buf + n, CORE_TIME_MAX - n, ".%0*ld", digits, frac);
	}
	snprintf(buf + n, CORE_TIME_MAX - n, "Z");
}

enum core_status core_time_parse(const char *s, int64_t *ns)
{
	struct tm tm = { 0 };
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	int64_t frac = 0, off = 0;
	time_t sec;
	if (!p)
		return CORE_EINVAL;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 9)
				frac = frac * 10 + (*p - '0');
		if (!digits)
			return CORE_EINVAL;
		for (; digits < 9; digits++)
			frac *= 10;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm;
		if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
			return CORE_EINVAL;
		off = (int64_t)(hh * 3600 + mm * 60) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return CORE_EINVAL;
	}
	if (*p)
		return CORE_EINVAL;
	sec = timegm(&tm);
	/* int64 nanoseconds cover 1677-09-21 .. 2262-04-11. */
	if ((int64_t)sec - off < -9223372035LL || (int64_t)sec - off > 9223372035LL)
		return CORE_ETOOBIG;
	*ns = ((int64_t)sec - off) * 1000000000 + frac;
	return CORE_OK;
}

void core_uuid(char *buf)
{
	uuid_t u;
	uuid_generate_random(u);
	uuid_unparse_lower(u, buf);
}

void core_uuid_named(char *buf, const char *name)
{
	/* agentkit's namespace: a UUID drawn once, never to change (it would
	 * change every key's run ID) */
	static const uuid_t ns = { 0x4e, 0x6b, 0x1f, 0x3a, 0x2c, 0x55, 0x5d, 0x0e,
	                           0x9a, 0x61, 0x57, 0x0c, 0x8d, 0x2b, 0x19, 0xa4 };
	uuid_t u;
	uuid_generate_sha1(u, ns, name, strlen(name));
	uuid_unparse_lower(u, buf);
}

int core_dl_load(const char *soname, const char *const *names, void **const *slots,
                 size_t n, char *why, size_t whylen)
{
	/* Lazy: libcurl's own libraries are mostly linked BIND_NOW already,
	 * and RTLD_NOW would also bind every call of the few that are not
	 * (Kerberos, nghttp2, gmp, ...), which a process that links libcurl
	 * at start-up never does: about 2.6 M instructions, 15% of a
	 * provider turn. */
	void *h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		snprintf(why, whylen, "%s", dlerror());
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (!(*slots[i] = dlsym(h, names[i]))) {
			snprintf(why, whylen, "%s has no %s", soname, names[i]);
			return 0;
		}
	return 1;
}

void core_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}
