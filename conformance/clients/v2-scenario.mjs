#!/usr/bin/env node
// ACP v2 (draft) scenario client built on the official SDK's experimental/v2 API.
//   node conformance/clients/v2-scenario.mjs [--config JSON|@FILE] [--transcript FILE] -- <agent argv...>
// See conformance/README.md for the config and summary formats.
import * as acp from "@agentclientprotocol/sdk/experimental/v2";
import { updateOf } from "./lib/harness.mjs";
import { main } from "./lib/scenario.mjs";

const isIdle = (sessionId) => (e) =>
  e.type === "update" &&
  e.params.sessionId === sessionId &&
  updateOf(e).sessionUpdate === "state_update" &&
  updateOf(e).state === "idle";

const dialect = {
  version: 2,
  initializeParams: (config, info) => ({
    protocolVersion: 2,
    info,
    capabilities: config.clientCapabilities ?? {},
  }),
  newSessionParams: (cwd) => ({ cwd }),
  permissionInfo: (params) => ({
    title: params.title,
    toolCallId: params.subject?.toolCall?.toolCallId ?? params.subject?.toolCallId ?? null,
    subjectType: params.subject?.type ?? null,
  }),
  // v2: the prompt response is only an ack; the turn ends with an idle
  // state_update (which may arrive before or after the ack is processed).
  async runTurn(env, sessionId, text, from) {
    await env.ctx.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
    const idle = await env.log.waitFor(isIdle(sessionId), from, env.config.timeoutMs, "idle state_update");
    return updateOf(idle).stopReason ?? null;
  },
  resumeRequest(sessionId, cwd, step) {
    const params = { sessionId, cwd };
    if (step.replay !== false) params.replayFrom = { type: "start" };
    return { method: "session/resume", params };
  },
};

await main(acp, dialect);
