// Agents: the space's agents (published version, draft state), a new agent (admins),
// and an agent's published versions with a line diff of two of them.
import {
  clear, field, formatTime, h, input, pageTitle, section, select, showErrors, table,
} from "../dom.js";
import { jsonDiff } from "../diff.js";
import { enc, go, link, route } from "../router.js";
import "./agent_editor.js";

export const isAdmin = (ctx) => ctx.space.role === "admin" || ctx.space.role === "owner";

route("/s/:space/agents", async (ctx) => {
  const { api, main, params } = ctx;
  const sp = enc(params.space);
  const { items } = await api.get(`/spaces/${sp}/agents`);
  const drafts = isAdmin(ctx)
    ? await Promise.all(items.map((a) => api.get(`/spaces/${sp}/agents/${enc(a.agent_id)}/draft`).catch(() => null)))
    : items.map(() => null);
  const draftOf = new Map(items.map((a, i) => [a.agent_id, drafts[i]]));
  const listed = table([
    { title: "Agent", cell: (a) => h("a", { href: link(`/s/${sp}/agents/${enc(a.agent_id)}`) }, a.name) },
    { title: "Published", cell: (a) => (a.latest_version ? `v${a.latest_version}` : "never") },
    { title: "Draft", cell: (a) => {
      const d = draftOf.get(a.agent_id);
      return d ? `revision ${d.revision} by ${d.updated_by}` : "—";
    } },
    { title: "Updated", cell: (a) => formatTime(draftOf.get(a.agent_id)?.updated_at || a.created_at) },
  ], items, { caption: "Agents of this space", empty: "No agents yet." });
  let form = null;
  if (isAdmin(ctx)) {
    const { items: connections } = await api.get(`/spaces/${sp}/models/connections`).catch(() => ({ items: [] }));
    form = newAgentForm(ctx, sp, connections);
  }
  clear(main, pageTitle("Agents"), section("Agents", listed), form ? section("New agent", form) : null);
}, { nav: "agents" });

function newAgentForm(ctx, sp, connections) {
  const name = input({ required: true, maxlength: 200 });
  const model = input({ placeholder: "gpt-4o-mini" });
  const connection = select([["", "— type a model name instead —"],
    ...connections.map((c) => [c.connection_id, `${c.name} (${c.spec.model})`])]);
  const prompt = h("textarea", { rows: 4 });
  const form = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    showErrors(form, null);
    const chosen = connections.find((c) => c.connection_id === connection.value);
    const config = { prompt: prompt.value, model: chosen ? { ...chosen.spec } : { model: model.value } };
    try {
      const out = await ctx.api.post(`/spaces/${sp}/agents`, { name: name.value, config });
      ctx.notify(`Created agent ${out.agent.name}.`, "ok");
      go(`/s/${sp}/agents/${enc(out.agent.agent_id)}`);
    } catch (err) { showErrors(form, err); }
  } }, field("Name", name, { name: "name" }),
  field("Model connection", connection, { name: "config.model",
    hint: "Copies the connection's settings into the agent." }),
  field("Model name", model, { name: "config.model.model", hint: "Used when no connection is chosen." }),
  field("Prompt", prompt, { name: "config.prompt" }),
  h("button", { type: "submit", class: "primary" }, "Create agent"));
  return form;
}

route("/s/:space/agents/:agent/versions", async (ctx) => {
  const { api, main, params } = ctx;
  const sp = enc(params.space);
  const base = `/spaces/${sp}/agents/${enc(params.agent)}`;
  const [{ agent }, { items }] = await Promise.all([api.get(base), api.get(`${base}/versions`)]);
  const options = items.map((v) => [String(v.version), `v${v.version} (${formatTime(v.published_at)})`]);
  const older = select(options, { value: options.length > 1 ? options[options.length - 2][0] : options[0]?.[0] });
  const newer = select(options, { value: options[options.length - 1]?.[0] });
  const out = h("div", { "aria-live": "polite" });
  const show = async () => {
    const [a, b] = await Promise.all([api.get(`${base}/versions/${older.value}`), api.get(`${base}/versions/${newer.value}`)]);
    clear(out, h("pre", { class: "diff", "aria-label": `Changes from v${older.value} to v${newer.value}` },
      jsonDiff(a.snapshot, b.snapshot).map(([sign, text]) => h("span", {
        class: sign === "+" ? "diff-line diff-add" : sign === "−" ? "diff-line diff-del" : "diff-line",
      }, `${sign} ${text}\n`))));
  };
  const listed = table([
    { title: "Version", cell: (v) => `v${v.version}` },
    { title: "Published", cell: (v) => `${formatTime(v.published_at)} by ${v.published_by}` },
    { title: "Draft revision", cell: (v) => String(v.draft_revision) },
    { title: "Content hash", cell: (v) => h("code", { title: v.content_hash }, v.content_hash.slice(0, 19)) },
  ], items, { caption: "Published versions", empty: "Not published yet." });
  clear(main, pageTitle(`Versions of ${agent.name}`, h("a", { href: link(`/s/${sp}/agents/${enc(params.agent)}`) }, "Edit draft")),
    section("Versions", listed),
    items.length ? section("Compare", h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); show(); } },
      field("From", older), field("To", newer), h("button", { type: "submit" }, "Show diff")), out) : null);
}, { nav: "agents" });

