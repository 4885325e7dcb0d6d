#!/usr/bin/env node
// ACP v1 scenario client built on the official SDK (@agentclientprotocol/sdk).
//   node conformance/clients/v1-scenario.mjs [--config JSON|@FILE] [--transcript FILE] -- <agent argv...>
// See conformance/README.md for the config and summary formats.
// ACP_V1_SDK picks the client: "@agentclientprotocol/sdk" (1.4.0, the default) or "sdk24" (2.4.0, an npm alias).
const acp = await import(process.env.ACP_V1_SDK || "@agentclientprotocol/sdk");
import { main } from "./lib/scenario.mjs";

const dialect = {
  version: 1,
  sdk: process.env.ACP_V1_SDK || "@agentclientprotocol/sdk",
  initializeParams: (config, clientInfo) => ({
    protocolVersion: 1,
    clientCapabilities: config.clientCapabilities ?? {},
    clientInfo,
  }),
  // v1 requires mcpServers (may be empty); a step's additionalDirectories are sent as they are.
  newSessionParams: (cwd, step) => ({
    cwd,
    mcpServers: step?.mcpServers ?? [],
    ...(step?.additionalDirectories ? { additionalDirectories: step.additionalDirectories } : {}),
  }),
  permissionInfo: (params) => ({
    title: params.toolCall?.title ?? null,
    toolCallId: params.toolCall?.toolCallId ?? null,
  }),
  // v1: the prompt response *is* the end of the turn.
  // A step's `prompt` (content blocks: an image, a resource) replaces the one text block.
  async runTurn(env, sessionId, text, _from, prompt) {
    const result = await env.ctx.request("session/prompt", {
      sessionId,
      prompt: prompt ?? [{ type: "text", text }],
    });
    return result.stopReason;
  },
  // "resume" defaults to session/load (replays history); {"method":"session/resume"} opts out.
  resumeRequest(sessionId, cwd, step) {
    const method = step.method ?? "session/load";
    const extra = step.additionalDirectories ? { additionalDirectories: step.additionalDirectories } : {};
    return { method, params: { sessionId, cwd, mcpServers: [], ...extra } };
  },
};

await main(acp, dialect);
