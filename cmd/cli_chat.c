/* cli_chat.c - the chat's line editor (libedit); see cli_chat.h. */
#include <stddef.h>

#include "cli_chat.h"

#include <errno.h>
#include <fcntl.h>
#include <histedit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../libcore/base/util.h"

#define LIBEDIT "libedit.so.2"
#define CHAT_HISTORY 500        /* lines kept for the arrow keys */

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
	History *h;
	const char *prompt;
};


static struct chat_line *current;       /* the one editor of the process */

static char *prompt_fn(EditLine *el)
{
	(void)el;
	return (char *)(current && current->prompt ? current->prompt : "> ");
}

struct chat_line *chat_line_open(const char *prog, char *why, size_t whylen)
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
	if (c->tty)
		fclose(c->tty);
	if (current == c)
		current = NULL;
	free(c);
}
