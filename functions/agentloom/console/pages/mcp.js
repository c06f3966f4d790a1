// MCP: the space's MCP resources (remote servers over Streamable HTTP or SSE); add one
// with an optional write-only credential, discover its tools, edit, delete (admins).
import {
  badge, button, clear, field, formatTime, h, input, pageTitle, section, select, showErrors, table,
} from "../dom.js";
import { enc, route } from "../router.js";

const TRANSPORTS = [["streamable_http", "Streamable HTTP"], ["sse", "SSE (legacy)"]];
const CREDENTIALS = [["", "None"], ["bearer", "Bearer token"], ["header", "Custom header"], ["env", "Environment variable (stdio)"]];

route("/s/:space/mcp", async (ctx) => {
  const { api, main, params } = ctx;
  const base = `/spaces/${enc(params.space)}/mcp/resources`;
  const admin = ctx.space.role === "admin" || ctx.space.role === "owner";
  const { items } = await api.get(base);
  const tools = h("div", { "aria-live": "polite" });
  const editing = h("div");

  async function discover(r, btn) {
    btn.disabled = true;
    clear(tools, h("p", { class: "muted" }, `Discovering the tools of ${r.name}…`));
    try {
      const found = await api.post(`${base}/${enc(r.resource_id)}/discover`, {});
      clear(tools, section(`Tools of ${r.name}`, toolsTable(found.items)));
    } catch (err) {
      clear(tools, h("p", { class: "notice notice-error", role: "alert" }, `Discovery failed: ${err.message}`,
        h("code", { class: "code" }, err.code), err.details.reason ? ` (reason: ${err.details.reason})` : null));
    }
    btn.disabled = false;
  }

  const listed = table([
    { title: "Name", cell: (r) => h("strong", {}, r.name) },
    { title: "Transport", cell: (r) => r.spec.transport },
    { title: "Address", cell: (r) => h("code", {}, r.spec.url || [r.spec.command, ...(r.spec.args || [])].join(" ")) },
    { title: "Credential", cell: (r) => (r.has_credential
      ? `${r.credential_kind}${r.credential_name ? ` (${r.credential_name})` : ""}, stored` : "none") },
    { title: "Revision", cell: (r) => `${r.revision} · ${formatTime(r.updated_at)}` },
    { title: "Actions", cell: (r) => (admin ? h("div", { class: "row" },
      button("Discover tools", (e) => discover(r, e.target), { class: "secondary", "aria-label": `Discover tools of ${r.name}` }),
      button("Edit", () => clear(editing, editForm(ctx, base, r)), { class: "secondary", "aria-label": `Edit ${r.name}` }),
      button("Delete", async () => {
        try { await api.del(`${base}/${enc(r.resource_id)}`); ctx.notify(`Deleted ${r.name}.`, "ok"); ctx.refresh(); }
        catch (err) { ctx.notify(`${err.message} (${err.code})`, "error"); }
      }, { class: "danger secondary", "aria-label": `Delete ${r.name}` })) : "—") },
  ], items, { caption: "MCP resources of this space", empty: "No MCP resources yet." });
  clear(main, pageTitle("MCP resources"), section("Resources", listed), tools, editing,
    admin ? section("Add an MCP resource", resourceForm(ctx, base)) : null);
}, { nav: "mcp" });

// The shared controls of the add and edit forms; spec() builds the API's spec.
function controls(r) {
  const name = input({ required: true, maxlength: 100, value: r ? r.name : "" });
  const transport = select(TRANSPORTS, { value: r ? r.spec.transport : "streamable_http" });
  const url = input({ type: "url", required: true, maxlength: 2000, value: r ? r.spec.url || "" : "",
    placeholder: "https://mcp.example.com/mcp" });
  const timeout = input({ type: "number", min: "1", max: "600", step: "any",
    value: r ? String(r.spec.timeout_seconds) : "30" });
  const kind = select(CREDENTIALS, { value: "" });
  const header = input({ maxlength: 64, placeholder: "X-Api-Key" });
  const value = input({ type: "password", autocomplete: "off", maxlength: 8000 });
  // a stdio resource (a command in the sandbox) keeps its spec here: the API edits it
  const stdio = Boolean(r && r.spec.transport === "stdio");
  const spec = () => (stdio ? r.spec : { ...(r ? r.spec : {}), transport: transport.value, url: url.value,
    timeout_seconds: Number(timeout.value || 30) });
  const credential = () => (kind.value ? { kind: kind.value, name: kind.value === "bearer" ? null : header.value,
    value: value.value } : null);
  const fields = [field("Name", name, { name: "name" }), ...(stdio ? [] : [
    field("Transport", transport, { name: "spec.transport" }), field("URL", url, { name: "spec.url" }),
    field("Timeout (seconds)", timeout, { name: "spec.timeout_seconds" })]),
    field(r ? "New credential" : "Credential", kind, { name: "credential.kind",
      hint: "Write-only: it is never shown again." }),
    field("Header or variable name", header, { name: "credential.name" }),
    field("Credential value", value, { name: "credential.value" })];
  return { name, spec, credential, fields };
}

function resourceForm(ctx, base) {
  const c = controls(null);
  const form = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const made = await ctx.api.post(base, { name: c.name.value, spec: c.spec(), credential: c.credential() });
      ctx.notify(`Added ${made.name}: discover its tools to check it.`, "ok");
      ctx.refresh();
    } catch (err) { showErrors(form, err); }
  } }, h("div", { class: "grid" }, c.fields), h("button", { type: "submit", class: "primary" }, "Add resource"));
  return form;
}

function editForm(ctx, base, r) {
  const c = controls(r);
  const drop = h("input", { type: "checkbox" });
  const form = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await ctx.api.put(`${base}/${enc(r.resource_id)}`, { revision: r.revision, name: c.name.value,
        spec: c.spec(), credential: c.credential(), clear_credential: drop.checked });
      ctx.notify(`Saved ${c.name.value}.`, "ok");
      ctx.refresh();
    } catch (err) { showErrors(form, err); }
  } }, h("div", { class: "grid" }, c.fields),
  r.has_credential ? h("label", { class: "row" }, drop, "Remove the stored credential") : null,
  h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Save changes"),
    button("Close", () => form.closest("section").remove())));
  return section(`Edit ${r.name} (revision ${r.revision})`, form);
}

function toolsTable(items) {
  return table([
    { title: "Tool", cell: (t) => [h("code", {}, t.name), t.title ? h("div", {}, t.title) : null] },
    { title: "Description", cell: (t) => t.description || "—" },
    { title: "Hints", cell: (t) => [t.read_only_hint ? "read-only " : "", t.idempotent_hint ? "idempotent " : "",
      t.destructive_hint ? "destructive" : ""].join("").trim() || "—" },
    { title: "Usable", cell: (t) => (t.usable ? badge("usable") : [badge("error"), ` ${t.unusable_reason}`]) },
    { title: "Input schema", cell: (t) => h("details", { class: "schema" },
      h("summary", {}, `Schema of ${t.name}`), h("pre", {}, JSON.stringify(t.input_schema, null, 2))) },
  ], items, { empty: "The server lists no tools." });
}
