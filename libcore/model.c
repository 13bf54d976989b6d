/* model.c - find a model's provider by its name and run a generate call. */
#include "model.h"

#include <string.h>

/*
 * The providers.  Each lives in its own file (model_echo.c, model_script.c,
 * provider_openai.c, ...) and defines one struct model_provider; adding a
 * provider is one line here.
 */
extern const struct model_provider model_echo;
extern const struct model_provider model_script;
extern const struct model_provider model_openai;
extern const struct model_provider model_googleai;
extern const struct model_provider model_anthropic;
extern const struct model_provider model_ollama;

static const struct model_provider *const providers[] = {
	&model_echo,
	&model_script,
	&model_openai,
	&model_googleai,
	&model_anthropic,
	&model_ollama,
};

void model_response_release(struct model_response *r)
{
	json_decref(r->message);
	json_decref(r->usage);
	r->message = r->usage = NULL;
	r->finish_reason[0] = 0;
}

enum core_status model_generate(const char *name, const struct model_request *req,
                                const struct model_stream *stream,
                                struct model_response *resp, struct core_err *e)
{
	const char *slash = strchr(name, '/');
	size_t plen = slash ? (size_t)(slash - name) : strlen(name);
	for (size_t i = 0; i < sizeof providers / sizeof providers[0]; i++) {
		const struct model_provider *p = providers[i];
		if (strlen(p->prefix) == plen && !strncmp(p->prefix, name, plen))
			return p->generate(slash ? slash + 1 : "", req, stream, resp, e);
	}
	return core_fail(e, CORE_ENOTFOUND, "model '%s' not found (unknown provider '%.*s')",
	                 name, (int)plen, name);
}

enum core_status model_last_user_text(const json_t *messages, struct core_buf *out)
{
	for (size_t i = json_array_size(messages); i-- > 0;) {
		const json_t *m = json_array_get(messages, i);
		const char *role = json_string_value(json_object_get(m, "role"));
		size_t j;
		const json_t *part;
		if (!role || strcmp(role, "user"))
			continue;
		json_array_foreach(json_object_get(m, "content"), j, part) {
			const json_t *t = json_object_get(part, "text");
			if (json_is_string(t) && core_buf_add(out, json_string_value(t), json_string_length(t)))
				return CORE_ENOMEM;
		}
		break;
	}
	return core_buf_add(out, "", 0);
}
