// The @a2a-js/sdk server of bench/llm_stream.py: the LLM-shaped agent of bench/llm_agents.py.
//
//   node bench/js/llm_server.mjs --port 9004 [--host 127.0.0.1]     (run `npm install` in bench/js first)
//
// Text "N INTERVAL_MS" (defaults 200, 50): N tokens, one every INTERVAL_MS on a fixed schedule (the first at
// once), each an artifact update of one artifact named "response" (append after the first, lastChunk on the
// last) whose text is " t<i>:<wall clock in ns at emit>"; then the task completes. Events: task (submitted)
// -> status working -> artifact update x N -> status completed, as the Python servers send. Stack: express 5,
// the SDK's jsonRpcHandler (A2A 1.0 JSON-RPC, SendStreamingMessage over SSE) and agentCardHandler,
// DefaultRequestHandler, InMemoryTaskStore.
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { InMemoryTaskStore } from '@a2a-js/sdk/server';
import { beginRun, benchCard, cancelRun, serve } from './common.mjs';

const { values: opts } = parseArgs({
  options: { host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '9004' },
             'log-level': { type: 'string', default: 'warning' } },
});

// Wall clock in ns, as Python's time.time_ns(): the epoch at start plus a monotonic offset (no drift within a run).
const EPOCH_NS = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();
const nowNs = () => (EPOCH_NS + process.hrtime.bigint()).toString();
const monotonicMs = () => performance.now();

function parse(text) {
  const fields = (text || '').split(/\s+/).filter((x) => /^\d+$/.test(x)).map(Number);
  const [n, intervalMs] = [...fields, ...[200, 50].slice(fields.length)];
  return [n, intervalMs];
}

class LlmExecutor {
  async execute(ctx, bus) {
    const run = beginRun(ctx, bus);
    const [n, intervalMs] = parse(run.text);
    const start = monotonicMs();
    for (let i = 0; i < n; i++) {
      const wait = start + i * intervalMs - monotonicMs();
      if (wait > 0) await sleep(wait); // the model thinking: the workload
      run.chunk(` t${i}:${nowNs()}`, i, i === n - 1);
    }
    run.complete();
  }

  cancelTask = cancelRun;
}

const card = benchCard(`http://${opts.host}:${opts.port}/`, {
  name: 'LLM stream', description: "Streams N tokens, one every INTERVAL_MS ('N INTERVAL_MS')",
  skill: { id: 'llm', name: 'LLM stream', description: 'Streams tokens' },
});
serve({ card, store: new InMemoryTaskStore(), executor: new LlmExecutor(), host: opts.host, port: opts.port,
        logLevel: opts['log-level'], label: 'LLM' });
