/* serve_listen.c - the sockets agent-serve may listen on besides its own
 * TCP one: a Unix socket it binds, and the one systemd's socket
 * activation passes (serve.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "serve.h"
#include "../base/util.h"

/* The first descriptor systemd passes (sd_listen_fds(3)). */
#define LISTEN_FDS_START 3

/* Is something listening at path?  (A socket file left by a server that
 * is gone refuses the connection.) */
static int someone_listens(const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;
	if (fd < 0)
		return 0;
	r = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
	close(fd);
	return r == 0;
}

enum core_status serve_listen_unix(const char *path, int *fd, struct core_err *e)
{
	struct sockaddr_un sa;
	struct stat st;
	mode_t old;
	int s, r;
	*fd = -1;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	if (!*path || strlen(path) >= sizeof sa.sun_path)
		return core_fail(e, CORE_EUSAGE, "'%s' is not a Unix socket path (1 to %zu bytes)",
		                 path, sizeof sa.sun_path - 1);
	memcpy(sa.sun_path, path, strlen(path));
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return core_fail(e, CORE_EUSAGE, "cannot listen on unix:%s: it exists and is "
			                 "not a socket", path);
		if (someone_listens(&sa))
			return core_fail(e, CORE_ESYS, "cannot listen on unix:%s: another server "
			                 "listens there", path);
		/* a socket file a server left behind: ours now */
		if (unlink(path) != 0 && errno != ENOENT)
			return core_fail_sys(e, "cannot remove the old socket unix:%s", path);
	}
	if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return core_fail_sys(e, "cannot make a Unix socket");
	/* Only the owner may connect until told otherwise (chmod, a group
	 * directory): the socket is agent-serve's door, and it has no auth
	 * of its own. */
	old = umask(0177);
	r = bind(s, (const struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (r != 0 || listen(s, 128) != 0) {
		int err = errno;
		close(s);
		return core_fail(e, CORE_ESYS, "cannot listen on unix:%s: %s", path, strerror(err));
	}
	*fd = s;
	return CORE_OK;
}

enum core_status serve_listen_activated(int *fd, struct core_err *e)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	char *end;
	long n;
	int listening = 0;
	socklen_t len = sizeof listening;
	*fd = -1;
	if (!pid || !fds)
		return CORE_OK;
	/* meant for another process (a parent's, inherited): not ours */
	if (strtol(pid, &end, 10) != (long)getpid() || *end)
		return CORE_OK;
	n = strtol(fds, &end, 10);
	/* taken: the children must not see them (sd_listen_fds(1)) */
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (*end || n < 0)
		return core_fail(e, CORE_EUSAGE, "LISTEN_FDS='%s' is not a count of sockets", fds);
	if (n == 0)
		return CORE_OK;
	if (n > 1)
		return core_fail(e, CORE_EUSAGE, "systemd passed %ld sockets (LISTEN_FDS): "
		                 "agent-serve listens on one", n);
	if (getsockopt(LISTEN_FDS_START, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 ||
	    !listening)
		return core_fail(e, CORE_EUSAGE, "the descriptor systemd passed (fd %d) is not a "
		                 "listening stream socket (Accept=no, ListenStream=)",
		                 LISTEN_FDS_START);
	if (fcntl(LISTEN_FDS_START, F_SETFD, FD_CLOEXEC) != 0)
		return core_fail_sys(e, "fd %d", LISTEN_FDS_START);
	*fd = LISTEN_FDS_START;
	return CORE_OK;
}

enum core_status serve_listen_describe(int fd, char *buf, size_t n, int *local,
                                       struct core_err *e)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	char host[INET6_ADDRSTRLEN];
	*local = 0;
	memset(&ss, 0, sizeof ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return core_fail_sys(e, "the listening socket");
	if (ss.ss_family == AF_UNIX) {
		const struct sockaddr_un *u = (const struct sockaddr_un *)&ss;
		*local = 1;
		snprintf(buf, n, "unix:%s", u->sun_path[0] ? u->sun_path : "(unnamed)");
		return CORE_OK;
	}
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
		*local = serve_is_loopback(host);
		snprintf(buf, n, "http://%s:%u", host, ntohs(a->sin_port));
		return CORE_OK;
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
		*local = serve_is_loopback(host);
		snprintf(buf, n, "http://[%s]:%u", host, ntohs(a->sin6_port));
		return CORE_OK;
	}
	return core_fail(e, CORE_EUSAGE, "the listening socket is neither TCP nor a Unix socket "
	                 "(family %d)", (int)ss.ss_family);
}
