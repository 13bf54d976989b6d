// mcp-http-client.cjs - the peer of bench/mcp-http.sh: the official
// TypeScript SDK client making the same remote call agent-run makes
// (connect, initialize, tools/list, one tools/call of echo, close).
// MCP_MODULES: the node_modules holding the SDK; URL and TOKEN as args.
const { createRequire } = require('module');
const req = createRequire(process.env.MCP_MODULES + '/');
const { Client } = req('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = req('@modelcontextprotocol/sdk/client/streamableHttp.js');
(async () => {
	const [url, token] = process.argv.slice(2);
	const t = new StreamableHTTPClientTransport(new URL(url),
		{ requestInit: { headers: { Authorization: `Bearer ${token}` } } });
	const c = new Client({ name: 'bench', version: '1.0.0' });
	await c.connect(t);
	await c.listTools();
	const r = await c.callTool({ name: 'echo', arguments: { text: 'x' } });
	if (r.content[0].text !== 'echo: x') process.exit(1);
	await t.terminateSession();
	await c.close();
})().catch(e => { console.error(e); process.exit(1); });
