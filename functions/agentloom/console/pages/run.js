// The live run view: the run's events as they arrive (followRun: SSE on serve, long-poll
// otherwise, resuming from its cursor), joined with the session's messages for the
// content events leave out (tool arguments and results, the plan, the answer); per-step
// tokens and cost and a running total; Cancel, Supplement, and the stopped run's way out.
import { followRun } from "../live.js";
import {
  badge, button, clear, field, formatCost, formatTokens, h, input, pageTitle, section, showErrors,
} from "../dom.js";
import { enc, link, route } from "../router.js";
import { stoppedPanel } from "./resolve.js";
import { usageText } from "./sessions.js";

const ACTIVE = new Set(["queued", "running"]);
const CAP = 2000;

// A text capped at CAP characters, with a button showing the rest.
function capped(text) {
  const pre = h("pre", {}, text.length > CAP ? text.slice(0, CAP) : text);
  if (text.length <= CAP) return pre;
  const more = button(`Show all (${text.length.toLocaleString()} characters)`, () => {
    pre.textContent = text;
    more.remove();
  }, { class: "link" });
  return h("div", {}, pre, more);
}

function pretty(json) {
  try { return JSON.stringify(JSON.parse(json), null, 2); } catch { return String(json); }
}

route("/s/:space/sessions/:session/runs/:run", async (ctx) => {
  const { api, main, params, signal } = ctx;
  const sid = enc(params.session);
  const base = `/sessions/${sid}/runs/${enc(params.run)}`;
  let view = await api.get(base);

  const statusSlot = h("span", { id: "run-status" }, badge(view.status));
  const connection = h("span", { class: "connection" }, "connection: ", badge("connecting"));
  const announce = h("p", { class: "sr-status muted", "aria-live": "polite", role: "status" });
  const totals = h("dl", { class: "facts" });
  const answer = h("div", {});
  const planList = h("ol", { class: "plan" });
  const planSection = section("Plan", planList);
  planSection.hidden = true;
  const wayOut = h("div", {});
  const timeline = h("ol", { class: "timeline", "aria-label": "Events of the run" });
  const controls = h("div", { class: "stack" });

  // What the events say, gathered as they arrive.
  const steps = new Map();    // op_id -> {row, usage}
  const tools = new Map();    // request_id -> {row, instance, n}
  const sum = { calls: 0, input: 0, output: 0, cost: null };
  const msgs = { after: 0, calls: new Map(), results: new Map(), plan: null }; // per instance calls

  function drawTotals() {
    clear(totals,
      h("dt", {}, "Model calls"), h("dd", {}, String(sum.calls)),
      h("dt", {}, "Tokens"), h("dd", { id: "run-total-tokens" },
        `${formatTokens(sum.input + sum.output)} (${formatTokens(sum.input)} in, ${formatTokens(sum.output)} out)`),
      h("dt", {}, "Cost"), h("dd", { id: "run-total-cost" }, formatCost(sum.cost)),
      h("dt", {}, "Run usage (server)"), h("dd", {}, usageText(view.usage)));
  }

  function row(event, ...content) {
    const d = event.data || {};
    const nested = d.instance && d.instance !== "main";
    const li = h("li", { class: nested ? "nested" : null, "data-type": event.type, "data-seq": event.seq },
      h("div", { class: "row" }, h("strong", {}, event.type), nested ? h("span", { class: "badge badge-member" }, d.instance) : null,
        h("span", { class: "muted" }, `#${event.seq}`)), content);
    timeline.append(li);
    return li;
  }

  // The session's messages of this run (read on after each step): tool calls in order
  // per instance (a tool event's request_id ends with its instance's call number), results
  // by tool_call_id, the latest plan.
  let reading = Promise.resolve();
  function readMessages() {
    reading = reading.then(async () => {
      for (;;) {
        const page = await api.get(`/sessions/${sid}/messages`, { after: msgs.after, limit: 200 }, { signal });
        for (const item of page.items) {
          if (item.run_id !== params.run) continue;
          const m = item.message || {};
          for (const call of m.tool_calls || []) {
            const list = msgs.calls.get(item.instance) || [];
            list.push(call);
            msgs.calls.set(item.instance, list);
            if (call.function && call.function.name === "update_plan") showPlan(call.function.arguments);
          }
          if (item.kind === "tool_result" && m.tool_call_id) msgs.results.set(m.tool_call_id, String(m.content ?? ""));
        }
        msgs.after = page.next_after ?? msgs.after;
        if (page.items.length < 200) break;
      }
      for (const tool of tools.values()) fillTool(tool);
    }).catch((err) => { if (err.name !== "AbortError") announce.textContent = `Messages: ${err.message}`; });
    return reading;
  }

  function showPlan(args) {
    let plan;
    try { plan = JSON.parse(args).steps; } catch { return; }
    if (!Array.isArray(plan)) return;
    planSection.hidden = false;
    clear(planList, plan.map((s) => h("li", {}, badge(s.status === "in_progress" ? "running" : s.status === "pending" ? "queued" : s.status),
      " ", String(s.title || s.id), h("span", { class: "muted" }, ` (${s.status})`))));
  }

  function fillTool(tool) {
    const call = (msgs.calls.get(tool.instance) || [])[tool.n - 1];
    if (!call) return;
    if (!tool.args.dataset.filled) {
      clear(tool.args, h("span", { class: "muted" }, "arguments"), capped(pretty(call.function.arguments || "")));
      tool.args.dataset.filled = "1";
    }
    const result = msgs.results.get(call.id);
    if (result !== undefined && !tool.result.dataset.filled) {
      const parsed = (() => { try { return JSON.parse(result); } catch { return null; } })();
      const exit = parsed && typeof parsed === "object" && "exit_code" in parsed
        ? h("strong", {}, `exit code ${parsed.exit_code}`) : null;
      clear(tool.result, h("span", { class: "muted" }, "result "), exit, capped(pretty(result)));
      tool.result.dataset.filled = "1";
    }
  }

  function toolRow(event) {
    const d = event.data;
    let tool = tools.get(d.request_id);
    if (!tool) {
      const n = Number(String(d.request_id || "").split(".").pop());
      tool = { instance: d.instance || "main", n, args: h("div", {}), result: h("div", {}), state: h("span", {}) };
      tool.row = row(event, h("div", { class: "row" }, "tool ", h("code", {}, d.name), " ", tool.state), tool.args, tool.result);
      tool.row.classList.add("tool");
      tools.set(d.request_id, tool);
    }
    if (event.type === "tool.started") {
      clear(tool.state, badge("running"));
      clear(tool.args, h("span", { class: "muted" }, `arguments: ${d.arguments_chars ?? "?"} characters`));
    } else {
      clear(tool.state, badge(d.status === "ok" ? "completed" : d.status === "error" ? "error" : d.status),
        d.exit_code !== undefined ? ` exit code ${d.exit_code}` : "");
      if (!tool.result.dataset.filled) clear(tool.result, h("span", { class: "muted" }, `result: ${d.result_chars ?? "?"} characters`));
      readMessages();
    }
    fillTool(tool);
  }

  function stepRow(event) {
    const d = event.data;
    let step = steps.get(d.op_id);
    if (!step) {
      step = { what: h("span", {}, "calling the model…"), usage: h("span", { class: "usage muted" }) };
      step.row = row(event, h("div", { class: "row" }, `model step ${d.op_id} · ${d.purpose || ""} `, step.what, " ", step.usage));
      step.row.classList.add("step");
      steps.set(d.op_id, step);
    }
    if (event.type === "model.completed") {
      step.what.textContent = d.tool_calls && d.tool_calls.length
        ? `→ tool calls: ${d.tool_calls.join(", ")}` : `→ text, ${d.content_chars ?? 0} characters`;
      readMessages();
    } else if (event.type === "model.usage") {
      step.usage.textContent = `${formatTokens(d.input_tokens)} in · ${formatTokens(d.output_tokens)} out · ${formatCost(d.cost)}`;
      sum.calls += 1;
      sum.input += d.input_tokens || 0;
      sum.output += d.output_tokens || 0;
      if (d.cost !== null && d.cost !== undefined) sum.cost = (sum.cost || 0) + d.cost;
      drawTotals();
    }
  }

  function brief(data) {
    return Object.entries(data || {}).filter(([k]) => k !== "run_id")
      .map(([k, v]) => `${k}: ${v !== null && typeof v === "object" ? JSON.stringify(v) : v}`).join(" · ");
  }

  function onEvent(event) {
    const d = event.data || {};
    const t = event.type;
    if (t.startsWith("model.")) stepRow(event);
    else if (t.startsWith("tool.")) toolRow(event);
    else if (t === "run.status") {
      clear(statusSlot, badge(d.status));
      row(event, badge(d.status), d.error ? ` ${d.error.code}: ${d.error.message}` : "");
      setActive(ACTIVE.has(d.status));
    } else if (t === "run.stopped") {
      row(event, badge(d.status), ` ${d.code || ""} ${d.message || ""}`);
    } else if (t === "review.decided") {
      row(event, `review: ${d.decision}`, d.reason_chars ? ` (reason, ${d.reason_chars} characters)` : "");
    } else if (t === "subagent.started") {
      row(event, `sub-agent ${d.instance} (${d.template || "?"})`);
    } else if (t === "run.resolved") {
      row(event, `verdict ${d.verdict} by ${d.by || "?"}`);
    } else {
      row(event, h("span", { class: "muted" }, brief(d)));
    }
    announce.textContent = `${t}${d.status ? `: ${d.status}` : ""}`;
  }

  // Following: one follow at a time, from the cursor of the last event seen.
  let follow = null;
  let cursor = 0;
  function start() {
    if (follow) follow.stop();
    follow = followRun(api, params.session, params.run, {
      after: cursor,
      onEvent: (e) => { cursor = e.seq; onEvent(e); },
      onState: (s) => clear(connection, "connection: ", badge(s)),
      onEnd: () => ended(),
    });
  }
  signal.addEventListener("abort", () => follow && follow.stop());

  async function ended() {
    clear(connection, "connection: ", badge("ended"));
    try {
      view = await api.get(base, undefined, { signal });
    } catch (err) { if (err.name !== "AbortError") announce.textContent = err.message; return; }
    await readMessages();
    showView();
    if (ACTIVE.has(view.status)) setTimeout(() => { if (!signal.aborted) start(); }, 500);
  }

  function showView() {
    clear(statusSlot, badge(view.status));
    setActive(ACTIVE.has(view.status));
    clear(answer, view.answer ? section("Answer", h("div", { class: "answer" }, capped(view.answer))) : null);
    clear(wayOut, view.status !== "completed" && !ACTIVE.has(view.status) ? stoppedPanel(view, act) : null);
    drawTotals();
    announce.textContent = `The run is ${view.status}${view.way_out ? `; way out: ${view.way_out}` : ""}.`;
  }

  // A way-out call, then the view follows the run on.
  async function act(path, body) {
    view = await api.post(`${base}/${path}`, body, { signal });
    clear(wayOut);
    showView();
    start();
  }

  // Cancel and supplement while the run is active.
  const cancelButton = button("Cancel run", async () => {
    cancelButton.disabled = true;
    try {
      view = await api.post(`${base}/cancel`, { reason: "cancelled from the console" });
      showView();
    } catch (err) { ctx.notify(err.message, "error"); cancelButton.disabled = false; }
  }, { class: "danger" });
  const text = input({ name: "text", required: true });
  const supplement = h("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const out = await api.post(`${base}/inputs`, { text: text.value });
      announce.textContent = `Supplement queued (position ${out.queued}).`;
      text.value = "";
      showErrors(supplement, null);
    } catch (err) { showErrors(supplement, err); }
  } }, field("Supplement", text, { name: "text", hint: "More input for the running run." }),
  h("button", { type: "submit" }, "Send supplement"));
  controls.append(h("div", { class: "row" }, cancelButton), supplement);
  function setActive(active) {
    controls.hidden = !active;
    cancelButton.disabled = !active;
  }

  drawTotals();
  setActive(ACTIVE.has(view.status));
  if (!ACTIVE.has(view.status)) showView();
  clear(main, pageTitle(`Run ${params.run}`, h("div", { class: "row" }, statusSlot, connection)),
    h("p", {}, h("a", { href: link(`/s/${enc(params.space)}/sessions/${sid}`) }, "← Back to the session")),
    announce,
    h("div", { class: "split" },
      h("div", {}, wayOut, answer, section("Timeline", timeline)),
      h("div", {}, section("Controls", controls), section("Usage", totals), planSection)));
  await readMessages();
  start();
}, { nav: "sessions" });
