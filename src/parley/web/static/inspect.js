// Parley dashboard: the inspector's console. It sends calls through the dashboard (/inspect/call, /inspect/stream),
// which reaches the agent and checks each answer against its version's schema; this shows the checks as marks.
// Agent text is only ever set with textContent.

const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? "";

const SEND = new Set(["SendMessage", "SendStreamingMessage", "message/send", "message/stream"]);
const STREAMS = new Set(["SendStreamingMessage", "SubscribeToTask", "message/stream", "tasks/resubscribe"]);

export async function base64Of(file) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

class Inspector {
  constructor(root) {
    this.root = root;
    this.version = root.dataset.version;
    this.form = root.querySelector(".inspect-form");
    this.frames = root.querySelector(".frames");
    this.state = root.querySelector(".inspect-state");
    this.contextId = null;
    this.form.addEventListener("submit", (event) => { event.preventDefault(); this.send(); });
    this.form.endpoint.addEventListener("change", () => this.pickEndpoint());
    this.pickEndpoint();
    root.querySelector('[data-action="new"]').addEventListener("click", () => {
      this.contextId = null; this.form.task.value = ""; this.frames.replaceChildren(); this.state.textContent = "";
    });
  }

  // The methods (and the message shape) follow the chosen interface's version: one URL may serve 1.0 and 0.3.
  pickEndpoint() {
    const option = this.form.endpoint.selectedOptions[0];
    const version = option?.dataset.version ?? this.root.dataset.version;
    if (version === this.version && this.form.method.options.length) return;
    this.version = version;
    const names = (version === "1.0" ? this.root.dataset.methodsV1 : this.root.dataset.methodsV03).split(" ");
    this.form.method.replaceChildren(...names.map((name) => new Option(name, name)));
  }

  async params(method) {
    const f = this.form;
    const task = f.task.value.trim();
    if (!SEND.has(method)) return method.toLowerCase().includes("list") ? {} : { id: task };
    const v1 = this.version === "1.0";
    const parts = [];
    if (f.text.value.trim()) parts.push(v1 ? { text: f.text.value } : { kind: "text", text: f.text.value });
    const file = f.file.files[0];
    if (file) {
      const data = await base64Of(file);
      const type = file.type || "application/octet-stream";
      parts.push(v1 ? { raw: data, filename: file.name, mediaType: type }
                    : { kind: "file", file: { bytes: data, name: file.name, mimeType: type } });
    }
    const message = v1 ? { messageId: crypto.randomUUID(), role: "ROLE_USER", parts }
                       : { kind: "message", messageId: crypto.randomUUID(), role: "user", parts };
    if (f.metadata.value.trim()) message.metadata = JSON.parse(f.metadata.value);
    if (task) message.taskId = task;
    if (this.contextId) message.contextId = this.contextId;
    return { message };
  }

  entry(kind, label, body, checks) {
    const li = document.createElement("li");
    li.className = kind;
    const head = document.createElement("span");
    head.className = "dir";
    head.textContent = label;
    const pre = document.createElement("pre");
    pre.textContent = typeof body === "string" ? body : JSON.stringify(body, null, 2);
    li.append(head, pre);
    if (checks) {
      li.dataset.valid = checks.every((c) => c.ok) ? "yes" : "no";
      const ul = document.createElement("ul");
      ul.className = "frame-checks";
      for (const c of checks) {
        const item = document.createElement("li");
        item.className = c.ok ? "pass" : "fail";
        item.textContent = c.what;
        ul.append(item);
      }
      li.append(ul);
    }
    this.frames.append(li);
    li.scrollIntoView({ block: "nearest" });
  }

  // A JSON-RPC answer carries the result in `result`; HTTP+JSON and gRPC answers are the result itself.
  remember(body) {
    const r = body && typeof body === "object" && "result" in body ? body.result : body;
    if (!r || typeof r !== "object") return;
    const task = r.task ?? (r.kind === "task" || (r.id && r.status) ? r : null);
    const update = r.statusUpdate ?? (r.kind === "status-update" ? r : null);
    const found = task ? { id: task.id, context: task.contextId, state: task.status?.state }
                : update ? { id: update.taskId, context: update.contextId, state: update.status?.state } : null;
    if (!found) return;
    this.contextId = found.context ?? this.contextId;
    if (found.id) this.form.task.value = found.id;
    this.state.textContent = `Task ${found.id}: ${found.state}`;
  }

  async send() {
    const method = this.form.method.value;
    let params;
    try {
      params = await this.params(method);
    } catch (error) {
      this.entry("error", "✘ not sent", `${error}`);
      return;
    }
    const stream = STREAMS.has(method);
    const body = JSON.stringify({ url: this.root.dataset.url, endpoint: this.form.endpoint.value, method, params,
                                  headers: this.form.headers.value, credential: this.form.credential.value });
    this.form.text.value = "";
    this.form.file.value = "";
    const response = await fetch(stream ? this.root.dataset.stream : this.root.dataset.call, {
      method: "POST", body,
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf, Accept: "application/json" },
    });
    const type = response.headers.get("content-type") ?? "";
    if (!type.startsWith("text/event-stream")) {
      const answer = await response.json();
      if (answer.error) { this.entry("error", "✘ the inspector", answer.error); return; }
      this.entry("out", "→ request", answer.request);
      for (const frame of answer.frames) {
        const status = typeof answer.status === "number" ? `HTTP ${answer.status}` : `gRPC ${answer.status}`;
        this.entry("reply", `← response (${status})`, frame.body, frame.checks);
        this.remember(frame.body);
      }
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (!data) continue;
        const item = JSON.parse(data);
        if (event === "request") this.entry("out", "→ request (stream)", item);
        else if (event === "error") this.entry("error", "✘ the inspector", item.error);
        else { this.entry("in", "← frame", item.body, item.checks); this.remember(item.body); }
      }
    }
  }
}

export function startInspectors() {
  for (const root of document.querySelectorAll("section.inspector")) new Inspector(root);
}
