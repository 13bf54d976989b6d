/* spawn.c - children on pipes, in their own process group; see spawn.h. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The key policy, set once at the start of main (spawn_protect_keys()). */
static spawn_key_fn *key_policy;

int spawn_provider_key(const char *entry)
{
	return key_policy && key_policy(entry);
}

int spawn_env_listed(const char *const *names, const char *entry)
{
	const char *eq = strchr(entry, '=');
	size_t len = eq ? (size_t)(eq - entry) : strlen(entry);
	for (; names && *names; names++)
		if (strlen(*names) == len && !strncmp(*names, entry, len))
			return 1;
	return 0;
}

/* An executable regular file at path. */
static int executable(const char *path)
{
	struct stat sb;
	return !stat(path, &sb) && S_ISREG(sb.st_mode) && !access(path, X_OK);
}

int spawn_program_found(const char *argv0)
{
	const char *path = getenv("PATH");
	char buf[4096];
	if (!argv0 || !*argv0)
		return 0;
	if (strchr(argv0, '/'))
		return executable(argv0);
	if (!path)
		path = "/bin:/usr/bin";
	for (const char *p = path;; p++) {
		size_t n = strcspn(p, ":");
		/* An empty entry is the current directory, as for execvpe(). */
		int len = snprintf(buf, sizeof buf, "%.*s%s%s", (int)n, p, n ? "/" : "", argv0);
		if (len > 0 && (size_t)len < sizeof buf && executable(buf))
			return 1;
		p += n;
		if (!*p)
			return 0;
	}
}

enum core_status spawn_protect_keys(spawn_key_fn *is_key, struct core_err *e)
{
	size_t n = 0, k = 0;
	char **p, **copies;
	key_policy = is_key;
	/* Before anything else: a same-user process that could ptrace us (or
	 * read a core file) would read the keys wherever they live. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	for (p = environ; p && *p; p++)
		n += spawn_provider_key(*p);
	if (!n)
		return CORE_OK;
	if (!(copies = calloc(n, sizeof *copies)))
		return core_fail(e, CORE_ENOMEM, "out of memory");
	for (p = environ; *p; p++)
		if (spawn_provider_key(*p) && !(copies[k++] = strdup(*p))) {
			while (k)
				free(copies[--k]);
			free(copies);
			return core_fail(e, CORE_ENOMEM, "out of memory");
		}
	/* Every copy made: swap them in and wipe the originals' values.  The
	 * copies live as long as the process (environ points at them). */
	for (k = 0, p = environ; *p; p++) {
		if (!spawn_provider_key(*p))
			continue;
		char *value = strchr(*p, '=');
		if (value)
			explicit_bzero(value + 1, strlen(value + 1));
		*p = copies[k++];
	}
	free(copies);
	return CORE_OK;
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void spawn_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void child(char *const argv[], char *const env[], const char *cwd, int in, int out,
                  int err)
{
	static const int sigs[] = { SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD };
	sigset_t none;
	char msg[512];
	int len, saved;
	setpgid(0, 0);
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		signal(sigs[i], SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(127);
	closefrom(3);
	if (cwd && chdir(cwd) < 0) {
		saved = errno;
		len = snprintf(msg, sizeof msg, "cannot change to directory '%s': %s", cwd,
		               strerror(saved));
		if (len > 0 && write(2, msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1) < 0)
			_exit(126);
		_exit(126);
	}
	if (strchr(argv[0], '/'))
		execve(argv[0], argv, env);
	else
		execvpe(argv[0], argv, env);
	/* The message lands in the stderr pipe, so in the caller's error. */
	saved = errno;
	len = snprintf(msg, sizeof msg, "cannot execute '%s': %s", argv[0], strerror(saved));
	if (len > 0 && write(2, msg, (size_t)len < sizeof msg ? (size_t)len : sizeof msg - 1) < 0)
		_exit(127);
	_exit(saved == ENOENT ? 127 : 126);
}

/*
 * The usual way: posix_spawn(), which glibc does with a vfork-style
 * clone (no copy of our page tables: cheap from a big, threaded
 * process) and the same child as child() makes: its own group, the
 * signals above at their defaults, an empty mask, descriptors 0-2 only.
 * Nonzero when it could not (the program not found, cannot execute, a
 * directory it cannot enter, an attribute refused): the caller then
 * forks, so that the child tells why as child() does.
 */
static int fast_spawn(char *const argv[], char *const env[], const char *cwd, int in, int out,
                      int err, pid_t *pid)
{
	static const int sigs[] = { SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t def, none;
	int r;
	sigemptyset(&def);
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
		sigaddset(&def, sigs[i]);
	sigemptyset(&none);
	if (posix_spawn_file_actions_init(&fa))
		return -1;
	if (posix_spawnattr_init(&at)) {
		posix_spawn_file_actions_destroy(&fa);
		return -1;
	}
	r = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
	                                  POSIX_SPAWN_SETSIGMASK);
	r = r ? r : posix_spawnattr_setpgroup(&at, 0);
	r = r ? r : posix_spawnattr_setsigdefault(&at, &def);
	r = r ? r : posix_spawnattr_setsigmask(&at, &none);
	r = r ? r : posix_spawn_file_actions_adddup2(&fa, in, 0);
	r = r ? r : posix_spawn_file_actions_adddup2(&fa, out, 1);
	r = r ? r : posix_spawn_file_actions_adddup2(&fa, err, 2);
	r = r ? r : posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	if (!r && cwd)
		r = posix_spawn_file_actions_addchdir_np(&fa, cwd);
	if (!r)
		r = strchr(argv[0], '/') ? posix_spawn(pid, argv[0], &fa, &at, argv, env)
		                         : posix_spawnp(pid, argv[0], &fa, &at, argv, env);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return r;
}

enum core_status spawn_start(char *const argv[], char *const env[], const char *what,
                             struct spawn *s, struct core_err *e)
{
	return spawn_start_in(argv, env, NULL, what, s, e);
}

enum core_status spawn_start_in(char *const argv[], char *const env[], const char *cwd,
                                const char *what, struct spawn *s, struct core_err *e)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 };
	pid_t pid;
	s->pid = -1;
	s->in_fd = s->out_fd = s->err_fd = -1;
	if (!key_policy)
		return core_fail(e, CORE_EINTERNAL, "cannot start %s: no key policy "
		                 "(spawn_protect_keys() was not called)", what);
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
		core_fail_sys(e, "cannot start %s: pipe", what);
		goto fail;
	}
	if (fast_spawn(argv, env, cwd, in[0], out[1], err[1], &pid)) {
		if ((pid = fork()) < 0) {
			core_fail_sys(e, "cannot start %s: fork", what);
			goto fail;
		}
		if (pid == 0)
			child(argv, env, cwd, in[0], out[1], err[1]);
	}
	/* Both sides set the group: whichever runs first, signals sent right
	 * after this returns reach the child's group. */
	setpgid(pid, pid);
	close(in[0]);
	close(out[1]);
	close(err[1]);
	s->pid = pid;
	s->in_fd = in[1];
	s->out_fd = out[0];
	s->err_fd = err[0];
	set_nonblock(s->in_fd);
	set_nonblock(s->out_fd);
	set_nonblock(s->err_fd);
	return CORE_OK;
fail:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	return e->st;
}

void spawn_signal(pid_t pid, int sig)
{
	if (pid > 0) {
		kill(-pid, sig);
		kill(pid, sig);
	}
}

pid_t spawn_reap(pid_t pid, int *status)
{
	pid_t r;
	*status = 0;
	if (pid <= 0)
		return -1;
	kill(-pid, SIGKILL);
	while ((r = waitpid(pid, status, 0)) < 0 && errno == EINTR)
		;
	return r;
}

/*
 * Whether cmd is one simple command (no operators, redirections,
 * substitutions or keywords outside quotes, no leading assignment).
 */
static int one_simple_command(const char *cmd)
{
	static const char *const keywords[] = { "if", "for", "while", "until", "case", "{", "!",
	                                        "exec", "time", NULL };
	char q = 0;
	size_t first = strcspn(cmd + strspn(cmd, " \t"), " \t");
	const char *w = cmd + strspn(cmd, " \t");
	if (!first || memchr(w, '=', first))
		return 0;
	for (int i = 0; keywords[i]; i++)
		if (strlen(keywords[i]) == first && !strncmp(w, keywords[i], first))
			return 0;
	for (const char *p = cmd; *p; p++) {
		if (q) {
			if (*p == q)
				q = 0;
			else if (q == '"' && (*p == '$' || *p == '`' || *p == '\\'))
				return 0;
			continue;
		}
		if (*p == '\'' || *p == '"')
			q = *p;
		else if (strchr(";&|<>()`$\\\n#*?[~", *p))
			return 0;
	}
	return !q;
}

char *spawn_exec_script(const char *cmd)
{
	char *execd = NULL;
	if (one_simple_command(cmd) && asprintf(&execd, "exec %s", cmd) < 0)
		execd = NULL;
	return execd;
}
