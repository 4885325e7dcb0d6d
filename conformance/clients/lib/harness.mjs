// Shared plumbing for the v1/v2 scenario clients: CLI/config parsing, spawning
// the agent with a tee'd transcript, an awaitable event log, the permission
// answer policy, SDK-complaint capture and the final JSON summary.
//
// Nothing here is version-specific; the scenario scripts own the ACP calls.
import { spawn } from "node:child_process";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";

export const USAGE =
  "usage: node <v1|v2>-scenario.mjs [--config JSON|@FILE] [--transcript FILE] -- <agent argv...>\n" +
  "       (config may also come from env ACP_SCENARIO_CONFIG, same JSON|@FILE forms)";

// ---------------------------------------------------------------- CLI/config

function readJsonArg(value, what) {
  const text = value.startsWith("@") ? readFileSync(value.slice(1), "utf8") : value;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new Error(`${what} is not valid JSON: ${error.message}`);
  }
}

export function parseCli(argv) {
  const sep = argv.indexOf("--");
  if (sep < 0 || sep === argv.length - 1) throw new Error(`missing agent command\n${USAGE}`);
  const own = argv.slice(0, sep);
  const agentArgv = argv.slice(sep + 1);
  let configText = process.env.ACP_SCENARIO_CONFIG;
  let transcript = null;
  for (let i = 0; i < own.length; i++) {
    const flag = own[i];
    const value = own[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value\n${USAGE}`);
    if (flag === "--config") configText = value;
    else if (flag === "--transcript") transcript = resolve(value);
    else throw new Error(`unknown option ${flag}\n${USAGE}`);
    i++;
  }
  const config = normalizeConfig(configText ? readJsonArg(configText, "config") : {});
  return { config, transcript, agentArgv };
}

// Step aliases so configs can use either wire method names or short names.
const OP_ALIASES = {
  "session/new": "new",
  "session/list": "list",
  "session/prompt": "prompt",
  "session/cancel": "cancel",
  "session/close": "close",
  "session/resume": "resume",
  "session/load": "load",
  "session/delete": "delete",
};

export function normalizeConfig(raw) {
  const cwd = raw.cwd ?? process.cwd();
  if (!isAbsolute(cwd)) throw new Error(`config.cwd must be absolute, got ${cwd}`);
  const steps = (raw.steps ?? ["initialize", "new", "prompt"]).map((step) => {
    const s = typeof step === "string" ? { op: step } : { ...step };
    s.op = OP_ALIASES[s.op] ?? s.op;
    return s;
  });
  return {
    cwd,
    steps,
    permissions: [...(raw.permissions ?? [])],
    permissionDefault: raw.permissionDefault ?? "reject_once",
    timeoutMs: raw.timeoutMs ?? 30000,
    promptText: raw.promptText ?? "Hello",
    clientCapabilities: raw.clientCapabilities,
  };
}

// ---------------------------------------------------------------- agent + tee

// Splits a byte stream into lines; keeps the exact text of each line.
class LineTee {
  constructor(onLine) {
    this.onLine = onLine;
    this.decoder = new TextDecoder();
    this.buffer = "";
  }
  push(chunk) {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = this.buffer.indexOf("\n")) >= 0) {
      this.onLine(this.buffer.slice(0, nl));
      this.buffer = this.buffer.slice(nl + 1);
    }
  }
  flush() {
    this.buffer += this.decoder.decode();
    if (this.buffer) this.onLine(this.buffer);
    this.buffer = "";
  }
}

/**
 * Spawns the agent and returns web streams for `ndJsonStream(output, input)`.
 * Every line in either direction is appended to the transcript file as
 * {"dir":"agent"|"client","line":<raw text>} so Python can schema-validate
 * exactly what the agent wrote (and map responses to request methods).
 */
export function spawnAgent(agentArgv, transcriptPath, onClientLine) {
  if (transcriptPath) writeFileSync(transcriptPath, "");
  const record = (dir) => (line) => {
    if (transcriptPath) appendFileSync(transcriptPath, JSON.stringify({ dir, line }) + "\n");
    if (dir === "client") onClientLine?.(line);
  };
  const child = spawn(agentArgv[0], agentArgv.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolveExit) => {
    child.on("exit", (code, signal) => resolveExit({ code, signal }));
    child.on("error", (error) => resolveExit({ code: null, signal: null, error: error.message }));
  });
  const agentTee = new LineTee(record("agent"));
  const clientTee = new LineTee(record("client"));

  // Hand-rolled instead of Readable.toWeb so the tee sees every chunk first.
  // The tee keeps recording after the SDK cancels its reader (connection closed).
  let open = true;
  const input = new ReadableStream({
    start(controller) {
      child.stdout.on("data", (chunk) => {
        agentTee.push(chunk);
        if (open) controller.enqueue(new Uint8Array(chunk));
      });
      child.stdout.on("end", () => {
        agentTee.flush();
        if (open) controller.close();
        open = false;
      });
      child.stdout.on("error", (error) => open && controller.error(error));
    },
    cancel() {
      open = false;
    },
  });
  const output = new WritableStream({
    write(chunk) {
      clientTee.push(chunk);
      if (child.stdin.writableEnded) return Promise.reject(new Error("agent stdin closed"));
      return new Promise((ok, fail) => child.stdin.write(chunk, (e) => (e ? fail(e) : ok())));
    },
    close() {
      clientTee.flush();
      if (!child.stdin.writableEnded) child.stdin.end();
    },
  });
  child.stdin.on("error", () => {}); // EPIPE when the agent dies; surfaced via exit
  return { child, input, output, exited };
}

export async function stopAgent(agent, graceMs = 5000) {
  if (!agent.child.stdin.writableEnded) agent.child.stdin.end();
  const timer = new Promise((r) => setTimeout(() => r(null), graceMs));
  let exit = await Promise.race([agent.exited, timer]);
  if (exit === null) {
    agent.child.kill("SIGTERM");
    exit = { ...(await agent.exited), killed: true };
  }
  return exit;
}

// ---------------------------------------------------------------- events

/** Append-only log of session updates / permission requests with waiters. */
export class EventLog {
  constructor() {
    this.events = [];
    this.waiters = [];
  }
  get length() {
    return this.events.length;
  }
  push(event) {
    this.events.push(event);
    for (const w of [...this.waiters]) {
      if (w.pred(event)) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(event);
      }
    }
  }
  since(index) {
    return this.events.slice(index);
  }
  /** First event at index >= from matching pred; rejects after timeoutMs. */
  waitFor(pred, from, timeoutMs, what) {
    const found = this.events.slice(from).find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolvePromise, reject) => {
      const waiter = { pred, resolve: (e) => (clearTimeout(timer), resolvePromise(e)) };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }
}

export const updateOf = (event) => (event.type === "update" ? event.params.update : null);

/** Kinds and per-role text of the updates in `events` (one session). */
export function digestUpdates(events) {
  const kinds = [];
  const messages = new Map(); // messageId (v1: "~role:n" per run of chunks) -> {role, text}
  let lastKey = null;
  for (const event of events) {
    const u = updateOf(event);
    if (!u) continue;
    kinds.push(u.sessionUpdate);
    const m = /^(user|agent)_message(_chunk)?$/.exec(u.sessionUpdate);
    if (!m) continue;
    const role = m[1];
    // v1 chunks carry no messageId: consecutive same-role chunks form one message.
    const key =
      u.messageId ?? (lastKey?.startsWith(`~${role}:`) ? lastKey : `~${role}:${messages.size}`);
    lastKey = key;
    const entry = messages.get(key) ?? { role, text: "" };
    if (m[2]) entry.text += blockText(u.content);
    else if (u.content !== undefined) entry.text = (u.content ?? []).map(blockText).join("");
    messages.set(key, entry);
  }
  const texts = { user: "", agent: "" };
  for (const { role, text } of messages.values()) texts[role] += text;
  return { kinds, texts };
}

const blockText = (block) => (block && block.type === "text" ? block.text : "");

// ---------------------------------------------------------------- permissions

/**
 * Answers permission requests in order from config.permissions, then with
 * config.permissionDefault. An entry is an option kind ("allow_once",
 * "allow_always", "reject_once", "reject_always"), "cancelled", or
 * {"optionId": "..."} to send an arbitrary (possibly unoffered) id.
 */
export class PermissionPolicy {
  constructor(answers, fallback) {
    this.answers = answers;
    this.fallback = fallback;
  }
  answer(options) {
    const want = this.answers.length ? this.answers.shift() : this.fallback;
    if (want === "cancelled") return { want, outcome: { outcome: "cancelled" } };
    if (typeof want === "object" && want?.optionId !== undefined) {
      return { want, outcome: { outcome: "selected", optionId: want.optionId } };
    }
    const option = options.find((o) => o.kind === want);
    if (!option) return { want, missing: true, outcome: { outcome: "cancelled" } };
    return { want, outcome: { outcome: "selected", optionId: option.optionId } };
  }
}

// ---------------------------------------------------------------- summary

/** Collects SDK console complaints that mean "the agent sent something invalid". */
export function captureSdkComplaints(problems) {
  const original = console.error.bind(console);
  const patterns = [
    "Error handling notification", // notification params failed the SDK's zod parse
    "Invalid message", // not a JSON-RPC message at all
    "Got response to unknown request", // response id we never sent
  ];
  console.error = (...args) => {
    const text = args.map((a) => (typeof a === "string" ? a : safeJson(a))).join(" ");
    if (patterns.some((p) => text.startsWith(p))) problems.push(`sdk: ${text.slice(0, 2000)}`);
    original(...args);
  };
}

export function safeJson(value) {
  try {
    return JSON.stringify(value, (_k, v) => (v instanceof Error ? describeError(v) : v));
  } catch {
    return String(value);
  }
}

export function describeError(error) {
  if (error?.name === "RequestError") {
    return { code: error.code, message: error.message, data: error.data };
  }
  if (error?.name === "ZodError" || Array.isArray(error?.issues)) {
    return { zod: true, message: error.message, issues: error.issues };
  }
  return { message: String(error?.stack ?? error) };
}

export function isRequestError(error) {
  return error?.name === "RequestError" && typeof error.code === "number";
}

/** Client→agent error responses mean the SDK rejected an agent request. */
export function watchClientErrors(problems) {
  return (line) => {
    let message;
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    for (const m of Array.isArray(message) ? message : [message]) {
      if (m && typeof m === "object" && "error" in m && !("method" in m)) {
        problems.push(`client answered agent request ${safeJson(m.id)} with error ${safeJson(m.error)}`);
      }
    }
  };
}

export function emitSummary(summary) {
  process.stdout.write(JSON.stringify(summary) + "\n");
}
