/*
 * spawn.h - start a child process with its stdin, stdout and stderr on
 * pipes: how agentkit runs tools, custom-agent handlers, transforms and
 * retrieval commands.
 *
 * The child runs in its own process group (so a timeout or an abort can
 * signal everything it started), with default signal dispositions and an
 * empty signal mask (what the caller ignores or blocks is not inherited),
 * and with only descriptors 0-2 open.  argv[0] with a '/' is executed as
 * is, otherwise looked up on PATH; when exec fails the child writes
 * "cannot execute 'x': why" to its stderr pipe and exits 127 (not found)
 * or 126.  The parent's ends are non-blocking and close-on-exec.
 */
#ifndef CORE_SPAWN_H
#define CORE_SPAWN_H

#include <sys/types.h>

#include "status.h"

/*
 * The key policy: is the environment entry "NAME=..." (or a bare NAME) a
 * secret no child may inherit unless allowed?  The processes layer stands
 * below the models and the store, so it knows neither the providers nor
 * the store's credentials: the program gives the policy to
 * spawn_protect_keys() (every command gives cli_secret_variable(): the
 * provider keys of model_key_variable(), every key or header variable of
 * a provider in registry.c's table and every variable the models file
 * names, and the store's of store_secret_variable(), PGPASSWORD,
 * PGPASSFILE and an AGENTKIT_STORE that holds a password), and a new
 * provider's key is hidden as soon as the provider is in that table.
 * "Key" below means any entry the policy names.
 */
typedef int spawn_key_fn(const char *entry);

/*
 * Is entry a key under the policy given to spawn_protect_keys()?  0 when
 * none was given: spawn_start() then refuses to start any child, so a
 * program that forgot the policy fails loudly instead of leaking a key.
 */
int spawn_provider_key(const char *entry);

/*
 * Keep the provider keys from the process's children and from other
 * processes of the same user; call once at the start of main, before any
 * thread or child.  Makes the process non-dumpable (PR_SET_DUMPABLE 0: no
 * core dump, no ptrace or /proc/PID/mem by same-user processes, its
 * /proc/PID files owned by root) - a fork inherits that, an exec resets
 * it - and moves each key's "NAME=value" string out of the environment
 * block the kernel exposes as /proc/PID/environ: the string is copied to
 * the heap (getenv() and the tools a manifest allows a key still see it)
 * and the original bytes of the value are overwritten with zeros.  Only
 * CORE_ENOMEM can fail it (nothing is changed then).
 */
enum core_status spawn_protect_keys(spawn_key_fn *is_key, struct core_err *e);

/* Is the environment entry "NAME=..." one of names (a NULL-terminated list)? */
int spawn_env_listed(const char *const *names, const char *entry);

/*
 * Would spawn_start() find the program argv0: with a '/', an executable
 * file there; otherwise one in a directory of PATH (unset: /bin:/usr/bin,
 * as execvpe() has it).  Checked before a run that needs it, so a missing
 * one is told before anything starts; exec may still fail later.
 */
int spawn_program_found(const char *argv0);

/* Close *fd if open and mark it closed (-1). */
void spawn_close_fd(int *fd);

struct spawn {
	pid_t pid;
	int in_fd, out_fd, err_fd;
};

/*
 * Start argv with environment env (both borrowed; they only need to live
 * through the call): posix_spawn(), a vfork-style start that copies none
 * of the caller's memory, so a big threaded caller (agent-serve) starts
 * children as cheaply as a small one; when that fails (exec or chdir),
 * fork and exec, so that the child says why as described above.  what names the child in messages ("cannot
 * start WHAT: fork: ...").  CORE_ESYS on failure, with nothing left open;
 * CORE_EINTERNAL before spawn_protect_keys() gave the key policy.
 */
enum core_status spawn_start(char *const argv[], char *const env[], const char *what,
                             struct spawn *s, struct core_err *e);

/*
 * spawn_start() in directory cwd (NULL: ours).  A directory the child
 * cannot enter is its failure, as exec's: "cannot change to directory
 * 'x': why" on its stderr pipe, exit status 126.
 */
enum core_status spawn_start_in(char *const argv[], char *const env[], const char *cwd,
                                const char *what, struct spawn *s, struct core_err *e);

/* Send sig to the child's process group, and to the child itself (should
 * it have left the group). */
void spawn_signal(pid_t pid, int sig);

/*
 * Kill whatever is left of the child's process group (SIGKILL) and reap
 * the child, waiting for it (again on EINTR).  The unreaped child, even a
 * zombie, keeps its pid, the group's ID, ours: kill(-pid) never reaches a
 * stranger's group.  Returns waitpid()'s result (pid, or -1 when it was
 * reaped behind our back: SIGCHLD ignored), its status in *status.
 */
pid_t spawn_reap(pid_t pid, int *status);

/*
 * The script to give "/bin/sh -c" for the shell command cmd: "exec CMD"
 * (new; free() it) when cmd is one simple command (no operators,
 * redirections, substitutions or keywords outside quotes, no leading
 * assignment), so the shell exec()s it even where it would not (dash does
 * not exec a lone command): the command itself then holds the pipes, its
 * closing stdout is seen at once, and a command not found is still the
 * shell's "CMD: not found".  NULL otherwise, or when out of memory: give
 * cmd as it is.
 */
char *spawn_exec_script(const char *cmd);

#endif
