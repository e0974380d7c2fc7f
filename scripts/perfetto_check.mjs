// Loads traces written by `memtool render --format perfetto` into Chrome
// DevTools' own trace engine (the Performance panel's parser, published as
// @paulirish/trace_engine) and checks that each loads without an error or
// a warning and names every memory memtool wrote as a process.
//
//   node scripts/perfetto_check.mjs ENGINE_DIR TRACE.json...
//
// ENGINE_DIR holds node_modules/@paulirish/trace_engine (an `npm install`
// in a throwaway folder, as .ci/run does); it is never a dependency of
// memtool. Perfetto's own trace_processor downloads its binary at run time,
// which an offline machine cannot; this engine reads the same Chrome trace
// event format.
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [engineDir, ...traces] = process.argv.slice(2);
if (!engineDir || traces.length === 0) {
  console.error('usage: node scripts/perfetto_check.mjs ENGINE_DIR TRACE.json...');
  process.exit(2);
}
const engine = path.join(engineDir, 'node_modules/@paulirish/trace_engine/analyze-trace.mjs');
const {analyzeEvents} = await import(pathToFileURL(engine).href);

let failed = false;
for (const file of traces) {
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  const events = json.traceEvents ?? json;
  const wanted = events
      .filter(e => e.ph === 'M' && e.name === 'process_name')
      .map(e => e.args.name);
  const counters = events.filter(e => e.ph === 'C').length;
  let problem = null;
  try {
    const {parsedTrace} = await analyzeEvents(events);
    const data = parsedTrace.data;
    const named = new Set([...data.Meta.processNames.values()].map(e => e.args?.name));
    const missing = wanted.filter(name => !named.has(name));
    const warnings = Object.keys(data.Warnings.perWarning);
    if (missing.length) {
      problem = `processes not named: ${missing.join(', ')}`;
    } else if (warnings.length) {
      problem = `warnings: ${warnings.join(', ')}`;
    } else if (wanted.length === 0 || counters === 0) {
      problem = 'no memory process or no counter in the trace';
    }
  } catch (e) {
    problem = `the engine failed: ${e.stack || e}`;
  }
  if (problem) {
    failed = true;
    console.error(`perfetto: ${file}: ${problem}`);
  } else {
    console.log(`perfetto: ${path.basename(file)}: ${events.length} events (${counters} counter samples, ` +
        `${wanted.length} memories) loaded by DevTools' trace engine`);
  }
}
process.exit(failed ? 1 : 0);
