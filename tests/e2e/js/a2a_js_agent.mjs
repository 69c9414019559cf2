// A small @a2a-js/sdk agent for the inspector's tests (tests/e2e/test_dashboard_inspector_js.py): every binding the
// SDK serves, on 127.0.0.1. Run from the directory the suite installed @a2a-js/sdk into (tests/support.py,
// install_js_sdk), which this file is copied to:
//
//   node a2a_js_agent.mjs HTTP_PORT GRPC_PORT
//
// The card lists JSON-RPC 1.0 and 0.3 (/jsonrpc), HTTP+JSON 1.0 and 0.3 (/rest, the SDK's v0.3 compat layer on)
// and gRPC 1.0 (127.0.0.1:GRPC_PORT). The agent: a task (submitted) -> working -> one artifact "echo" with the
// user's text -> completed; but a message "wait" leaves its task working until it is canceled. It prints "ready"
// once both servers listen.
import * as grpc from '@grpc/grpc-js';
import express from 'express';
import { AGENT_CARD_PATH, TaskState } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { UserBuilder, agentCardHandler, jsonRpcHandler, restHandler } from '@a2a-js/sdk/server/express';
import { A2AService, grpcService } from '@a2a-js/sdk/server/grpc';

const [httpPort, grpcPort] = process.argv.slice(2);
const base = `http://127.0.0.1:${httpPort}`;

const waiting = new Map(); // task id -> { contextId, done }: a task that waits to be canceled

class EchoExecutor {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const user = ctx.userMessage;
    const now = () => new Date().toISOString();
    if (!ctx.task) {
      bus.publish(AgentEvent.task({
        id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
        artifacts: [], history: [user], metadata: undefined,
      }));
    }
    const status = (state) => AgentEvent.statusUpdate({
      taskId, contextId, status: { state, message: undefined, timestamp: now() }, metadata: undefined,
    });
    bus.publish(status(TaskState.TASK_STATE_WORKING));
    const text = (user.parts || []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
    if (text === 'wait') {
      await new Promise((done) => waiting.set(taskId, { contextId, done }));
      return;
    }
    bus.publish(AgentEvent.artifactUpdate({
      taskId, contextId, append: false, lastChunk: true, metadata: undefined,
      artifact: { artifactId: 'echo', name: 'echo', description: '', metadata: undefined, extensions: [],
                  parts: [{ content: { $case: 'text', value: text || '(no text)' }, metadata: undefined,
                           filename: '', mediaType: '' }] },
    }));
    bus.publish(status(TaskState.TASK_STATE_COMPLETED));
    bus.finished();
  }

  async cancelTask(taskId, bus) {
    const task = waiting.get(taskId);
    waiting.delete(taskId);
    // contextId is REQUIRED in a TaskStatusUpdateEvent (a2a.proto): the task's own, kept when it began to wait
    bus.publish(AgentEvent.statusUpdate({ taskId, contextId: task?.contextId ?? '', metadata: undefined,
      status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() } }));
    bus.finished();
    task?.done();
  }
}

const iface = (url, protocolBinding, protocolVersion) => ({ url, protocolBinding, tenant: '', protocolVersion });
const card = {
  name: 'JS echo', description: 'Echoes your message (@a2a-js/sdk)', version: '1.0.0',
  supportedInterfaces: [
    iface(`${base}/jsonrpc`, 'JSONRPC', '1.0'), iface(`${base}/jsonrpc`, 'JSONRPC', '0.3'),
    iface(`${base}/rest`, 'HTTP+JSON', '1.0'), iface(`${base}/rest`, 'HTTP+JSON', '0.3'),
    iface(`127.0.0.1:${grpcPort}`, 'GRPC', '1.0'),
  ],
  provider: undefined, capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'Echo', description: 'Echoes text', tags: ['test'], examples: [],
             inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new EchoExecutor());
const options = { requestHandler: handler, userBuilder: UserBuilder.noAuthentication, legacyCompat: { enabled: true } };
const app = express();
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
app.use('/jsonrpc', jsonRpcHandler(options));
app.use('/rest', restHandler(options));

const server = new grpc.Server();
server.addService(A2AService, grpcService({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
await new Promise((resolve, reject) => server.bindAsync(`127.0.0.1:${grpcPort}`, grpc.ServerCredentials.createInsecure(),
  (error) => (error ? reject(error) : resolve())));
app.listen(Number(httpPort), '127.0.0.1', () => console.log('ready'));
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(0));
