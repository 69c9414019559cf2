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
import { parseArgs } from 'node:util';
import { InMemoryTaskStore } from '@a2a-js/sdk/server';
import { beginRun, benchCard, cancelRun, serve } from './common.mjs';

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

class EchoExecutor {
  async execute(ctx, bus) {
    const run = beginRun(ctx, bus);
    const pieces = chunksOf(run.text || '(your message had no text)');
    pieces.forEach((piece, i) => run.chunk(piece, i, i === pieces.length - 1));
    run.complete();
  }

  cancelTask = cancelRun;
}

async function taskStore() {
  if (!opts.db) return new InMemoryTaskStore();
  const [{ Kysely, PostgresDialect }, pg, { DatabaseTaskStore }] = await Promise.all([
    import('kysely'), import('pg'), import('@a2a-js/sdk/server/database')]);
  const pool = new pg.default.Pool({ connectionString: opts.db, max: Number(opts['pool-size']) });
  return new DatabaseTaskStore(new Kysely({ dialect: new PostgresDialect({ pool }) }));
}

const card = benchCard(`http://${opts.host}:${opts.port}/`, {
  name: 'Echo', description: 'Echoes your message back, streamed in chunks',
  skill: { id: 'echo', name: 'Echo', description: 'Echoes text' },
});
serve({ card, store: await taskStore(), executor: new EchoExecutor(), host: opts.host, port: opts.port,
        logLevel: opts['log-level'], label: 'echo' });
