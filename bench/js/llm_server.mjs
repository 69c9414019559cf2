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
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import { AGENT_CARD_PATH, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

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

const textPart = (text) => ({ content: { $case: 'text', value: text }, metadata: undefined });

class LlmExecutor {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const user = ctx.userMessage;
    if (!ctx.task) {
      bus.publish(AgentEvent.task({
        id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined,
                                         timestamp: new Date().toISOString() },
        artifacts: [], history: [user], metadata: undefined,
      }));
    }
    const status = (state) => AgentEvent.statusUpdate({
      taskId, contextId, status: { state, message: undefined, timestamp: new Date().toISOString() },
      metadata: undefined,
    });
    bus.publish(status(TaskState.TASK_STATE_WORKING));
    const text = (user.parts || []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    const [n, intervalMs] = parse(text);
    const artifactId = randomUUID();
    const start = monotonicMs();
    for (let i = 0; i < n; i++) {
      const wait = start + i * intervalMs - monotonicMs();
      if (wait > 0) await sleep(wait); // the model thinking: the workload
      bus.publish(AgentEvent.artifactUpdate({
        taskId, contextId, append: i > 0, lastChunk: i === n - 1, metadata: undefined,
        artifact: { artifactId, name: 'response', description: '', parts: [textPart(` t${i}:${nowNs()}`)],
                    metadata: undefined, extensions: [] },
      }));
    }
    bus.publish(status(TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', metadata: undefined,
      status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() } }));
    bus.finished();
  }
}

const url = `http://${opts.host}:${opts.port}/`;
const card = {
  name: 'LLM stream', description: "Streams N tokens, one every INTERVAL_MS ('N INTERVAL_MS')", version: '1.0.0',
  supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
  provider: undefined, capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
  skills: [{ id: 'llm', name: 'LLM stream', description: 'Streams tokens', tags: ['bench'], examples: [],
             inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new LlmExecutor());
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(Number(opts.port), opts.host, () => {
  if (opts['log-level'] !== 'warning') console.log(`@a2a-js/sdk LLM server at ${url}`);
});
server.keepAliveTimeout = 75_000;
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0)); // streams in flight are dropped
