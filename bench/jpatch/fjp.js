// fjp.js - the Node peer of bench/jpatch.sh: fast-json-patch driven the way
// the jpatch commands are used (read files, apply or compare, print JSON).
//
//   node fjp.js apply DOC PATCH        print DOC with PATCH applied
//   node fjp.js diff FROM TO           print the patch (fast-json-patch compare)
//   node fjp.js stream INITIAL <NDJSON print the document after each patch
'use strict';
const fs = require('fs');
const path = require('path');
const modules = process.env.FJP_MODULES || path.join(__dirname, '..', 'out', 'node', 'node_modules');
const jsonpatch = require(path.join(modules, 'fast-json-patch'));

const [mode, a, b] = process.argv.slice(2);
const read = (f) => JSON.parse(fs.readFileSync(f === '-' ? 0 : f, 'utf8'));

if (mode === 'apply') {
  const doc = read(a);
  const patch = read(b);
  // No per-operation validation (it deep-clones the document for every
  // operation: over a minute here) and no clone: the fastest use.
  const res = jsonpatch.applyPatch(doc, patch, false, true).newDocument;
  fs.writeSync(1, JSON.stringify(res) + '\n');
} else if (mode === 'diff') {
  fs.writeSync(1, JSON.stringify(jsonpatch.compare(read(a), read(b))) + '\n');
} else if (mode === 'stream') {
  let doc = a ? read(a) : null;
  const lines = fs.readFileSync(0, 'utf8').split('\n');
  let out = [];
  for (const line of lines) {
    if (!line.trim()) continue;
    const rec = JSON.parse(line);
    let patch = Array.isArray(rec) ? rec : rec.customPatch;
    if (!patch) continue;
    doc = jsonpatch.applyPatch(doc, patch, false, true).newDocument;
    out.push(JSON.stringify(doc));
    if (out.length >= 64) { fs.writeSync(1, out.join('\n') + '\n'); out = []; }
  }
  if (out.length) fs.writeSync(1, out.join('\n') + '\n');
} else {
  process.stderr.write('usage: fjp.js apply|diff|stream ...\n');
  process.exit(100);
}
