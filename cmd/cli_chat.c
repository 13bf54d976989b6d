/* cli_chat.c - the chat's line editor (libedit); see cli_chat.h. */
#include <stddef.h>

#include "cli_chat.h"

#include <errno.h>
#include <fcntl.h>
#include <histedit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../libcore/base/util.h"

#define LIBEDIT "libedit.so.2"
#define CHAT_HISTORY 500        /* lines kept for the arrow keys, and in the file */
#define CHAT_HISTORY_LINE 4096  /* a longer line (a paste) is not kept in the file */

static struct {
	EditLine *(*init)(const char *, FILE *, FILE *, FILE *);
	void (*end)(EditLine *);
	int (*set)(EditLine *, int, ...);
	const char *(*get_line)(EditLine *, int *);
	History *(*hinit)(void);
	void (*hend)(History *);
	int (*history)(History *, HistEvent *, int, ...);
	int loaded;
} ed;

struct chat_line {
	FILE *tty;
	EditLine *el;
	History *h;                     /* every line typed, for the arrow keys */
	History *fh;                    /* the lines the file keeps (history_keeps) */
	const char *prompt;
	char *file;                     /* the history file, or NULL */
};

/* The history file: ${XDG_STATE_HOME:-$HOME/.local/state}/agentkit/
 * chat_history, its directories made (0700) when missing; NULL without
 * a HOME or when they cannot be made. */
static char *history_file(void)
{
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	char dir[4096], *path;
	int n;
	if (state && *state)
		n = snprintf(dir, sizeof dir, "%s/agentkit", state);
	else if (home && *home)
		n = snprintf(dir, sizeof dir, "%s/.local/state/agentkit", home);
	else
		return NULL;
	if (n < 0 || (size_t)n >= sizeof dir)
		return NULL;
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0700) && errno != EEXIST)
			return NULL;
		*p = '/';
	}
	if (mkdir(dir, 0700) && errno != EEXIST)
		return NULL;
	size_t len = strlen(dir) + sizeof "/chat_history";
	if (!(path = malloc(len)))
		return NULL;
	snprintf(path, len, "%s/chat_history", dir);
	return path;
}

/* Whether a line is kept in the file: not one that begins with a blank
 * (as a shell's HISTCONTROL=ignorespace), not a long paste, and not one
 * that holds a word shaped like a provider key or token. */
static int history_keeps(const char *line, size_t len)
{
	static const char *const keys[] = { "sk-", "sk_", "AIza", "ghp_", "github_pat_", "xox",
	                                    "glpat-", "Bearer ", "api_key=", "apikey=",
	                                    "password=", "token=" };
	if (!len || len > CHAT_HISTORY_LINE || line[0] == ' ' || line[0] == '\t')
		return 0;
	for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
		for (const char *p = strstr(line, keys[i]); p; p = strstr(p + 1, keys[i]))
			if (p == line || !((p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= 'a' && p[-1] <= 'z') ||
			                   (p[-1] >= '0' && p[-1] <= '9')))
				return 0;
	return 1;
}

/* The history written whole, mode 0600 (the file is the user's alone);
 * a failure loses only the file's copy. */
static void history_save(struct chat_line *c)
{
	HistEvent ev;
	int fd = open(c->file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	FILE *f;
	if (fd < 0)
		return;
	if (fchmod(fd, 0600) || !(f = fdopen(fd, "w"))) {
		close(fd);
		return;
	}
	ed.history(c->fh, &ev, H_SAVE_FP, f);
	fclose(f);
}


static struct chat_line *current;       /* the one editor of the process */

static char *prompt_fn(EditLine *el)
{
	(void)el;
	return (char *)(current && current->prompt ? current->prompt : "> ");
}

struct chat_line *chat_line_open(const char *prog, int history, char *why, size_t whylen)
{
	static const char *const names[] = { "el_init", "el_end", "el_set", "el_gets",
	                                     "history_init", "history_end", "history" };
	void **const slots[] = { (void **)&ed.init, (void **)&ed.end, (void **)&ed.set,
	                         (void **)&ed.get_line, (void **)&ed.hinit, (void **)&ed.hend,
	                         (void **)&ed.history };
	struct chat_line *c;
	HistEvent ev;
	if (!ed.loaded && !(ed.loaded = core_dl_load(LIBEDIT, names, slots, 7, why, whylen)))
		return NULL;
	if (!(c = calloc(1, sizeof *c)))
		return snprintf(why, whylen, "out of memory"), NULL;
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 || !(c->tty = fdopen(fd, "r+"))) {
		snprintf(why, whylen, "cannot open /dev/tty: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		free(c);
		return NULL;
	}
	if (!(c->el = ed.init(prog, c->tty, c->tty, stderr)) || !(c->h = ed.hinit())) {
		snprintf(why, whylen, "libedit could not start on the terminal");
		chat_line_close(c);
		return NULL;
	}
	ed.history(c->h, &ev, H_SETSIZE, CHAT_HISTORY);
	if (history && (c->file = history_file())) {
		if (!(c->fh = ed.hinit())) {
			snprintf(why, whylen, "out of memory");
			chat_line_close(c);
			return NULL;
		}
		ed.history(c->fh, &ev, H_SETSIZE, CHAT_HISTORY);
		/* no file yet: nothing */
		ed.history(c->h, &ev, H_LOAD, c->file);
		ed.history(c->fh, &ev, H_LOAD, c->file);
	}
	ed.set(c->el, EL_EDITOR, "emacs");
	ed.set(c->el, EL_PROMPT, prompt_fn);
	ed.set(c->el, EL_HIST, ed.history, c->h);
	ed.set(c->el, EL_SIGNAL, 0);    /* agent-run's handlers stay */
	current = c;
	return c;
}

int chat_line_read(struct chat_line *c, const char *prompt, char **line)
{
	int n = 0;
	HistEvent ev;
	c->prompt = prompt;
	errno = 0;
	const char *s = ed.get_line(c->el, &n);
	*line = NULL;
	if (!s || n <= 0)
		return errno == EINTR ? -1 : 0;
	size_t len = strlen(s);
	while (len && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	if (!(*line = strndup(s, len)))
		return 0;
	if (len)
		ed.history(c->h, &ev, H_ENTER, *line);
	if (c->file && history_keeps(*line, len)) {
		ed.history(c->fh, &ev, H_ENTER, *line);
		history_save(c);
	}
	return 1;
}

void chat_line_close(struct chat_line *c)
{
	if (!c)
		return;
	if (c->el)
		ed.end(c->el);
	if (c->h)
		ed.hend(c->h);
	if (c->fh)
		ed.hend(c->fh);
	if (c->tty)
		fclose(c->tty);
	if (current == c)
		current = NULL;
	free(c->file);
	free(c);
}
