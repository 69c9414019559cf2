// Parley dashboard: copy buttons, the live task table, live task pages, and the chat panel with its console.
// Plain ES module, no dependencies, served by Parley itself. Agent text is only ever set with textContent; a
// finished answer is replaced by the server's rendering of it (the task page's, Chat.render).

import { base64Of, startInspectors } from "./inspect.js";

const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? "";

function copyButtons() {
  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button.copy");
    if (!button) return;
    const value = button.dataset.copy ?? "";
    try {
      await navigator.clipboard.writeText(value);
    } catch {
      const area = document.createElement("textarea");
      area.value = value;
      document.body.append(area);
      area.select();
      document.execCommand("copy");
      area.remove();
    }
    button.textContent = "Copied";
    button.dataset.copied = "yes";
    setTimeout(() => { button.textContent = "Copy"; }, 2000);
  });
}

// `fn` once, `ms` after the first of a run of calls, the others of that run joined to it: at most one call per `ms`
// and none later than `ms`. (A debounce waits for a pause, and a streaming answer, a change at every piece, never
// makes one: the live table and a streaming task's page stood still until the answer ended. Issue 25.)
function batched(fn, ms) {
  let timer = null;
  return (...args) => {
    if (timer === null) timer = setTimeout(() => { timer = null; fn(...args); }, ms);
  };
}

function liveTable() {
  const table = document.querySelector("table.tasks[data-events]");
  if (!table) return;
  const status = document.querySelector('[data-testid="live-status"]');
  let inFlight = null;
  const refresh = batched(async () => {
    if (inFlight) return inFlight.then(refresh);  // one fetch at a time; the last change still shows
    inFlight = (async () => {
      const response = await fetch(table.dataset.rows + location.search, { headers: { Accept: "text/html" } });
      if (response.redirected || response.status === 401) { location.reload(); return; }  // the login ended
      if (!response.ok) return;
      table.querySelector("tbody").outerHTML = await response.text();
    })().finally(() => { inFlight = null; });
    return inFlight;
  }, 300);
  const source = new EventSource(table.dataset.events);
  let lost = false;
  source.addEventListener("open", () => {
    status.textContent = "Live: updates appear as they happen.";
    if (lost) refresh();  // changes made while the connection was down
    lost = false;
  });
  source.addEventListener("error", () => { status.textContent = "Live: reconnecting…"; lost = true; });
  source.addEventListener("change", refresh);
  source.addEventListener("reload", refresh);
  source.addEventListener("logout", () => { source.close(); location.reload(); });
}

// The agent page's last hour, drawn again by the server when the agent's tasks change (at most every 2 s: a
// streaming answer changes its task at every piece) and every minute (the hour moves on).
function liveCharts() {
  const first = document.querySelector("section[data-charts]");
  if (!first) return;
  const { charts: url, events, agent } = first.dataset;
  let inFlight = false, again = false, last = 0, timer = null;
  const redraw = async () => {
    if (inFlight) { again = true; return; }
    inFlight = true;
    last = Date.now();
    try {
      const response = await fetch(url, { headers: { Accept: "text/html" } });
      if (response.redirected || response.status === 401) { location.reload(); return; }  // the login ended
      if (response.ok) document.querySelector("section[data-charts]").outerHTML = await response.text();
    } finally {
      inFlight = false;
      if (again) { again = false; soon(); }
    }
  };
  const soon = () => {
    if (timer !== null) return;
    timer = setTimeout(() => { timer = null; redraw(); }, Math.max(0, last + 2000 - Date.now()));
  };
  const source = new EventSource(events);
  source.addEventListener("change", (event) => {
    try { if (JSON.parse(event.data).agent === agent) soon(); } catch { /* not a change of ours */ }
  });
  source.addEventListener("reload", soon);
  source.addEventListener("logout", () => { source.close(); location.reload(); });
  setInterval(soon, 60000);
}

function liveTask() {
  const facts = document.querySelector("[data-task-page]");
  if (!facts || facts.dataset.settled === "yes") return;
  const source = new EventSource(facts.dataset.events);
  const reload = batched(() => location.reload(), 300);
  source.addEventListener("change", (event) => {
    if (JSON.parse(event.data).taskId === facts.dataset.taskPage) reload();
  });
  source.addEventListener("reload", reload);
  source.addEventListener("logout", () => { source.close(); location.reload(); });
}

// --- chat ------------------------------------------------------------------------------------------

function textOf(parts) {
  return (parts ?? []).filter((p) => typeof p.text === "string").map((p) => p.text).join("\n");
}

function stateName(state) {
  return (state ?? "").replace(/^TASK_STATE_/, "").toLowerCase().replaceAll("_", "-");
}

class Chat {
  constructor(root) {
    this.root = root;
    this.url = root.dataset.chatUrl;
    this.log = root.querySelector(".chat-log");
    this.state = root.querySelector(".chat-state");
    this.frames = root.querySelector(".frames");
    this.form = root.querySelector(".chat-form");
    this.taskId = null;
    this.contextId = null;
    this.form.addEventListener("submit", (event) => { event.preventDefault(); this.send(); });
    this.form.querySelector('textarea').addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); this.send(); }
    });
    root.querySelector('[data-action="new"]').addEventListener("click", () => {
      this.taskId = null; this.contextId = null; this.log.replaceChildren(); this.frames.replaceChildren();
      this.state.textContent = "";
    });
  }

  bubble(role, text) {
    const div = document.createElement("div");
    div.className = `bubble ${role}`;
    div.dataset.role = role;
    div.textContent = text;
    this.log.append(div);
    div.scrollIntoView({ block: "nearest" });
    return div;
  }

  frame(direction, text) {
    const li = document.createElement("li");
    li.className = direction;
    const label = document.createElement("span");
    label.className = "dir";
    label.textContent = direction === "out" ? "→ request" : direction === "in" ? "← frame" : "← response";
    const pre = document.createElement("pre");
    pre.textContent = text;
    li.append(label, pre);
    this.frames.append(li);
  }

  showTask(task) {
    if (!task) return;
    this.lastTask = task.id;
    this.contextId = task.contextId ?? this.contextId;
    const state = stateName(task.status?.state);
    this.state.textContent = `Task ${task.id}: ${state}`;
    this.state.dataset.state = state;
    this.state.dataset.task = task.id;
    const interrupted = state === "input-required" || state === "auth-required";
    this.taskId = interrupted ? task.id : null;
  }

  async send() {
    const area = this.form.querySelector("textarea");
    const text = area.value.trim();
    if (!text) return;
    const stream = this.form.querySelector('input[name="stream"]').checked;
    const message = { messageId: crypto.randomUUID(), role: "ROLE_USER", parts: [{ text }] };
    const fileInput = this.form.querySelector('input[name="file"]');
    const file = fileInput?.files[0];
    if (file) {
      message.parts.push({ raw: await base64Of(file), filename: file.name,
                           mediaType: file.type || "application/octet-stream" });
      fileInput.value = "";
    }
    this.lastTask = null;
    if (this.taskId) message.taskId = this.taskId;
    if (this.contextId) message.contextId = this.contextId;
    const body = { jsonrpc: "2.0", id: crypto.randomUUID(), method: stream ? "SendStreamingMessage" : "SendMessage",
                   params: { message } };
    area.value = "";
    this.bubble("user", text);
    const request = JSON.stringify(body, null, 2);
    this.frame("out", `POST ${new URL(this.url, location.href).pathname}\nA2A-Version: 1.0\n\n${request}`);
    const answer = this.bubble("agent", "");
    answer.dataset.streaming = "yes";
    try {
      const response = await fetch(this.url, {
        method: "POST",
        headers: { "Content-Type": "application/json", "A2A-Version": "1.0", "X-CSRF-Token": csrf,
                   Accept: stream ? "text/event-stream" : "application/json" },
        body: JSON.stringify(body),
      });
      const type = response.headers.get("content-type") ?? "";
      if (type.startsWith("text/event-stream")) {
        await this.readStream(response, answer);
      } else {
        const raw = await response.text();
        this.frame("reply", `HTTP ${response.status}\n\n${raw}`);
        this.apply(JSON.parse(raw), answer, {});
      }
    } catch (error) {
      answer.textContent = `Error: ${error}`;
      answer.classList.add("error");
    } finally {
      delete answer.dataset.streaming;
      if (this.lastTask && !answer.classList.contains("error")) await this.render(answer, this.lastTask);
      if (!answer.textContent) answer.remove();
    }
  }

  // The finished answer, as the task page renders it: Markdown (no raw HTML, no javascript: links), data as
  // JSON, files as downloads. The fragment is the server's autoescaped rendering, not the agent's HTML.
  async render(answer, taskId) {
    const response = await fetch(`${this.root.dataset.answer}${encodeURIComponent(taskId)}/answer`,
                                 { headers: { Accept: "text/html" } });
    if (!response.ok || response.redirected) return;
    const html = (await response.text()).trim();
    if (!html) return;
    answer.innerHTML = html;
    answer.dataset.rendered = "yes";
  }

  async readStream(response, answer) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const artifacts = {};
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        if (!block.trim()) continue;
        this.frame("in", block);
        const data = block.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
        if (!data) continue;
        let envelope;
        try {
          envelope = JSON.parse(data);
        } catch {
          await reader.cancel();
          throw new Error(`a frame that is not JSON: ${data.slice(0, 80)}`);
        }
        this.apply(envelope, answer, artifacts);
      }
    }
  }

  apply(envelope, answer, artifacts) {
    if (envelope.error) {  // a JSON-RPC error, or the dashboard's own {"error": "..."} (login ended, CSRF)
      const e = envelope.error;
      answer.textContent = typeof e === "string" ? `Error: ${e}` : `Error ${e.code}: ${e.message}`;
      answer.classList.add("error");
      return;
    }
    const result = envelope.result ?? {};
    const task = result.task ?? (result.id && result.status ? result : null);
    if (result.message || result.role) {
      answer.textContent = textOf((result.message ?? result).parts);
    }
    if (task) {
      this.showTask(task);
      const text = (task.artifacts ?? []).map((a) => textOf(a.parts)).join("\n");
      if (text) answer.textContent = text;
      const question = textOf(task.status?.message?.parts);
      if (question && !text) answer.textContent = question;
    }
    if (result.artifactUpdate) {
      const update = result.artifactUpdate;
      const id = update.artifact.artifactId;
      artifacts[id] = (update.append ? artifacts[id] ?? "" : "") + textOf(update.artifact.parts);
      answer.textContent = Object.values(artifacts).join("\n");
    }
    if (result.statusUpdate) {
      const update = result.statusUpdate;
      this.showTask({ id: update.taskId, contextId: update.contextId, status: update.status });
      const note = textOf(update.status?.message?.parts);
      if (note && !Object.keys(artifacts).length) answer.textContent = note;
    }
  }
}

copyButtons();
liveTable();
liveCharts();
liveTask();
for (const root of document.querySelectorAll("section.chat")) new Chat(root);
startInspectors();
