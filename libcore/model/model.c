/* model.c - what every provider shares of a model call; see model.h. */
#include "model.h"

#include <string.h>

void model_response_release(struct model_response *r)
{
	json_decref(r->message);
	json_decref(r->usage);
	r->message = r->usage = NULL;
	r->finish_reason[0] = 0;
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
