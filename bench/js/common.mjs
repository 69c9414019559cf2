// What the @a2a-js/sdk bench servers (echo_server.mjs, llm_server.mjs) share: the A2A 1.0 events they publish (a task
// submitted, status updates, chunks of one artifact "response", a cancel), their agent card, and the stack that
// serves them (express 5, the SDK's jsonRpcHandler and agentCardHandler over DefaultRequestHandler).
import { randomUUID } from 'node:crypto';
import express from 'express';
import { AGENT_CARD_PATH, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler } from '@a2a-js/sdk/server/express';

export const textPart = (text) => ({ content: { $case: 'text', value: text }, metadata: undefined });

const statusEvent = (taskId, contextId, state) => AgentEvent.statusUpdate({
  taskId, contextId, status: { state, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined,
});

// Start a run as the Python servers do: the task (submitted, unless it exists) then status working. Returns the
// user's text and `chunk(text, i, last)` (one artifact update of the run's "response" artifact: append after the
// first) and `complete()` (status completed; the run ends).
export function beginRun(ctx, bus) {
  const { taskId, contextId } = ctx;
  const user = ctx.userMessage;
  if (!ctx.task) {
    bus.publish(AgentEvent.task({
      id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined,
                                       timestamp: new Date().toISOString() },
      artifacts: [], history: [user], metadata: undefined,
    }));
  }
  bus.publish(statusEvent(taskId, contextId, TaskState.TASK_STATE_WORKING));
  const text = (user.parts || []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
  const artifactId = randomUUID();
  const chunk = (piece, i, last) => bus.publish(AgentEvent.artifactUpdate({
    taskId, contextId, append: i > 0, lastChunk: last, metadata: undefined,
    artifact: { artifactId, name: 'response', description: '', parts: [textPart(piece)], metadata: undefined,
                extensions: [] },
  }));
  const complete = () => {
    bus.publish(statusEvent(taskId, contextId, TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  };
  return { text, chunk, complete };
}

// The executors' cancelTask: status canceled, the run ends.
export async function cancelRun(taskId, bus) {
  bus.publish(statusEvent(taskId, '', TaskState.TASK_STATE_CANCELED));
  bus.finished();
}

// The agent card of a bench agent at `url` (A2A 1.0 JSON-RPC, streaming, one skill).
export function benchCard(url, { name, description, skill }) {
  return {
    name, description, version: '1.0.0',
    supportedInterfaces: [{ url, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
    provider: undefined, capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ ...skill, tags: ['bench'], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
    signatures: [],
  };
}

// Serve `executor` with `card` over `store` on host:port until SIGINT/SIGTERM (streams in flight are dropped).
export function serve({ card, store, executor, host, port, logLevel, label }) {
  const handler = new DefaultRequestHandler(card, store, executor);
  const app = express();
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
  app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  const server = app.listen(Number(port), host, () => {
    if (logLevel !== 'warning') console.log(`@a2a-js/sdk ${label} server at ${card.supportedInterfaces[0].url}`);
  });
  server.keepAliveTimeout = 75_000;
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
  return server;
}
