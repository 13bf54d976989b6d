// serve-client.cjs - time turns through Genkit JS 1.42's own remoteAgent
// client (genkit/beta/client), the same client against every server
// (bench/serve.sh).
// Usage: node serve-client.cjs MODULES_DIR URL TURNS CONCURRENCY [WARM]
// Each turn is a fresh chat's first send('hi'), streamed; CONCURRENCY at
// a time, after WARM turns one at a time that are not timed (default 1:
// the connection and the server's first child; more warm node's JIT too,
// as a long-running client is).  Prints "name value unit" lines: p50 and p90 of one turn's
// latency in microseconds, the turns per second over the whole run, and
// the turns whose answer was not "stop" (each is also an error exit).
const { createRequire } = require('module');
const [mods, url, turnsArg, concArg, warmArg] = process.argv.slice(2);
const req = createRequire(mods + '/');
const { remoteAgent } = req('genkit/beta/client');
const agent = remoteAgent({ url });
const turns = Number(turnsArg), conc = Number(concArg), warm = Number(warmArg || 1);

async function one() {
  const t0 = process.hrtime.bigint();
  const turn = agent.chat().sendStream('hi');
  for await (const _ of turn.stream);
  const r = await turn.response;
  if (r.finishReason !== 'stop') throw new Error('a turn ended ' + r.finishReason);
  return Number(process.hrtime.bigint() - t0) / 1000;
}

(async () => {
  for (let i = 0; i < warm; i++) await one();
  const times = [];
  let next = 0;
  const t0 = process.hrtime.bigint();
  const worker = async () => {
    while (next < turns) {
      next++;
      times.push(await one());
    }
  };
  await Promise.all(Array.from({ length: conc }, worker));
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  times.sort((a, b) => a - b);
  const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  console.log(`p50 ${at(0.5).toFixed(0)} us`);
  console.log(`p90 ${at(0.9).toFixed(0)} us`);
  console.log(`turns_per_s ${(times.length / wall).toFixed(1)} turns/s`);
})().catch((e) => {
  console.error('serve-client: ' + e.message);
  process.exit(1);
});
