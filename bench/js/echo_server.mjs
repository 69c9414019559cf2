// The @a2a-js/sdk echo server of bench/targets.py: the same work as Parley's echo agent and bench/sdk_echo_server.py.
//
//   node bench/js/echo_server.mjs --port 9005                              tasks in memory (InMemoryTaskStore)
//   node bench/js/echo_server.mjs --port 9005 --db postgresql://...        tasks in PostgreSQL (DatabaseTaskStore)
//
// (run `npm install` in bench/js first). With --db, the SDK's own migration tool has created the `tasks` table
// first (`npx a2a-db upgrade --url URL --store tasks`; bench/targets.py does it in a database of its own).
// The agent: the task (submitted) -> status working -> the user's text
// cut as Parley's chunks_of cuts it (pieces of max(16, len/64) characters, at spaces) as artifact updates of one
// artifact "response" (append after the first, lastChunk on the last) -> status completed. Stack: express 5,
// the SDK's jsonRpcHandler (A2A 1.0 JSON-RPC) and agentCardHandler, DefaultRequestHandler.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import express from 'express';
import { AGENT_CARD_PATH, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

const { values: opts } = parseArgs({
  options: { host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '9005' },
             db: { type: 'string' }, 'pool-size': { type: 'string', default: '10' },
             'log-level': { type: 'string', default: 'warning' } },
});

const MIN_CHUNK = 16, MAX_CHUNKS = 64;
function chunksOf(text) {
  const size = Math.max(MIN_CHUNK, Math.ceil(text.length / MAX_CHUNKS));
  if (text.length <= size) return [text];
  const out = [];
  let i = 0;
  while (i < text.length) {
    let end = Math.min(i + size, text.length);
    if (end < text.length) {
      const cut = text.lastIndexOf(' ', end);
      if (cut > i) end = cut;
    }
    out.push(text.slice(i, end));
    i = end;
  }
  return out;
}

const textPart = (text) => ({ content: { $case: 'text', value: text }, metadata: undefined });

class EchoExecutor {
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
    const pieces = chunksOf(text || '(your message had no text)');
    const artifactId = randomUUID();
    pieces.forEach((piece, i) => bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId, append: i > 0, lastChunk: i === pieces.length - 1, metadata: undefined,
      artifact: { artifactId, name: 'response', description: '', parts: [textPart(piece)], metadata: undefined,
                  extensions: [] },
    })));
    bus.publish(status(TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: '', metadata: undefined,
      status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() } }));
    bus.finished();
  }
}

async function taskStore() {
  if (!opts.db) return new InMemoryTaskStore();
  const [{ Kysely, PostgresDialect }, pg, { DatabaseTaskStore }] = await Promise.all([
    import('kysely'), import('pg'), import('@a2a-js/sdk/server/database')]);
  const pool = new pg.default.Pool({ connectionString: opts.db, max: Number(opts['pool-size']) });
  return new DatabaseTaskStore(new Kysely({ dialect: new PostgresDialect({ pool }) }));
}

const url = `http://${opts.host}:${opts.port}/`;
const card = {
  name: 'Echo', description: 'Echoes your message back, streamed in chunks', version: '1.0.0',
  supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
  provider: undefined, capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'Echo', description: 'Echoes text', tags: ['bench'], examples: [],
             inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
};

const handler = new DefaultRequestHandler(card, await taskStore(), new EchoExecutor());
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(Number(opts.port), opts.host, () => {
  if (opts['log-level'] !== 'warning') console.log(`@a2a-js/sdk echo server at ${url}`);
});
server.keepAliveTimeout = 75_000;
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
