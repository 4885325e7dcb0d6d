#!/usr/bin/env node
// Tiny dual-version ACP agent built with the SDK's own agent API. It exists
// only to prove the scenario clients and the schema helper; it is NOT term2.
//
// Prompt behaviour (both versions): stream two agent chunks with a short
// pause between them; if the prompt text contains "permission", ask for
// permission once between the chunks. Cancellation ends the turn "cancelled".
//   MOCK_AGENT_BUG=chunk-without-message-id  v2 chunks omit messageId (schema-invalid)
//   MOCK_AGENT_BUG=naive-updated-at          v2 session/list uses a naive timestamp
import { Readable, Writable } from "node:stream";
import * as v1 from "@agentclientprotocol/sdk";
import * as v2 from "@agentclientprotocol/sdk/experimental/v2";

const BUG = process.env.MOCK_AGENT_BUG ?? "";
const INFO = { name: "mock-agent", title: "Mock agent", version: "0.0.1" };
const sessions = new Map(); // shared by both versions; each connection uses one
let counter = 0;
const nextId = (prefix) => `${prefix}-${++counter}`;

function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(t), reject(signal.reason)), { once: true });
  });
}

function newSession(cwd) {
  const sessionId = nextId("sess");
  sessions.set(sessionId, { cwd, history: [], turn: null, updatedAt: new Date() });
  return sessionId;
}

function getSession(sessionId, RequestError) {
  const s = sessions.get(sessionId);
  if (!s) throw RequestError.resourceNotFound(sessionId);
  return s;
}

function listSessions(params, naive) {
  return {
    sessions: [...sessions]
      .filter(([, s]) => params.cwd == null || s.cwd === params.cwd)
      .map(([sessionId, s]) => ({
        sessionId,
        cwd: s.cwd,
        title: "mock session",
        updatedAt: naive ? s.updatedAt.toISOString().replace("Z", "") : s.updatedAt.toISOString(),
      })),
  };
}

/** One turn: chunk, (permission), chunk. Returns the stop reason. */
async function runTurn({ session, sessionId, text, signal, send, askPermission, chunk }) {
  try {
    await send(chunk("Hello "));
    await pause(60, signal);
    if (text.includes("permission")) {
      const outcome = await askPermission();
      const allowed = outcome.outcome === "selected" && outcome.optionId.startsWith("allow");
      signal.throwIfAborted();
      await send({ sessionUpdate: "tool_call_update", toolCallId: "call-1", status: allowed ? "completed" : "failed" });
    }
    await pause(60, signal);
    await send(chunk("world"));
    session.history.push({ role: "agent", text: "Hello world" });
    return "end_turn";
  } catch (error) {
    if (signal.aborted) return "cancelled";
    throw error;
  } finally {
    session.updatedAt = new Date();
    void sessionId;
  }
}

function startTurn(session) {
  const controller = new AbortController();
  session.turn = controller;
  return controller;
}

// ------------------------------------------------------------------ v1

const v1Agent = v1
  .agent({ name: "mock-agent-v1" })
  .onRequest("initialize", () => ({
    protocolVersion: 1,
    agentCapabilities: {
      loadSession: true,
      sessionCapabilities: { list: {}, resume: {}, close: {} },
    },
    authMethods: [],
    agentInfo: INFO,
  }))
  .onRequest("session/new", ({ params }) => ({ sessionId: newSession(params.cwd) }))
  .onRequest("session/list", ({ params }) => listSessions(params, false))
  .onRequest("session/prompt", async ({ params, client }) => {
    const session = getSession(params.sessionId, v1.RequestError);
    const text = params.prompt.map((b) => b.text ?? "").join("");
    session.history.push({ role: "user", text });
    const controller = startTurn(session);
    const send = (update) => client.notify("session/update", { sessionId: params.sessionId, update });
    const stopReason = await runTurn({
      session,
      sessionId: params.sessionId,
      text,
      signal: controller.signal,
      send,
      chunk: (t) => ({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: t } }),
      askPermission: async () => {
        await send({ sessionUpdate: "tool_call", toolCallId: "call-1", title: "Write a.txt", kind: "edit", status: "pending" });
        const r = await client.request("session/request_permission", {
          sessionId: params.sessionId,
          toolCall: { toolCallId: "call-1", title: "Write a.txt", kind: "edit", status: "pending" },
          options: [
            { optionId: "allow-once", name: "Allow", kind: "allow_once" },
            { optionId: "reject-once", name: "Reject", kind: "reject_once" },
          ],
        });
        return r.outcome;
      },
    });
    session.turn = null;
    return { stopReason };
  })
  .onNotification("session/cancel", ({ params }) => sessions.get(params.sessionId)?.turn?.abort())
  .onRequest("session/load", async ({ params, client }) => {
    const session = getSession(params.sessionId, v1.RequestError);
    for (const { role, text } of session.history) {
      await client.notify("session/update", {
        sessionId: params.sessionId,
        update: { sessionUpdate: `${role}_message_chunk`, content: { type: "text", text } },
      });
    }
    return {};
  })
  .onRequest("session/resume", ({ params }) => (getSession(params.sessionId, v1.RequestError), {}))
  .onRequest("session/close", ({ params }) => {
    getSession(params.sessionId, v1.RequestError).turn?.abort();
    return {};
  });

// ------------------------------------------------------------------ v2

const v2Agent = v2
  .agent({ name: "mock-agent-v2" })
  .onRequest("initialize", () => ({ protocolVersion: 2, info: INFO, capabilities: { session: {} } }))
  .onRequest("session/new", ({ params }) => ({ sessionId: newSession(params.cwd) }))
  .onRequest("session/list", ({ params }) => listSessions(params, BUG === "naive-updated-at"))
  .onRequest("session/prompt", ({ params, client }) => {
    const session = getSession(params.sessionId, v2.RequestError);
    if (session.turn) throw v2.RequestError.invalidRequest("prompt already running");
    const controller = startTurn(session);
    const sessionId = params.sessionId;
    const text = params.prompt.map((b) => b.text ?? "").join("");
    const send = (update) => client.notify("session/update", { sessionId, update });
    const agentMessageId = nextId("msg");
    // Let the {} ack go out first (as the SDK's own example does).
    setTimeout(async () => {
      const userMessageId = nextId("msg");
      session.history.push({ role: "user", text, messageId: userMessageId });
      await send({ sessionUpdate: "user_message", messageId: userMessageId, content: params.prompt });
      await send({ sessionUpdate: "state_update", state: "running" });
      const stopReason = await runTurn({
        session,
        sessionId,
        text,
        signal: controller.signal,
        send,
        chunk: (t) => ({
          sessionUpdate: "agent_message_chunk",
          ...(BUG === "chunk-without-message-id" ? {} : { messageId: agentMessageId }),
          content: { type: "text", text: t },
        }),
        askPermission: async () => {
          await send({ sessionUpdate: "tool_call_update", toolCallId: "call-1", title: "Write a.txt", kind: "edit", status: "pending" });
          await send({ sessionUpdate: "state_update", state: "requires_action" });
          const r = await client.request("session/request_permission", {
            sessionId,
            title: "Allow writing a.txt?",
            subject: { type: "tool_call", toolCall: { toolCallId: "call-1" } },
            options: [
              { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
              { optionId: "allow-always", name: "Always allow", kind: "allow_always" },
              { optionId: "reject-once", name: "Reject", kind: "reject_once" },
            ],
          });
          await send({ sessionUpdate: "state_update", state: "running" });
          return r.outcome;
        },
      }).catch((error) => (console.error("mock turn failed", error), "_mock_error"));
      const last = session.history[session.history.length - 1];
      if (last?.role === "agent") last.messageId = agentMessageId;
      session.turn = null;
      await send({ sessionUpdate: "state_update", state: "idle", stopReason });
    }, 0);
    return {};
  })
  .onNotification("session/cancel", ({ params }) => sessions.get(params.sessionId)?.turn?.abort())
  .onRequest("session/resume", async ({ params, client }) => {
    const session = getSession(params.sessionId, v2.RequestError);
    if (params.replayFrom?.type === "start") {
      for (const { role, text, messageId } of session.history) {
        await client.notify("session/update", {
          sessionId: params.sessionId,
          update: { sessionUpdate: `${role}_message`, messageId: messageId ?? nextId("msg"), content: [{ type: "text", text }] },
        });
      }
    } else if (params.replayFrom) {
      throw v2.RequestError.invalidParams(`unsupported replayFrom ${params.replayFrom.type}`);
    }
    return {};
  })
  .onRequest("session/close", async ({ params }) => {
    getSession(params.sessionId, v2.RequestError).turn?.abort();
    return {};
  });

const stream = v2.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
v2.agentProtocolRouter().withV1(v1Agent).withV2(v2Agent).connect(stream);
