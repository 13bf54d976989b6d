/* output.c - what an agent invocation writes on stdout; see output.h. */
#include "output.h"

#include <poll.h>
#include <string.h>
#include <sys/stat.h>

/* The text view's sink (render.h) over the caller's: its write error is
 * kept in o->err, where output_chunk() finds it. */
static enum core_status view_text(void *ctx, const char *p, size_t n)
{
	struct output *o = ctx;
	return o->sink.write(o->sink.ctx, p, n, &o->err);
}

static enum core_status view_flush(void *ctx)
{
	struct output *o = ctx;
	return o->sink.flush(o->sink.ctx, &o->err);
}

static void view_note(void *ctx, const char *line, size_t n)
{
	struct output *o = ctx;
	o->sink.note(o->sink.ctx, line, n);
}

enum core_status output_init(struct output *o, enum output_format format, int color,
                             struct output_sink sink)
{
	*o = (struct output){ .format = format, .color = color, .sink = sink };
	core_buf_init(&o->line, CORE_BUF_UNLIMITED);
	return render_init(&o->view, color, (struct render_sink){ view_text, view_flush,
	                                                          view_note, o });
}

void output_release(struct output *o)
{
	render_release(&o->view);
	core_buf_release(&o->line);
}

enum core_status output_line(struct output *o, const json_t *v)
{
	core_buf_reset(&o->line);
	if (jv_dump(v, &o->line) || core_buf_add(&o->line, "\n", 1))
		return core_fail(&o->err, CORE_ENOMEM, "out of memory");
	enum core_status st = o->sink.write(o->sink.ctx, o->line.p, o->line.len, &o->err);
	if (!st)
		st = o->sink.flush(o->sink.ctx, &o->err);
	return st;
}

enum core_status output_agents(struct output *o, const json_t *agents)
{
	enum core_status st = CORE_OK;
	int width = 0;
	size_t i;
	const json_t *a;
	json_array_foreach(agents, i, a) {
		size_t n = strlen(json_string_value(json_object_get(a, "name")));
		if ((int)n + 2 > width && n < 80)
			width = (int)n + 2;
	}
	json_array_foreach(agents, i, a) {
		if (st)
			break;
		if (o->format != OUTPUT_TEXT) {
			st = output_line(o, a);
			continue;
		}
		core_buf_reset(&o->line);
		if (render_agent_row(a, width, &o->line) || core_buf_add(&o->line, "\n", 1))
			return core_fail(&o->err, CORE_ENOMEM, "out of memory");
		st = o->sink.write(o->sink.ctx, o->line.p, o->line.len, &o->err);
	}
	return st;
}

enum core_status output_row(void *ctx, const json_t *row, struct core_err *e)
{
	struct output *o = ctx;
	enum core_status st = output_line(o, row);
	if (st)
		*e = o->err;
	return st;
}

enum core_status output_model(struct output *o, const json_t *row, int width,
                              const char *dflt)
{
	if (o->format != OUTPUT_TEXT)
		return row ? output_line(o, row) : CORE_OK;
	core_buf_reset(&o->line);
	enum core_status st = row ? render_model_row(row, width, &o->line)
	                    : core_buf_addf(&o->line, "default model (AGENTKIT_MODEL): %s",
	                                    dflt && *dflt ? dflt : "not set");
	if (st || core_buf_add(&o->line, "\n", 1))
		return core_fail(&o->err, CORE_ENOMEM, "out of memory");
	return o->sink.write(o->sink.ctx, o->line.p, o->line.len, &o->err);
}

enum core_status output_chunk(struct output *o, const json_t *chunk)
{
	enum core_status st;
	if (o->st)
		return o->st;
	if (o->format == OUTPUT_JSON)
		return CORE_OK;
	st = o->format == OUTPUT_TEXT ? render_chunk(&o->view, chunk) : output_line(o, chunk);
	if (st == CORE_EPIPE)
		o->gone = 1;
	o->st = st;
	return st;
}

void output_error(struct output *o, const struct core_err *e)
{
	if (o->format == OUTPUT_TEXT)
		return;
	json_t *line = json_pack("{s:o}", "error", jv_error_new(e->st, e->msg));
	if (line)
		output_line(o, line);
	json_decref(line);
}

enum core_status output_final(struct output *o, const json_t *output)
{
	if (o->format == OUTPUT_TEXT)
		return CORE_OK;
	if (o->format == OUTPUT_JSON)
		return output_line(o, output);
	json_t *line = json_pack("{s:O}", "output", output);
	enum core_status st = line ? output_line(o, line)
	                           : core_fail(&o->err, CORE_ENOMEM, "out of memory");
	json_decref(line);
	return st;
}

void output_summary(struct output *o, const char *prog, const json_t *output,
                    const char *session, const json_t *usage, const char *trace)
{
	core_buf_reset(&o->line);
	if (!render_summary(prog, output, session, usage, trace, o->color, &o->line))
		o->sink.note(o->sink.ctx, o->line.p, o->line.len);
}

void output_watch(struct output *o)
{
	struct stat sb;
	o->pipe = fstat(1, &sb) == 0 && (S_ISFIFO(sb.st_mode) || S_ISSOCK(sb.st_mode));
}

int output_gone(struct output *o)
{
	if (!o->gone && o->pipe) {
		struct pollfd p = { .fd = 1, .events = 0 };
		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)))
			o->gone = 1;
	}
	return o->gone;
}
