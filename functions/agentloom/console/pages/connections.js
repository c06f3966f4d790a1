// Model connections (admins): the space's connections with their model and the context
// window's source; a new one with discovery; an edit at its revision. A key is
// write-only: the API never returns it, the page only says whether one is stored.
import { button, clear, formatTime, h, pageTitle, section, table } from "../dom.js";
import { enc, route } from "../router.js";
import { SOURCE_MEANS, SOURCE_TEXT, connectionForm, sourceTag } from "./connection_form.js";

route("/s/:space/connections", async (ctx) => {
  const { api, main, params } = ctx;
  const base = `/spaces/${enc(params.space)}/models/connections`;
  const { items } = await api.get(base);
  const editing = h("div");
  const edit = (c) => {
    clear(editing, section(`Edit ${c.name} (revision ${c.revision})`, connectionForm(ctx, base, c)));
    editing.querySelector("input").focus();
  };
  const listed = table([
    { title: "Name", cell: (c) => h("strong", {}, c.name) },
    { title: "Provider", cell: (c) => [c.spec.provider, h("div", {}, h("code", {}, c.spec.base_url))] },
    { title: "Model", cell: (c) => h("code", {}, c.spec.model_id) },
    { title: "Context window", cell: (c) => {
      const w = c.budget.context_window;
      return [h("div", {}, Number(w.value).toLocaleString("en"), " ", sourceTag(w.source)),
        c.budget.warnings.map((x) => h("p", { class: "warning-line" },
          h("span", { "aria-hidden": "true" }, "⚠ "), `Warning: ${x.message}`))];
    } },
    { title: "Key", cell: (c) => (c.has_key ? "stored (write-only)" : "none") },
    { title: "Revision", cell: (c) => `${c.revision} · ${formatTime(c.updated_at)} by ${c.updated_by}` },
    { title: "Actions", cell: (c) => button("Edit", () => edit(c), { class: "secondary", "aria-label": `Edit ${c.name}` }) },
  ], items, { caption: "Model connections of this space", empty: "No model connections yet: add one below." });
  clear(main, pageTitle("Model connections"), section("Connections", listed), editing,
    section("New model connection", connectionForm(ctx, base, null)),
    h("details", { class: "schema" }, h("summary", {}, "Where a context window comes from"),
      h("dl", { class: "facts" }, Object.entries(SOURCE_TEXT).map(([source, text]) => [
        h("dt", {}, text), h("dd", {}, SOURCE_MEANS[source])]))));
}, { nav: "connections" });
