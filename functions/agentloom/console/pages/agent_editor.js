// An agent's draft editor: the common config fields as controls (each named by its API
// field path, so a 422 lands under it), tools toggles, skills / knowledge bases / MCP
// tools through pickers, the whole config as JSON (nothing unreachable), Save and Publish.
import { button, clear, field, formatTime, h, input, pageTitle, section, select, showErrors } from "../dom.js";
import { enc, link, route } from "../router.js";

const TOOLS = [["workspace", "Workspace files (list, read, write, edit…)"],
  ["workspace_command", "Workspace commands"]];
const isAdmin = (ctx) => ctx.space.role === "admin" || ctx.space.role === "owner";
const optional = (p, fallback) => p.catch(() => fallback);

function picker(legend, options, chosen, name) {
  const boxes = options.map(([value, text]) => {
    const box = h("input", { type: "checkbox", value, checked: chosen.includes(value) });
    return { box, el: h("label", { class: "check" }, box, ` ${text}`) };
  });
  const set = h("fieldset", { class: "picker", dataset: { field: name } }, h("legend", {}, legend),
    options.length ? boxes.map((b) => b.el) : h("p", { class: "muted" }, "None in this space."));
  set.id = `picker-${name.replace(/\W/g, "-")}`;
  const error = h("p", { class: "field-error", id: `${set.id}-error`, hidden: true });
  return { el: h("div", { class: "field" }, set, error), value: () => boxes.filter((b) => b.box.checked).map((b) => b.box.value) };
}

route("/s/:space/agents/:agent", async (ctx) => {
  const { api, main, params } = ctx;
  const sp = enc(params.space);
  const base = `/spaces/${sp}/agents/${enc(params.agent)}`;
  const { agent } = await api.get(base);
  const head = pageTitle(`Agent ${agent.name}`, h("a", { href: link(`/s/${sp}/agents`) }, "All agents"), " ",
    h("a", { href: link(`/s/${sp}/agents/${enc(params.agent)}/versions`) }, "Versions"));
  if (!isAdmin(ctx)) {
    clear(main, head, section("Published", h("p", {}, agent.latest_version ? `Latest version: v${agent.latest_version}` : "Not published yet.")));
    return;
  }
  const [draft, skills, bases, resources, connections] = await Promise.all([
    api.get(`${base}/draft`), optional(api.get(`/spaces/${sp}/skills`), { items: [] }),
    optional(api.get(`/spaces/${sp}/knowledge/bases`), { items: [] }),
    optional(api.get(`/spaces/${sp}/mcp/resources`), { items: [] }),
    optional(api.get(`/spaces/${sp}/models/connections`), { items: [] })]);
  clear(main, head, editor(ctx, base, draft, { skills: skills.items, bases: bases.items,
    resources: resources.items, connections: connections.items }));
}, { nav: "agents" });

function editor(ctx, base, draft, sources) {
  let revision = draft.revision;
  const c = draft.config;
  const prompt = h("textarea", { rows: 8, value: c.prompt || "" });
  const model = input({ value: c.model?.model || "" });
  const connection = select([["", "— keep the current model settings —"],
    ...sources.connections.map((m) => [m.connection_id, `${m.name} (${m.spec.model})`])]);
  const mode = select([["react", "react (act, observe, repeat)"], ["plan", "plan (plan first, then act)"]], { value: c.mode || "react" });
  const temperature = input({ type: "number", step: "0.1", value: c.model?.temperature ?? "" });
  const ctxWindow = input({ type: "number", value: c.model?.context_window ?? "" });
  const maxCalls = input({ type: "number", value: c.limits?.max_model_calls ?? "" });
  const maxCost = input({ type: "number", step: "any", value: c.limits?.max_cost ?? "" });
  const tools = picker("Tools", TOOLS, c.tools || [], "config.tools");
  const skills = picker("Skills", sources.skills.map((s) => [s.name, `${s.name} — ${s.description}`]),
    (c.skills || []).map((r) => r.split("@")[0]), "config.skills");
  const bases = picker("Knowledge bases", sources.bases.map((b) => [b.base_id, b.name]), c.knowledge_bases || [],
    "config.knowledge_bases");
  const mcp = mcpPicker(ctx, sources.resources, c.mcp_tools || []);
  const json = h("textarea", { rows: 16, class: "code", spellcheck: "false", value: JSON.stringify(c, null, 2) });
  const num = (el) => (el.value === "" ? null : Number(el.value));
  const collect = () => {
    let config;
    try { config = JSON.parse(json.value); } catch (err) {
      throw { message: "the JSON is not valid", code: "invalid_json", fields: [{ field: "config", message: String(err.message) }] };
    }
    const chosen = sources.connections.find((m) => m.connection_id === connection.value);
    config.model = { ...(config.model || {}), ...(chosen ? chosen.spec : {}) };
    if (!chosen) config.model.model = model.value;
    config.model.temperature = num(temperature);
    if (num(ctxWindow) !== null) config.model.context_window = num(ctxWindow);
    config.limits = { ...(config.limits || {}), max_cost: num(maxCost) };
    if (num(maxCalls) !== null) config.limits.max_model_calls = num(maxCalls);
    Object.assign(config, { prompt: prompt.value, mode: mode.value, tools: tools.value(),
      skills: skills.value(), knowledge_bases: bases.value() });
    config.mcp_tools = mcp.value(config.mcp_tools || []);
    return config;
  };
  const status = h("p", { class: "muted", role: "status", id: "draft-status" }, `Draft revision ${revision}, ${formatTime(draft.updated_at)} by ${draft.updated_by}`);
  const save = async () => {
    showErrors(form, null);
    const saved = await ctx.api.put(`${base}/draft`, { config: collect(), revision });
    revision = saved.revision;
    json.value = JSON.stringify(saved.config, null, 2);
    status.textContent = `Saved: draft revision ${revision}`;
    return saved;
  };
  const form = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    try { await save(); ctx.notify("Draft saved.", "ok"); } catch (err) { showErrors(form, err); }
  } },
  section("Behaviour", field("Prompt", prompt, { name: "config.prompt" }), field("Mode", mode, { name: "config.mode" }),
    tools.el, skills.el, bases.el, mcp.el),
  section("Model", field("Model connection", connection, { name: "config.model.base_url", hint: "Copies the connection's settings (its key reference, never a key)." }),
    field("Model name", model, { name: "config.model.model" }),
    field("Temperature", temperature, { name: "config.model.temperature", hint: "0–2; empty: the model's default." }),
    field("Context window (tokens)", ctxWindow, { name: "config.model.context_window" })),
  section("Budget", field("Max model calls per run", maxCalls, { name: "config.limits.max_model_calls" }),
    field("Max cost per run", maxCost, { name: "config.limits.max_cost", hint: "Empty: no cost limit." })),
  h("details", { class: "schema" }, h("summary", {}, "Advanced (JSON)"),
    field("Whole config (JSON)", json, { name: "config", hint: "The fields above override what is typed here." })),
  status,
  h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Save draft"),
    button("Publish", async () => {
      try {
        await save();
        const out = await ctx.api.post(`${base}/publish`, { revision });
        const word = out.created ? "Published" : "Unchanged since";
        status.textContent = `${word} version ${out.version.version}`;
        ctx.notify(`${word} version ${out.version.version}.`, "ok");
      } catch (err) { showErrors(form, err); }
    })));
  return form;
}

// Each MCP resource's tools, discovered on demand, as checkboxes; a discovered resource's
// bindings are what is checked (an existing binding kept as it is), others stay as typed.
function mcpPicker(ctx, resources, bound) {
  const found = new Map(); // resource_id -> [{ tool, box }]
  const items = resources.map((r) => {
    const slot = h("div", { "aria-live": "polite" });
    const discover = button(`Discover tools of ${r.name}`, async () => {
      clear(slot, h("p", { class: "muted" }, "Discovering…"));
      try {
        const out = await ctx.api.post(`/spaces/${enc(ctx.params.space)}/mcp/resources/${enc(r.resource_id)}/discover`, {});
        const boxes = out.items.map((t) => ({ tool: t.name, box: h("input", { type: "checkbox", value: t.name,
          checked: bound.some((b) => b.resource_id === r.resource_id && b.tool === t.name) }) }));
        found.set(r.resource_id, boxes);
        clear(slot, boxes.length ? boxes.map((b) => h("label", { class: "check" }, b.box, ` ${b.tool}`))
          : h("p", { class: "muted" }, "No tools."));
      } catch (err) { clear(slot, h("p", { class: "notice notice-error", role: "alert" }, `Discovery failed: ${err.message}`)); }
    });
    const count = bound.filter((b) => b.resource_id === r.resource_id).length;
    return h("li", {}, `${r.name} (${count} tools bound) `, discover, slot);
  });
  const el = h("div", { class: "field", id: "picker-mcp", dataset: { field: "config.mcp_tools" } },
    h("p", {}, "MCP tools"),
    resources.length ? h("ul", {}, items) : h("p", { class: "muted" }, "No MCP resources in this space."),
    h("p", { class: "field-error", id: "picker-mcp-error", hidden: true }));
  const value = (typed) => {
    const kept = typed.filter((b) => !found.has(b.resource_id));
    for (const [resourceId, boxes] of found) {
      for (const { tool, box } of boxes) {
        if (!box.checked) continue;
        kept.push(typed.find((b) => b.resource_id === resourceId && b.tool === tool) || { resource_id: resourceId, tool });
      }
    }
    return kept;
  };
  return { el, value };
}
