// Operators (space admins and owners): the space's runs by status, each run's usage and
// cost, a total; cancel an active run, resume a blocked or interrupted one with an
// optional budget raise. Refreshes itself while a run is active.
import { ApiError } from "../api.js";
import {
  badge, button, clear, field, formatCost, formatTime, formatTokens, h, input, pageTitle,
  section, select, showErrors, table,
} from "../dom.js";
import { enc, go, route } from "../router.js";

const STATUSES = ["all", "running", "queued", "blocked", "interrupted", "failed", "completed",
  "cancelled"];
const ACTIVE = new Set(["queued", "running"]);
const RESUMABLE = new Set(["blocked", "interrupted"]);
const REFRESH_MS = 3000;

route("/s/:space/runs", async (ctx) => {
  const { api, main, params, query, signal } = ctx;
  const base = `/spaces/${enc(params.space)}/runs`;
  const status = STATUSES.includes(query.get("status")) ? query.get("status") : "all";
  const list = h("div");
  const total = h("p", { class: "total-cost" });
  const filter = select(STATUSES.map((s) => [s, s === "all" ? "All statuses" : s]),
    { name: "status", value: status, onchange: (e) => {
      go(`/s/${enc(params.space)}/runs${e.target.value === "all" ? "" : `?status=${e.target.value}`}`);
    } });
  let timer = null;
  signal.addEventListener("abort", () => clearTimeout(timer));

  async function load() {
    const runs = await api.get(base, { status: status === "all" ? undefined : status, limit: 200 },
      { signal });
    if (signal.aborted) return runs;
    // an open resume form (being filled in) is not redrawn under the user's hands
    if (!list.querySelector("details[open]")) clear(list, runsTable(runs.items));
    clear(total, totalLine(runs.items));
    return runs;
  }

  async function tick() {
    if (signal.aborted) return;
    try {
      const runs = await load();
      if (!signal.aborted && runs.items.some((r) => ACTIVE.has(r.status))) timer = setTimeout(tick, REFRESH_MS);
    } catch (err) {
      if (err.name !== "AbortError") ctx.notify(err.message, "error");
    }
  }

  function runsTable(items) {
    return table([
      { title: "Run", cell: (r) => [h("code", {}, r.run_id), h("div", { class: "muted" }, `v${r.version}`)] },
      { title: "User", cell: (r) => r.user_id },
      { title: "Status", cell: (r) => badge(r.status) },
      { title: "Reason", cell: (r) => (r.error_code ? h("code", {}, r.error_code) : "—") },
      { title: "Model calls", cell: (r) => (r.usage ? String(r.usage.calls) : "—") },
      { title: "Tokens", cell: (r) => formatTokens(r.usage && r.usage.total_tokens) },
      { title: "Cost", cell: (r) => h("span", { class: "cost" },
        formatCost(r.usage && r.usage.cost, (r.usage && r.usage.currency) || undefined)) },
      { title: "When", cell: (r) => formatTime(r.updated_at) },
      { title: "Actions", cell: (r) => actions(r) },
    ], items, { caption: status === "all" ? "All runs" : `Runs: ${status}`,
      empty: status === "all" ? "No runs in this space yet." : `No ${status} runs.` });
  }

  function actions(run) {
    const out = [];
    if (ACTIVE.has(run.status)) {
      out.push(button("Cancel", async (e) => {
        e.target.disabled = true;
        try {
          await api.post(`${base}/${enc(run.run_id)}/cancel`, { reason: "cancelled from the console" });
          ctx.notify(`Run ${run.run_id} cancelled.`, "ok");
        } catch (err) {
          ctx.notify(`${err.message}${err.code ? ` (${err.code})` : ""}`, "error");
        }
        clearTimeout(timer);
        tick();
      }, { class: "danger secondary", "aria-label": `Cancel run ${run.run_id}` }));
    }
    if (RESUMABLE.has(run.status)) out.push(resumeForm(run));
    return out.length ? out : h("span", { class: "muted" }, "—");
  }

  function resumeForm(run) {
    const tokens = input({ type: "number", min: "1", step: "1", inputmode: "numeric" });
    const cost = input({ type: "number", min: "0", step: "any" });
    const note = input({ maxlength: 500 });
    const form = h("form", { class: "stack", onsubmit: async (e) => {
      e.preventDefault();
      const raise = {};
      if (tokens.value) raise.max_tokens = Number(tokens.value);
      if (cost.value) raise.max_cost = Number(cost.value);
      if (note.value) raise.note = note.value;
      const body = raise.max_tokens || raise.max_cost ? { raise_budget: raise } : {};
      try {
        await api.post(`${base}/${enc(run.run_id)}/resume`, body);
        ctx.notify(`Run ${run.run_id} resumed.`, "ok");
        details.open = false;
        clearTimeout(timer);
        tick();
      } catch (err) { showErrors(form, err); }
    } },
    field("Raise max tokens to", tokens, { name: "raise_budget.max_tokens",
      hint: "Optional: above the run's current token budget." }),
    field("Raise max cost to", cost, { name: "raise_budget.max_cost",
      hint: "Optional: needs the version's max_cost and model prices." }),
    field("Note", note, { name: "raise_budget.note" }),
    h("button", { type: "submit", class: "primary", "aria-label": `Resume run ${run.run_id}` },
      "Resume run"));
    const details = h("details", { class: "resume" },
      h("summary", {}, "Resume…", h("span", { class: "visually-hidden" }, ` run ${run.run_id}`)), form);
    return details;
  }

  let first;
  try {
    first = await load();
  } catch (err) {
    if (err instanceof ApiError && err.status === 403) {
      clear(main, pageTitle("Runs"), h("p", { class: "notice notice-error", role: "alert" },
        `${err.message}. Only the space's admins and owners see its runs.`,
        h("code", { class: "code" }, err.code)));
      return;
    }
    throw err;
  }
  clear(main, pageTitle("Runs", h("div", { class: "row" },
    field("Status", filter, { name: "status" }),
    button("Refresh", () => { clearTimeout(timer); tick(); }, { class: "secondary" }))),
  section("Runs of this space", total, list));
  if (first.items.some((r) => ACTIVE.has(r.status))) timer = setTimeout(tick, REFRESH_MS);
}, { nav: "runs" });

function totalLine(items) {
  const priced = items.filter((r) => r.usage && r.usage.cost !== null && r.usage.cost !== undefined);
  const sum = priced.reduce((acc, r) => acc + Number(r.usage.cost), 0);
  const tokens = items.reduce((acc, r) => acc + ((r.usage && r.usage.total_tokens) || 0), 0);
  const currency = (priced[0] && priced[0].usage.currency) || undefined;
  const unpriced = items.length - priced.length;
  return [h("strong", {}, "Total cost: "), h("span", { class: "cost", dataset: { total: "cost" } },
    priced.length ? formatCost(sum, currency) : "—"),
  ` over ${items.length} run${items.length === 1 ? "" : "s"} shown, ${formatTokens(tokens)} tokens`,
  unpriced ? ` (${unpriced} without prices: no cost)` : ""];
}
