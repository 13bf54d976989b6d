/*
 * driver.c - a small deterministic fuzzing engine for agentkit's targets.
 *
 * Links with one tests/fuzz/fuzz_*.c target in place of libFuzzer (gcc has
 * none), so `make check` can fuzz on any build.  It takes libFuzzer's
 * spelling of the options that matter, so `make fuzz` and a replay read
 * the same with either engine:
 *
 *   fuzz_X [-runs=N] [-max_total_time=S] [-seed=N] [-max_len=N]
 *          [-artifact_prefix=P] DIR|FILE...
 *
 * Directories are seed corpora: every seed runs once as is, then mutants
 * (bit flips, interesting bytes, inserts, deletes, duplicated ranges,
 * splices and cross-overs of seeds, tokens) until -runs or -max_total_time.
 * The same seed and corpus give the same inputs, so a run is reproducible.
 * Files alone are replayed, each once.
 *
 * On a crash (a signal, a sanitizer report, a broken FUZZ_CHECK) the input
 * is saved as P crash-HASH and the replay command printed.  Under ASan a
 * leak check runs after every batch of inputs; the inputs of a leaking
 * batch are saved (leak-HASH) since the leak cannot be pinned on one of
 * them in-process - replaying them (one leak check per file) names it.
 */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#define HAVE_ASAN 1
#else
#define HAVE_ASAN 0
#endif

#define LEAK_BATCH 64

struct input {
	uint8_t *p;
	size_t n;
};

static const char *prog;
static const char *artifact_prefix = "";
static pid_t main_pid;
static const uint8_t *cur;           /* the input being run */
static size_t cur_n;
static volatile sig_atomic_t saving;

static uint64_t rng;

static uint64_t next_rand(void)
{
	/* xorshift64*: small, fast, and the same everywhere. */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1DULL;
}

static size_t below(size_t n)
{
	return n ? (size_t)(next_rand() % n) : 0;
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	while (n--)
		h = (h ^ *p++) * 0x100000001b3ULL;
	return h;
}

/* Async-signal-safe: write(2) only. */
static void say(const char *s)
{
	size_t n = strlen(s);
	while (n) {
		ssize_t w = write(2, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void hex(uint64_t v, char out[17])
{
	static const char d[] = "0123456789abcdef";
	for (int i = 15; i >= 0; i--, v >>= 4)
		out[i] = d[v & 15];
	out[16] = 0;
}

/* Save p[0..n) as PREFIX KIND-HASH and print how to replay it.  Only
 * async-signal-safe calls: this runs from signal handlers. */
static void save(const char *kind, const uint8_t *p, size_t n)
{
	char path[4096], h[17];
	size_t o = 0;
	const char *parts[3] = { artifact_prefix, kind, "-" };
	hex(fnv(p, n), h);
	for (int i = 0; i < 3; i++) {
		size_t l = strlen(parts[i]);
		if (o + l >= sizeof path - 20)
			return;
		memcpy(path + o, parts[i], l);
		o += l;
	}
	memcpy(path + o, h, 17);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		say("fuzz: cannot save the input to ");
		say(path);
		say("\n");
		return;
	}
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			break;
		p += w;
		n -= (size_t)w;
	}
	close(fd);
	say("fuzz: input saved as ");
	say(path);
	say("\nfuzz: replay with: ");
	say(prog);
	say(" ");
	say(path);
	say("\n");
}

static void save_current(void)
{
	if (getpid() != main_pid || saving || !cur)
		return;
	saving = 1;
	save("crash", cur, cur_n);
}

static void on_signal(int sig)
{
	save_current();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int is_dir(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int read_file(const char *path, struct input *in)
{
	FILE *f = fopen(path, "rb");
	uint8_t buf[65536];
	size_t r;
	in->p = NULL;
	in->n = 0;
	if (!f)
		return -1;
	while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
		uint8_t *np = realloc(in->p, in->n + r);
		if (!np)
			abort();
		memcpy(np + in->n, buf, r);
		in->p = np;
		in->n += r;
	}
	fclose(f);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Append the regular files of dir, in name order (reproducible). */
static void load_dir(const char *dir, struct input **v, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t nn = 0;
	if (!d) {
		fprintf(stderr, "%s: cannot read corpus '%s': %s\n", prog, dir, strerror(errno));
		exit(2);
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		names = realloc(names, (nn + 1) * sizeof *names);
		size_t l = strlen(dir) + strlen(de->d_name) + 2;
		names[nn] = malloc(l);
		snprintf(names[nn++], l, "%s/%s", dir, de->d_name);
	}
	closedir(d);
	qsort(names, nn, sizeof *names, by_name);
	for (size_t i = 0; i < nn; i++) {
		struct input in;
		if (!is_dir(names[i]) && read_file(names[i], &in) == 0) {
			*v = realloc(*v, (*n + 1) * sizeof **v);
			(*v)[(*n)++] = in;
		}
		free(names[i]);
	}
	free(names);
}

static const char *const tokens[] = {
	"{", "}", "[", "]", "\"", ":", ",", "\\", "\\u0000", "\\ud800", "null",
	"true", "false", "0", "-0", "1e999", "-1.5e-7", "18446744073709551616",
	"12345678901234567890", "9223372036854775807", "-9223372036854775808",
	"0.1", "1.0", "\n", "\r\n", "\r", "\t", " ", "\xef\xbb\xbf", "\xff",
	"\xc0\x80", "\xf4\x90\x80\x80", "/", "~0", "~1", "/-", "\"op\"", "\"path\"",
	"\"value\"", "\"from\"", "data:", "data: ", "event:", "id:", "error:",
	": ", "[DONE]", "{{", "}}", "{{#if ", "{{/if}}", "{{#each ", "{{/each}}",
	"{{else}}", "{{~", "~}}", "@index", "../", "---\n", "&a", "*a", "<<: ",
	"!!str ", "- ", "? ", "\"message\"", "\"role\"", "\"content\"", "\"text\"",
	"\"resume\"", "\"toolRequest\"", "\"output\"", "\"custom\"", "\"part\"",
	"\"snapshotId\"", "\"sessionId\"", "\"state\"",
};

/* Apply one random mutation to buf (n bytes, room for max). */
static size_t mutate_once(uint8_t *buf, size_t n, size_t max,
                          const struct input *seeds, size_t nseeds)
{
	static const uint8_t interesting[] = {
		0, 0xff, 0x7f, 0x80, '"', '\\', '{', '}', '[', ']', ':', ',', '\n',
		'\r', '0', '9', '-', 'e', '.', '/', '~', ' ', 'a',
	};
	size_t pos = below(n + 1), len;
	const struct input *o;
	switch (below(9)) {
	case 0: /* flip a bit */
		if (n)
			buf[below(n)] ^= (uint8_t)(1u << below(8));
		return n;
	case 1: /* an interesting byte */
		if (n)
			buf[below(n)] = interesting[below(sizeof interesting)];
		return n;
	case 2: /* insert random bytes */
		len = 1 + below(4);
		if (n + len > max)
			return n;
		memmove(buf + pos + len, buf + pos, n - pos);
		for (size_t i = 0; i < len; i++)
			buf[pos + i] = (uint8_t)next_rand();
		return n + len;
	case 3: /* delete a range */
		if (!n)
			return n;
		pos = below(n);
		len = 1 + below(n - pos < 16 ? n - pos : 16);
		memmove(buf + pos, buf + pos + len, n - pos - len);
		return n - len;
	case 4: { /* duplicate a range (a token, an element, a line) */
		if (!n)
			return n;
		size_t from = below(n);
		len = 1 + below(n - from < 64 ? n - from : 64);
		if (n + len > max)
			return n;
		uint8_t tmp[64];
		memcpy(tmp, buf + from, len);
		memmove(buf + pos + len, buf + pos, n - pos);
		memcpy(buf + pos, tmp, len);
		return n + len;
	}
	case 5: /* a token */ {
		const char *t = tokens[below(sizeof tokens / sizeof *tokens)];
		len = strlen(t);
		if (n + len > max)
			return n;
		memmove(buf + pos + len, buf + pos, n - pos);
		memcpy(buf + pos, t, len);
		return n + len;
	}
	case 6: /* splice: keep a head, take another seed's tail */
		o = &seeds[below(nseeds)];
		if (!o->n)
			return n;
		{
			size_t from = below(o->n);
			len = o->n - from;
			if (pos + len > max)
				len = max - pos;
			memcpy(buf + pos, o->p + from, len);
			return pos + len;
		}
	case 7: /* cross-over: insert a piece of another seed */
		o = &seeds[below(nseeds)];
		if (!o->n)
			return n;
		{
			size_t from = below(o->n);
			len = 1 + below(o->n - from < 128 ? o->n - from : 128);
			if (n + len > max)
				return n;
			memmove(buf + pos + len, buf + pos, n - pos);
			memcpy(buf + pos, o->p + from, len);
			return n + len;
		}
	default: /* small arithmetic on a byte (digits, lengths) */
		if (n)
			buf[below(n)] += (uint8_t)(below(7) - 3);
		return n;
	}
}

static void run_one(const uint8_t *p, size_t n)
{
	/* A private copy, exactly n bytes long, so ASan sees overreads. */
	uint8_t *copy = malloc(n ? n : 1);
	if (!copy)
		abort();
	if (n)
		memcpy(copy, p, n);
	cur = copy;
	cur_n = n;
	LLVMFuzzerTestOneInput(copy, n);
	cur = NULL;
	free(copy);
}

/* Under ASan: non-zero when memory leaked since the last check. */
static int leaked(void)
{
#if HAVE_ASAN
	return __lsan_do_recoverable_leak_check();
#else
	return 0;
#endif
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int arg(const char *a, const char *name, const char **val)
{
	size_t l = strlen(name);
	if (strncmp(a, name, l) || a[l] != '=')
		return 0;
	*val = a + l + 1;
	return 1;
}

int main(int argc, char **argv)
{
	unsigned long long runs = 0, seed = 1;
	double max_time = 0;
	size_t max_len = 4096, nseeds = 0, nfiles = 0;
	struct input *seeds = NULL;
	const char *v;

	prog = argv[0];
	main_pid = getpid();
	for (int i = 1; i < argc; i++) {
		if (arg(argv[i], "-runs", &v))
			runs = strtoull(v, NULL, 10);
		else if (arg(argv[i], "-max_total_time", &v))
			max_time = strtod(v, NULL);
		else if (arg(argv[i], "-seed", &v))
			seed = strtoull(v, NULL, 10);
		else if (arg(argv[i], "-max_len", &v))
			max_len = strtoull(v, NULL, 10);
		else if (arg(argv[i], "-artifact_prefix", &v))
			artifact_prefix = v;
		else if (!strncmp(argv[i], "-help", 5)) {
			fprintf(stderr, "usage: %s [-runs=N] [-max_total_time=S] [-seed=N] "
			        "[-max_len=N] [-artifact_prefix=P] DIR|FILE...\n", prog);
			return 0;
		} else if (argv[i][0] == '-')
			fprintf(stderr, "%s: ignoring option '%s'\n", prog, argv[i]);
		else if (is_dir(argv[i]))
			load_dir(argv[i], &seeds, &nseeds);
		else
			nfiles++;
	}
	if (max_len < 16)
		max_len = 16;

	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGFPE, on_signal);
	signal(SIGILL, on_signal);
	signal(SIGABRT, on_signal);
#if HAVE_ASAN
	__sanitizer_set_death_callback(save_current);
#endif
	LLVMFuzzerInitialize(&argc, &argv);

	if (nfiles) {
		/* Replay: the files named, each once, with a leak check each. */
		int bad = 0;
		for (int i = 1; i < argc; i++) {
			struct input in;
			if (argv[i][0] == '-' || is_dir(argv[i]))
				continue;
			if (read_file(argv[i], &in)) {
				fprintf(stderr, "%s: cannot read '%s': %s\n", prog, argv[i],
				        strerror(errno));
				return 2;
			}
			fprintf(stderr, "%s: running %s (%zu bytes)\n", prog, argv[i], in.n);
			run_one(in.p, in.n);
			if (leaked()) {
				fprintf(stderr, "%s: %s leaks\n", prog, argv[i]);
				bad = 1;
			}
			free(in.p);
		}
		return bad;
	}
	if (!nseeds) {
		seeds = calloc(1, sizeof *seeds);
		nseeds = 1;
	}

	rng = seed * 0x9E3779B97F4A7C15ULL + 1;
	uint8_t *buf = malloc(max_len);
	struct input batch[LEAK_BATCH];
	size_t nbatch = 0;
	unsigned long long done = 0;
	uint64_t digest = 0;  /* of every input run: equal runs, equal digests */
	double start = now_s();
	if (!buf)
		abort();
	for (;; done++) {
		if (runs && done >= runs)
			break;
		if (max_time > 0 && now_s() - start >= max_time)
			break;
		size_t n;
		if (done < nseeds) {
			n = seeds[done].n < max_len ? seeds[done].n : max_len;
			if (n) /* an empty seed has no bytes (p is NULL) */
				memcpy(buf, seeds[done].p, n);
		} else {
			const struct input *s = &seeds[below(nseeds)];
			n = s->n < max_len ? s->n : max_len;
			if (n)
				memcpy(buf, s->p, n);
			for (size_t k = 1 + below(4); k; k--)
				n = mutate_once(buf, n, max_len, seeds, nseeds);
		}
		run_one(buf, n);
		digest = (digest ^ fnv(buf, n)) * 0x100000001b3ULL;
		if (HAVE_ASAN) {
			batch[nbatch].p = malloc(n ? n : 1);
			memcpy(batch[nbatch].p, buf, n);
			batch[nbatch++].n = n;
			if (nbatch == LEAK_BATCH || (runs && done + 1 >= runs)) {
				if (leaked()) {
					fprintf(stderr, "%s: memory leaked in one of the last %zu inputs\n",
					        prog, nbatch);
					for (size_t i = 0; i < nbatch; i++)
						save("leak", batch[i].p, batch[i].n);
					return 1;
				}
				while (nbatch)
					free(batch[--nbatch].p);
			}
		}
	}
	if (HAVE_ASAN && nbatch && leaked()) {
		fprintf(stderr, "%s: memory leaked in one of the last %zu inputs\n", prog, nbatch);
		for (size_t i = 0; i < nbatch; i++)
			save("leak", batch[i].p, batch[i].n);
		return 1;
	}
	while (nbatch)
		free(batch[--nbatch].p);
	char h[17];
	hex(digest, h);
	fprintf(stderr, "%s: %llu runs in %.1f s (seed %llu, %zu seeds, inputs %s), no crash\n",
	        prog, done, now_s() - start, seed, nseeds, h);
	free(buf);
	for (size_t i = 0; i < nseeds; i++)
		free(seeds[i].p);
	free(seeds);
	return 0;
}

/* Targets without one get this; a target's own definition wins (weak). */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}
