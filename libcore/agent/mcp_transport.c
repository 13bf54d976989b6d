/* mcp_transport.c - the MCP transports by the entries' "type"
 * (mcp_transport.h): a new transport is one row here. */
#include "mcp_transport.h"

#include <string.h>

static const struct mcp_transport_ops *const transports[] = {
	&mcp_transport_stdio,
	&mcp_transport_http,
	&mcp_transport_sse,
#ifdef MCP_TRANSPORT_TEST_ROW
	/* tests/unit/mcp_transport_test.c: a transport that exists only in
	 * the test, added the way a new one is, by this one row */
	MCP_TRANSPORT_TEST_ROW,
#endif
	NULL
};

const struct mcp_transport_ops *mcp_transport_find(const char *type)
{
	for (size_t i = 0; type && transports[i]; i++)
		if (!strcmp(transports[i]->type, type))
			return transports[i];
	return NULL;
}
