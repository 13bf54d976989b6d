/* common.c - helpers every fuzz target links (see fuzz.h). */
#include "fuzz.h"

#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <unistd.h>

#include "../../libcore/base/buf.h"
#include "../../libcore/base/json.h"
#include "../../libcore/agent/runtime.h"

static char tmpdir[256];
static pid_t tmpdir_owner;

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb; (void)flag; (void)ftw;
	return remove(p);
}

static void tmpdir_cleanup(void)
{
	/* Forked children (tools, handlers) must not remove it. */
	if (tmpdir[0] && getpid() == tmpdir_owner)
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fuzz_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR");
		snprintf(tmpdir, sizeof tmpdir, "%s/agentkit-fuzz.XXXXXX",
		         base && *base ? base : "/tmp");
		if (!mkdtemp(tmpdir)) {
			perror("fuzz: mkdtemp");
			abort();
		}
		tmpdir_owner = getpid();
		atexit(tmpdir_cleanup);
	}
	return tmpdir;
}

char *fuzz_write(const char *name, const void *data, size_t n)
{
	size_t len = strlen(fuzz_tmpdir()) + strlen(name) + 2;
	char *path = malloc(len);
	int fd;
	if (!path)
		abort();
	snprintf(path, len, "%s/%s", fuzz_tmpdir(), name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
	if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n) || close(fd)) {
		perror(path);
		abort();
	}
	return path;
}

void fuzz_split(const uint8_t *data, size_t size, uint8_t sep,
                const uint8_t **a, size_t *na, const uint8_t **b, size_t *nb)
{
	const uint8_t *s = size ? memchr(data, sep, size) : NULL;
	*a = data;
	if (!s) {
		*na = size;
		*b = data + size;
		*nb = 0;
		return;
	}
	*na = (size_t)(s - data);
	*b = s + 1;
	*nb = size - *na - 1;
}

char *fuzz_dump(const json_t *v)
{
	struct core_buf b = CORE_BUF_INIT(CORE_BUF_UNLIMITED);
	enum core_status st = jv_dump(v, &b);
	FUZZ_CHECK(st == CORE_OK, "jv_dump failed: %s", core_strerror(st));
	return core_buf_detach(&b, NULL);
}

static enum core_status sink_chunk(void *ctx, const json_t *chunk)
{
	(void)ctx;
	FUZZ_CHECK(json_is_object(chunk), "a chunk that is not an object");
	return CORE_OK;
}

const struct rt_sink fuzz_rt_sink = { sink_chunk, NULL, NULL };
