// Version-independent scenario runner. v1-scenario.mjs / v2-scenario.mjs pass
// the SDK module for their protocol version plus a small "dialect" describing
// the wire differences (initialize params, how a turn ends, resume vs load).
import {
  EventLog,
  PermissionPolicy,
  captureSdkComplaints,
  describeError,
  digestUpdates,
  emitSummary,
  isRequestError,
  parseCli,
  spawnAgent,
  stopAgent,
  updateOf,
  watchClientErrors,
} from "./harness.mjs";

const CLIENT_INFO = { name: "term2-conformance", version: "0.0.0" };

export const isAgentText = (sid) => (e) =>
  e.type === "permission"
    ? e.params.sessionId === sid
    : e.params.sessionId === sid && /^agent_message(_chunk)?$/.test(updateOf(e)?.sessionUpdate);

export async function main(acp, dialect) {
  const problems = [];
  captureSdkComplaints(problems);
  const summary = {
    ok: false,
    version: dialect.version,
    sdk: dialect.sdk ?? null,
    initialize: null,
    sessionIds: [],
    steps: [],
    stopReasons: [],
    updateKinds: [],
    texts: [],
    permissionRequests: [],
    replay: null,
    errors: [],
    problems,
    fatal: null,
    transcript: null,
    agentExit: null,
  };
  let agent = null;
  try {
    const { config, transcript, agentArgv } = parseCli(process.argv.slice(2));
    summary.transcript = transcript;
    agent = spawnAgent(agentArgv, transcript, watchClientErrors(problems));
    await runSteps(acp, dialect, config, agent, summary);
  } catch (error) {
    summary.fatal = describeError(error);
  }
  if (agent) summary.agentExit = await stopAgent(agent);
  const all = summary.steps.flatMap((s) => s.updateKinds ?? []);
  summary.updateKinds = [...new Set(all)];
  summary.ok = !summary.fatal && problems.length === 0 && summary.steps.every((s) => s.ok);
  emitSummary(summary);
  process.exit(summary.ok ? 0 : 1); // pending wait timers must not keep us alive
}

async function runSteps(acp, dialect, config, agent, summary) {
  const log = new EventLog();
  const policy = new PermissionPolicy(config.permissions, config.permissionDefault);
  const state = { sessionId: null, pendingCancel: null };

  const conn = acp
    .client(CLIENT_INFO)
    .onRequest("session/request_permission", async ({ params }) => {
      const entry = {
        sessionId: params.sessionId,
        ...dialect.permissionInfo(params),
        options: params.options.map((o) => ({ optionId: o.optionId, kind: o.kind })),
      };
      summary.permissionRequests.push(entry);
      const pc = state.pendingCancel;
      let outcome;
      if (pc && pc.sessionId === params.sessionId) {
        // The spec'd client behaviour: once the turn is being cancelled, every
        // pending/new permission request is answered "cancelled".
        await pc.fire("permission");
        entry.answer = "cancelled";
        outcome = { outcome: "cancelled" };
      } else {
        const a = policy.answer(params.options);
        entry.answer = a.want;
        if (a.missing) entry.missingOption = true;
        outcome = a.outcome;
      }
      log.push({ type: "permission", params });
      return { outcome };
    })
    .onNotification("session/update", ({ params }) => log.push({ type: "update", params }))
    .connect(acp.ndJsonStream(agent.output, agent.input));
  const ctx = conn.agent;
  const env = { ctx, log, config, state, summary };

  try {
    for (const [index, step] of config.steps.entries()) {
      const handler = STEPS[step.op];
      if (!handler) throw new Error(`unknown step op ${JSON.stringify(step.op)}`);
      const record = { index, op: step.op, ok: true };
      try {
        Object.assign(record, await handler(env, dialect, step));
        if (step.expectError !== undefined) {
          record.ok = false;
          record.unexpectedSuccess = true;
        }
      } catch (error) {
        if (!isRequestError(error)) throw error;
        const { code, message, data } = error;
        record.error = { code, message, data };
        summary.errors.push({ index, op: step.op, code, message });
        record.ok = step.expectError === true || step.expectError === code;
      }
      summary.steps.push(record);
    }
  } finally {
    conn.close();
  }
}

const sid = (env, step) => {
  const id = step.sessionId ?? env.state.sessionId;
  if (!id) throw new Error(`step ${step.op} needs a session: run "new" first`);
  return id;
};

function turnRecord(env, sessionId, from, stopReason, extra = {}) {
  const d = digestUpdates(env.log.since(from).filter((e) => e.params.sessionId === sessionId));
  env.summary.stopReasons.push(stopReason);
  env.summary.texts.push(d.texts.agent);
  return { sessionId, stopReason, updateKinds: d.kinds, text: d.texts.agent, ...extra };
}

const STEPS = {
  async initialize(env, dialect, step) {
    const params = dialect.initializeParams(env.config, CLIENT_INFO, step);
    const result = await env.ctx.request("initialize", params);
    env.summary.initialize = result;
    return { protocolVersion: result.protocolVersion };
  },

  async new(env, dialect, step) {
    const cwd = step.cwd ?? env.config.cwd;
    const result = await env.ctx.request("session/new", dialect.newSessionParams(cwd, step));
    env.state.sessionId = result.sessionId;
    env.summary.sessionIds.push(result.sessionId);
    return { sessionId: result.sessionId, configOptions: result.configOptions ?? null, modes: result.modes ?? null };
  },

  // v1: session/set_mode {modeId} (the legacy modes, kept in sync with the `mode` config option).
  async set_mode(env, _dialect, step) {
    const sessionId = sid(env, step);
    const result = await env.ctx.request("session/set_mode", { sessionId, modeId: step.modeId });
    return { sessionId, result };
  },

  // v1: session/set_config_option {configId, value}; records the full set the agent answers.
  async set_config_option(env, _dialect, step) {
    const sessionId = sid(env, step);
    const result = await env.ctx.request("session/set_config_option", {
      sessionId,
      configId: step.configId,
      value: step.value,
    });
    return { sessionId, configOptions: result.configOptions };
  },

  // Wait for a session/update of this kind (sessionUpdate), counting from the start of the log.
  async wait_update(env, _dialect, step) {
    const sessionId = sid(env, step);
    const event = await env.log.waitFor(
      (e) => e.type === "update" && e.params.sessionId === sessionId && updateOf(e)?.sessionUpdate === step.kind,
      step.from ?? 0,
      env.config.timeoutMs,
      step.kind,
    );
    return { sessionId, update: updateOf(event) };
  },

  async list(env, _dialect, step) {
    const params = {};
    if (step.cwd !== undefined) params.cwd = step.cwd;
    if (step.cursor !== undefined) params.cursor = step.cursor;
    const result = await env.ctx.request("session/list", params);
    const sessions = result.sessions.map(({ sessionId, cwd, title, updatedAt, additionalDirectories }) => ({
      sessionId,
      cwd,
      title,
      updatedAt,
      additionalDirectories: additionalDirectories ?? null,
    }));
    const current = env.state.sessionId;
    return {
      sessions,
      nextCursor: result.nextCursor ?? null,
      containsCurrent: current ? sessions.some((s) => s.sessionId === current) : null,
    };
  },

  async prompt(env, dialect, step) {
    const sessionId = sid(env, step);
    const from = env.log.length;
    const text = step.text ?? env.config.promptText;
    const stopReason = await dialect.runTurn(env, sessionId, text, from, step.prompt);
    return turnRecord(env, sessionId, from, stopReason);
  },

  async cancel(env, dialect, step) {
    const sessionId = sid(env, step);
    const from = env.log.length;
    const when = step.when ?? "first_chunk"; // or "permission"
    const pc = {
      sessionId,
      fired: false,
      firedBy: null,
      async fire(by) {
        if (pc.fired) return;
        pc.fired = true;
        pc.firedBy = by;
        await env.ctx.notify("session/cancel", { sessionId });
      },
    };
    env.state.pendingCancel = pc;
    try {
      if (when === "first_chunk") {
        env.log
          .waitFor(isAgentText(sessionId), from, env.config.timeoutMs, "first agent chunk")
          .then((e) => pc.fire(e.type === "permission" ? "permission" : "first_chunk"))
          .catch(() => {}); // turn may end first; that is reported as cancelSent=false
      } else if (when !== "permission") {
        throw new Error(`cancel.when must be "first_chunk" or "permission", got ${when}`);
      }
      const text = step.text ?? env.config.promptText;
      const stopReason = await dialect.runTurn(env, sessionId, text, from);
      return turnRecord(env, sessionId, from, stopReason, {
        cancelSent: pc.fired,
        cancelTrigger: pc.firedBy,
      });
    } finally {
      env.state.pendingCancel = null;
    }
  },

  // v1: session/delete (the agent advertises sessionCapabilities.delete).
  async delete(env, _dialect, step) {
    const sessionId = sid(env, step);
    await env.ctx.request("session/delete", { sessionId });
    return { sessionId };
  },

  async close(env, _dialect, step) {
    const sessionId = sid(env, step);
    await env.ctx.request("session/close", { sessionId });
    return { sessionId };
  },

  async resume(env, dialect, step) {
    const sessionId = sid(env, step);
    const from = env.log.length;
    const cwd = step.cwd ?? env.config.cwd;
    const { method, params } = dialect.resumeRequest(sessionId, cwd, step);
    const result = await env.ctx.request(method, params);
    const d = digestUpdates(env.log.since(from).filter((e) => e.params.sessionId === sessionId));
    env.summary.replay = { method, updateKinds: d.kinds, texts: d.texts };
    const configOptions = result?.configOptions ?? null;
    const modes = result?.modes ?? null;
    return { sessionId, method, updateKinds: d.kinds, texts: d.texts, configOptions, modes };
  },

  async load(env, dialect, step) {
    return STEPS.resume(env, dialect, { ...step, method: "session/load" });
  },

  async sleep(_env, _dialect, step) {
    await new Promise((r) => setTimeout(r, step.ms ?? 100));
    return {};
  },
};
