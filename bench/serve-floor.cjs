// serve-floor.cjs - the floor of bench/serve.sh's remoteAgent figures: a
// node http server that does no work, answering every POST with one fixed
// streamed turn (a chunk, then the result, in Genkit's SSE frames, the
// size of agent-serve's echo answer).  What the same client measures
// against it is the client's own cost and loopback's, which no server can
// go below.
// Usage: node serve-floor.cjs PORTFILE
const http = require('http');
const fs = require('fs');
const output = {
  finishReason: 'stop',
  message: { role: 'model', content: [{ text: 'hi' }] },
  sessionId: '00000000-0000-4000-8000-000000000000',
  snapshotId: '00000000-0000-4000-8000-000000000001',
};
const answer =
  'data: ' + JSON.stringify({ message: { modelChunk: { role: 'model', index: 0, content: [{ text: 'hi' }] } } }) + '\n\n' +
  'data: ' + JSON.stringify({ result: output }) + '\n\n';
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    res.end(answer);
  });
});
server.listen(0, '127.0.0.1', () => fs.writeFileSync(process.argv[2], String(server.address().port)));
