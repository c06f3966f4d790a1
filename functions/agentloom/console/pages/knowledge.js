// Knowledge: the space's knowledge bases (create, delete: admins); a base's documents
// with their indexing state, upload (text as text, other formats as base64), re-index,
// delete; and a search box showing the passages a run would cite.
import {
  badge, button, clear, field, formatTime, h, input, pageTitle, section, select, showErrors, table,
} from "../dom.js";
import { enc, go, link, route } from "../router.js";
import { bytes, fileBase64 } from "./skills.js";

const MAX_DOC = 750 * 1024; // the API's 1 MiB request limit, after base64
const TEXT_TYPES = /^(text\/|application\/(json|xml))|\.(txt|md|markdown|html?)$/i;

const isAdmin = (ctx) => ctx.space.role === "admin" || ctx.space.role === "owner";

route("/s/:space/knowledge", async (ctx) => {
  const { api, main, params } = ctx;
  const base = `/spaces/${enc(params.space)}/knowledge/bases`;
  const { items } = await api.get(base);
  const listed = table([
    { title: "Base", cell: (b) => h("a", { href: link(`/s/${enc(params.space)}/knowledge/${enc(b.base_id)}`) }, b.name) },
    { title: "Description", cell: (b) => b.description || "—" },
    { title: "Embeddings", cell: (b) => [h("code", {}, b.document_model), b.query_model ? [" / ", h("code", {}, b.query_model)] : null] },
    { title: "Chunks", cell: (b) => `${b.chunk_size} chars, ${b.chunk_overlap} overlap` },
    { title: "Created", cell: (b) => `${formatTime(b.created_at)} by ${b.created_by}` },
  ], items, { caption: "Knowledge bases of this space", empty: "No knowledge bases yet." });
  clear(main, pageTitle("Knowledge"), section("Knowledge bases", listed),
    items.length ? section("Search", searchForm(ctx, items.map((b) => b.base_id))) : null,
    isAdmin(ctx) ? section("New knowledge base", await createForm(ctx, base)) : null);
}, { nav: "knowledge" });

async function createForm(ctx, base) {
  const { items: connections } = await ctx.api.get(`/spaces/${enc(ctx.params.space)}/models/connections`);
  const name = input({ required: true, maxlength: 200 });
  const connection = connections.length
    ? select(connections.map((c) => [c.connection_id, `${c.name} (${c.spec.base_url || c.spec.provider})`]))
    : input({ required: true, placeholder: "mdl_…" });
  const docModel = input({ required: true, maxlength: 200, placeholder: "text-embedding-3-small" });
  const queryModel = input({ maxlength: 200 });
  const description = input({ maxlength: 2000 });
  const size = input({ type: "number", min: "200", max: "8000", value: "1000" });
  const overlap = input({ type: "number", min: "0", max: "4000", value: "150" });
  const form = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const made = await ctx.api.post(base, { name: name.value, connection_id: connection.value,
        document_model: docModel.value, query_model: queryModel.value, description: description.value,
        chunk_size: Number(size.value), chunk_overlap: Number(overlap.value) });
      ctx.notify(`Created knowledge base ${made.name}.`, "ok");
      go(`/s/${enc(ctx.params.space)}/knowledge/${enc(made.base_id)}`);
    } catch (err) { showErrors(form, err); }
  } }, h("div", { class: "grid" }, field("Name", name, { name: "name" }),
    field("Embeddings connection", connection, { name: "connection_id",
      hint: connections.length ? "Its base URL serves /embeddings (OpenAI-compatible)." : "No model connection yet: add one first." }),
    field("Document model", docModel, { name: "document_model" }),
    field("Query model", queryModel, { name: "query_model", hint: "Optional: defaults to the document model." }),
    field("Description", description, { name: "description", hint: "Shown to agents that bind the base." }),
    field("Chunk size", size, { name: "chunk_size" }), field("Chunk overlap", overlap, { name: "chunk_overlap" })),
  h("button", { type: "submit", class: "primary" }, "Create knowledge base"));
  return form;
}

function searchForm(ctx, baseIds) {
  const q = input({ required: true, maxlength: 4000, type: "search" });
  const topK = input({ type: "number", min: "1", max: "10", value: "5" });
  const hits = h("div", { "aria-live": "polite" });
  const form = h("form", { class: "inline", role: "search", onsubmit: async (e) => {
    e.preventDefault();
    showErrors(form, null);
    try {
      const found = await ctx.api.post(`/spaces/${enc(ctx.params.space)}/knowledge/search`,
        { query: q.value, knowledge_bases: baseIds, top_k: Number(topK.value || 5) });
      clear(hits, found.items.length ? h("ol", { class: "hits" }, found.items.map((p, i) => h("li", { class: "message" },
        h("header", {}, h("strong", {}, `[${i + 1}] ${p.document}`), p.heading ? ` › ${p.heading}` : "",
          ` · characters ${p.start}–${p.end} · score ${p.score.toFixed(3)}`),
        h("blockquote", {}, p.text),
        h("p", { class: "hint" }, `Cite as: ${p.title || p.document}${p.heading ? `, “${p.heading}”` : ""} (document ${p.document_id}, base ${p.knowledge_base})`))))
        : h("p", { class: "muted empty" }, "No passage matches."));
    } catch (err) { clear(hits); showErrors(form, err); }
  } }, field("Search", q, { name: "query" }), field("Passages", topK, { name: "top_k" }),
  h("button", { type: "submit", class: "primary" }, "Search"));
  return [form, hits];
}

// The state of a document: the upload embeds it before it answers, so a listed document
// is indexed (its chunk count); one being uploaded or re-indexed shows indexing.
function state(doc, pending) {
  if (pending.has(doc.document_id)) return badge("indexing");
  return doc.chunks ? [badge("indexed"), ` ${doc.chunks} chunk${doc.chunks === 1 ? "" : "s"}`] : [badge("empty"), " no chunks"];
}

route("/s/:space/knowledge/:base", async (ctx) => {
  const { api, main, params } = ctx;
  const path = `/spaces/${enc(params.space)}/knowledge/bases/${enc(params.base)}`;
  const [kb, docs] = await Promise.all([api.get(path), api.get(`${path}/documents`)]);
  const admin = isAdmin(ctx);
  const pending = new Set();
  const list = h("div");
  let items = docs.items;
  const draw = (extra = []) => clear(list, table([
    { title: "Document", cell: (d) => [h("strong", {}, d.name), d.title && d.title !== d.name ? h("div", { class: "muted" }, d.title) : null] },
    { title: "Indexing state", cell: (d) => (d.failed ? [badge("error"), ` failed: ${d.failed}`] : state(d, pending)) },
    { title: "Format", cell: (d) => d.format || "—" },
    { title: "Size", cell: (d) => (d.size !== undefined ? `${bytes(d.size)}, ${d.chars} chars` : "—") },
    { title: "Revision", cell: (d) => (d.revision ? `${d.revision} · ${formatTime(d.updated_at)} by ${d.updated_by}` : "—") },
    { title: "Actions", cell: (d) => (admin && d.revision ? button("Delete", async () => {
      try { await api.del(`${path}/documents/${enc(d.document_id)}`); await reload(); }
      catch (err) { ctx.notify(`${err.message} (${err.code})`, "error"); }
    }, { class: "danger secondary", "aria-label": `Delete document ${d.name}` }) : "—") },
  ], [...extra, ...items], { caption: `Documents of ${kb.name}`, empty: "No documents yet." }));
  async function reload(extra) {
    items = (await api.get(`${path}/documents`)).items;
    draw(extra);
  }
  draw();

  const file = input({ type: "file", required: true, accept: ".txt,.md,.markdown,.html,.htm,.pdf,text/*,application/pdf" });
  const upload = h("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    showErrors(upload, null);
    const f = file.files[0];
    if (!f) return;
    if (f.size > MAX_DOC) {
      showErrors(upload, { message: "the document is too large", code: "request_too_large",
        fields: [{ field: "content_base64", message: `${bytes(f.size)}: at most ${bytes(MAX_DOC)} through the API` }] });
      return;
    }
    const row = { document_id: `pending-${f.name}`, name: f.name };
    pending.add(row.document_id);
    draw([row]);
    const body = { name: f.name, media_type: f.type || null };
    if (TEXT_TYPES.test(f.type) || TEXT_TYPES.test(f.name)) body.text = await f.text();
    else body.content_base64 = await fileBase64(f);
    try {
      const out = await api.post(`${path}/documents`, body);
      pending.delete(row.document_id);
      ctx.notify(`${out.created ? "Uploaded" : "Replaced"} ${f.name}: ${out.embedded} chunks embedded, ${out.reused} kept, ${out.removed} dropped.`, "ok");
      await reload();
      upload.reset();
    } catch (err) {
      pending.delete(row.document_id);
      draw([{ ...row, failed: `${err.message} (${err.code})` }]);
      showErrors(upload, err);
    }
  } }, field("Document", file, { name: "content_base64", hint: "Text, Markdown, HTML or PDF (text layer)." }),
  h("button", { type: "submit", class: "primary" }, "Upload and index"));

  const reindex = button("Re-index all", async (e) => {
    e.target.disabled = true;
    items.forEach((d) => pending.add(d.document_id));
    draw();
    try {
      const out = await api.post(`${path}/reindex`, {});
      ctx.notify(`Re-indexed ${kb.name}: ${out.chunks} chunks embedded.`, "ok");
    } catch (err) { ctx.notify(`${err.message} (${err.code})`, "error"); }
    pending.clear();
    await reload();
    e.target.disabled = false;
  }, { class: "secondary" });
  const del = h("div", { class: "row" });
  const askDelete = () => clear(del, h("span", {}, `Delete ${kb.name} with its documents and index?`),
    button(`Yes, delete ${kb.name}`, async () => {
      try { await api.del(path); ctx.notify(`Deleted ${kb.name}.`, "ok"); go(`/s/${enc(params.space)}/knowledge`); }
      catch (err) { ctx.notify(`${err.message} (${err.code})`, "error"); }
    }, { class: "danger" }), button("Keep it", () => clear(del, button("Delete knowledge base", askDelete, { class: "danger" }))));
  clear(del, button("Delete knowledge base", askDelete, { class: "danger" }));
  clear(main, pageTitle(`Knowledge base ${kb.name}`, h("a", { href: link(`/s/${enc(params.space)}/knowledge`) }, "All knowledge bases")),
    h("p", { class: "muted" }, kb.description || "", ` Embedded with ${kb.document_model} through ${kb.connection_id}.`),
    section("Documents", admin ? h("div", { class: "row" }, upload, reindex) : null, list),
    section("Search this base", searchForm(ctx, [kb.base_id])),
    admin ? section("Delete", del) : null);
}, { nav: "knowledge" });
