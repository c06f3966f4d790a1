// A stopped run's way out, on the run page: what stopped it, what is unknown and what the
// host knows, and the calls that move it on — resume, the verdicts of resolve (with a
// note; ran with output and exit code), a budget raise, confirm hooks — and `next`.
import { button, field, formatTime, h, input, section, showErrors } from "../dom.js";

const VERDICTS = {
  ran: "Ran", did_not_run: "Did not run", run_again: "Run again",
  send_again: "Send again", treat_as_failed: "Treat as failed",
};
const WAY_OUT = {
  resume: "Nothing drives this run any more: resume it (a new execution from its checkpoint).",
  resolve: "An operation's outcome is unknown: say what happened, then the run goes on.",
  raise_budget: "The run reached its budget: raise it to go on (space admins and owners).",
  confirm_hooks: "A hook was interrupted: confirm to run it again.",
  change_model: "The provider has no such model: fix the agent's model, publish, and ask again.",
  new_question: "The run has ended: ask a new question in the session.",
};

function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .flatMap(([k, v]) => [h("dt", {}, k),
      h("dd", {}, typeof v === "object" && !(v instanceof Node) ? h("pre", {}, JSON.stringify(v, null, 2)) : v)]));
}

const times = (n) => (n === 1 ? "once" : `${n} times`);

// The operation of unknown outcome in words: what was started, when, how often, and what
// the host (marker files, the command's process) could tell about it.
function unknownPanel(u) {
  const started = formatTime(u.started_at);
  const what = {
    model: `Model request ${u.operation_id} (${u.purpose || "action"}) was sent ${times(u.attempts)}, first at ${started}; no response was saved.`,
    tool: `Tool ${u.tool} (call ${u.operation_id}) was started ${times(u.attempts)}, first at ${started}; its result was not saved.`,
    command: `Command ${u.operation_id} was started ${times(u.attempts)}, first at ${started}; its exit was not saved.`,
  }[u.kind] || `Operation ${u.operation_id} (${u.kind}) started at ${started}; its outcome was not saved.`;
  let args = u.arguments;
  try { args = args ? JSON.parse(args) : null; } catch { /* shown as sent */ }
  const host = Object.entries(u.host || {});
  return [
    h("h3", {}, "What is unknown"), h("p", {}, what),
    facts([["Instance", u.instance === "main" ? "main agent" : u.instance], ["Request id", u.request_id],
      ["Arguments", args], ["Command", u.command]]),
    h("h3", {}, "What the host knows"),
    host.length ? facts(host) : h("p", { class: "muted" }, u.kind === "model"
      ? "Nothing more: a provider keeps no record the platform can query, so only you can say whether to send it again."
      : "Nothing more: no marker or process of this operation was found."),
  ];
}

// view: the run view; act(path, body) posts to the run's sub-path and follows the run on.
export function stoppedPanel(view, act) {
  const parts = [];
  if (view.error) {
    parts.push(h("p", { class: "notice notice-warn" }, h("strong", {}, view.error.code || "stopped"), ` — ${view.error.message || ""}`));
  }
  if (view.way_out) parts.push(h("p", {}, h("strong", {}, `Way out: ${view.way_out}. `), WAY_OUT[view.way_out] || ""));
  if (view.unknown) parts.push(unknownPanel(view.unknown));
  if (view.way_out === "resume") {
    parts.push(button("Resume", () => act("resume", {}), { class: "primary" }));
  }
  if (view.way_out === "confirm_hooks") {
    parts.push(button("Confirm hooks and resume", () => act("resume", { confirm_hooks: true }), { class: "primary" }));
  }
  if (view.way_out === "resolve" && view.unknown) parts.push(verdictForm(view.unknown.verdicts || [], act));
  if (view.way_out === "raise_budget") parts.push(budgetForm(act));
  if (view.next && view.next.length) {
    parts.push(h("h3", {}, "The API calls that move it on"), h("ul", { class: "next" }, view.next.map((n) => h("li", {}, h("code", {}, n)))));
  }
  return section("Way out", parts);
}

function verdictForm(verdicts, act) {
  const note = input({ name: "note", maxlength: 2000 });
  const output = h("textarea", { name: "output", rows: 3 });
  const exit = input({ name: "exit_code", type: "number", min: -64, max: 255 });
  const form = h("form", { class: "stack", "aria-label": "Resolve", onsubmit: (e) => e.preventDefault() });
  const decide = async (verdict) => {
    const body = { verdict, note: note.value };
    if (verdict === "ran") {
      if (output.value) body.output = output.value;
      if (exit.value !== "") body.exit_code = Number(exit.value);
    }
    try { await act("resolve", body); } catch (err) { showErrors(form, err); }
  };
  form.append(field("Note", note, { name: "note", hint: "Recorded with your verdict." }));
  if (verdicts.includes("ran")) {
    form.append(h("div", { class: "inline" }, field("Output (with ran)", output, { name: "output" }),
      field("Exit code (with ran)", exit, { name: "exit_code", hint: "0..255, or -1..-64 for a signal" })));
  }
  form.append(h("div", { class: "row" }, verdicts.map((v) => button(VERDICTS[v] || v, () => decide(v), { class: "primary" }))));
  return form;
}

function budgetForm(act) {
  const tokens = input({ name: "max_tokens", type: "number", min: 1 });
  const cost = input({ name: "max_cost", type: "number", min: 0, step: "any" });
  const note = input({ name: "note", maxlength: 500 });
  const form = h("form", { class: "inline", "aria-label": "Raise the budget", onsubmit: async (e) => {
    e.preventDefault();
    const raise = { note: note.value };
    if (tokens.value) raise.max_tokens = Number(tokens.value);
    if (cost.value) raise.max_cost = Number(cost.value);
    try { await act("resume", { raise_budget: raise }); } catch (err) { showErrors(form, err); }
  } }, field("New token budget", tokens, { name: "raise_budget.max_tokens" }),
  field("New cost budget", cost, { name: "raise_budget.max_cost" }),
  field("Note", note, { name: "raise_budget.note" }),
  h("button", { type: "submit", class: "primary" }, "Raise budget and resume"));
  return form;
}
