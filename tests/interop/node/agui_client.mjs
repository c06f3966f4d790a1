// AG-UI's own client (@ag-ui/client's HttpAgent) against an AgentLoom server, one
// scenario per call; prints one JSON line per step for tests/interop/test_agui_client.py.
//   node agui_client.mjs follow|interrupts|cancel URL TOKEN THREAD QUESTION
import { createInterface } from "node:readline";
import { HttpAgent } from "@ag-ui/client";

const [scenario, url, token, threadId, question] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };

function agent(messages = [{ id: "u1", role: "user", content: question }]) {
  return new HttpAgent({ url, headers, threadId, initialMessages: messages });
}

// One runAgent: every event the client applied, and how it ended.
async function run(client, parameters = {}) {
  const events = [];
  let error = null;
  try {
    await client.runAgent(parameters, { onEvent: ({ event }) => { events.push(event); } });
  } catch (err) {
    error = String(err && err.message ? err.message : err);
  }
  return { events, error, pending: client.pendingInterrupts || [] };
}

const out = (value) => process.stdout.write(JSON.stringify(value) + "\n");
// The test's go-ahead: a line on stdin (it changes what the model does meanwhile).
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const go = async () => { await lines.next(); };
const lastSeq = (events) => events.filter((e) => e.rawEvent).map((e) => e.rawEvent.agentloom_seq).pop();

if (scenario === "follow") {
  // The server cuts the stream mid-run; the client resumes from the last seq it saw.
  const client = agent();
  const first = await run(client, { runId: "r-follow" });
  out({ step: "first", ...first });
  await go();
  const resumed = await run(client, {
    runId: "r-follow", forwardedProps: { agentloom: { after: lastSeq(first.events) } } });
  out({ step: "resumed", ...resumed, messages: client.messages });
} else if (scenario === "interrupts") {
  // The run was interrupted (its worker killed mid-call): the retried request ends with an
  // interrupt; resume → blocked (unknown outcome) → a verdict → completed.
  const client = agent();
  const stopped = await run(client, { runId: "r-stop" });
  out({ step: "interrupted", ...stopped });
  const [first] = stopped.pending;
  const blocked = await run(client, { runId: "r-resume", resume: [
    { interruptId: first.id, status: "resolved", payload: { resume: true } }] });
  out({ step: "blocked", ...blocked });
  const [unknown] = blocked.pending;
  const done = await run(client, { runId: "r-verdict", resume: [
    { interruptId: unknown.id, status: "resolved",
      payload: { verdict: "send_again", note: "the provider is back" } }] });
  out({ step: "resolved", ...done, messages: client.messages });
} else if (scenario === "cancel") {
  // A second client cancels the first one's running run (its id from RUN_STARTED).
  const client = agent();
  let cancelling = null;
  const events = [];
  const running = client.runAgent({ runId: "r-cancel" }, { onEvent: ({ event }) => {
    events.push(event);
    if (event.type === "STEP_STARTED" && !cancelling) {
      const runId = events[0].metadata.agentloom.run_id;
      cancelling = run(agent(), { runId: "r-cancel-2", resume: [
        { interruptId: runId, status: "cancelled" }] });
    }
  } }).then(() => null, (err) => String(err.message || err));
  const error = await running;
  out({ step: "cancelled", events, error, other: await cancelling });
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
process.exit(0);
