// Skills: the space's skills (each name's current version, pinned by ref), a skill's
// detail (front matter, files), import from a zip (admins), delete (admins).
import {
  badge, button, clear, field, formatTime, h, input, pageTitle, section, showErrors, table,
} from "../dom.js";
import { enc, go, link, route } from "../router.js";

const MAX_ZIP = 750 * 1024; // the API's 1 MiB request limit, after base64

const isAdmin = (ctx) => ctx.space.role === "admin" || ctx.space.role === "owner";

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  return n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(2)} MiB`;
}

// A file's bytes as standard base64 (chunked: btoa takes a string of byte values)
export async function fileBase64(file) {
  const data = new Uint8Array(await file.arrayBuffer());
  let binary = "";
  for (let i = 0; i < data.length; i += 0x8000) binary += String.fromCharCode(...data.subarray(i, i + 0x8000));
  return btoa(binary);
}

route("/s/:space/skills", async (ctx) => {
  const { api, main, params } = ctx;
  const base = `/spaces/${enc(params.space)}/skills`;
  const { items } = await api.get(base);
  const listed = table([
    { title: "Skill", cell: (s) => h("a", { href: link(`/s/${enc(params.space)}/skills/${enc(s.name)}`) }, s.name) },
    { title: "Description", cell: (s) => s.description },
    { title: "Version", cell: (s) => h("code", { title: s.ref }, s.content_hash.slice(0, 19)) },
    { title: "Files", cell: (s) => `${s.file_count} (${bytes(s.total_bytes)})` },
    { title: "Source", cell: (s) => (s.source.kind === "git" ? `git ${s.source.url} @ ${s.source.revision}` : s.source.kind) },
    { title: "Imported", cell: (s) => `${formatTime(s.imported_at)} by ${s.imported_by}` },
  ], items, { caption: "Skills of this space", empty: "No skills yet." });
  clear(main, pageTitle("Skills"), section("Skills", listed),
    isAdmin(ctx) ? section("Import a skill", importForm(ctx, base)) : null);
}, { nav: "skills" });

function importForm(ctx, base) {
  const file = input({ type: "file", accept: ".zip,application/zip", required: true });
  const url = input({ type: "url", placeholder: "https://github.com/org/skills.git" });
  const revision = input({ placeholder: "main" });
  const path = input({ placeholder: "skills/hello" });
  const status = h("p", { class: "muted", role: "status" });
  const form = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    showErrors(form, null);
    const f = file.files[0];
    if (!f) return;
    if (f.size > MAX_ZIP) {
      showErrors(form, { message: "the zip is too large", code: "request_too_large",
        fields: [{ field: "zip_base64", message: `${bytes(f.size)}: at most ${bytes(MAX_ZIP)} through the API` }] });
      return;
    }
    status.textContent = `Importing ${f.name}…`;
    try {
      const out = await ctx.api.post(base, { zip_base64: await fileBase64(f) });
      ctx.notify(out.created ? `Imported skill ${out.skill.name}.` : `Skill ${out.skill.name} already has this content.`, "ok");
      ctx.refresh();
    } catch (err) { status.textContent = ""; showErrors(form, err); }
  } }, field("Skill zip", file, { name: "zip_base64",
    hint: "A zip holding one skill folder with its SKILL.md (front matter: name, description)." }),
  status, h("button", { type: "submit", class: "primary" }, "Import zip"));
  const git = h("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const out = await ctx.api.post(base, { git: { url: url.value, revision: revision.value, path: path.value } });
      ctx.notify(`Imported skill ${out.skill.name} from Git.`, "ok");
      ctx.refresh();
    } catch (err) { showErrors(git, err); }
  } }, field("Repository URL", url, { name: "git.url" }), field("Revision", revision, { name: "git.revision" }),
  field("Path", path, { name: "git.path" }), h("button", { type: "submit" }, "Import from Git"));
  return [form, h("h3", {}, "Or from Git"), git];
}

route("/s/:space/skills/:name", async (ctx) => {
  const { api, main, params } = ctx;
  const path = `/spaces/${enc(params.space)}/skills/${enc(params.name)}`;
  const s = await api.get(path);
  const facts = [["Description", s.description], ["Ref (what a version pins)", h("code", {}, s.ref)],
    ["License", s.license || "—"], ["Compatibility", s.compatibility || "—"],
    ["Allowed tools (recorded, not applied)", s.allowed_tools || "—"],
    ["Imported", `${formatTime(s.imported_at)} by ${s.imported_by}`], ["Source", s.source.kind],
    ...Object.entries(s.metadata || {}).map(([k, v]) => [`metadata.${k}`, v])];
  const del = h("div", { class: "row" });
  const confirmDelete = () => clear(del, h("span", {}, `Delete ${s.name}? Published versions keep their pinned copy.`),
    button(`Yes, delete ${s.name}`, async () => {
      try {
        await api.del(path);
        ctx.notify(`Skill ${s.name} deleted.`, "ok");
        go(`/s/${enc(params.space)}/skills`);
      } catch (err) { ctx.notify(err.message, "error"); }
    }, { class: "danger" }), button("Keep it", () => clear(del, deleteButton())));
  const deleteButton = () => button("Delete skill", confirmDelete, { class: "danger" });
  if (isAdmin(ctx)) clear(del, deleteButton());
  clear(main, pageTitle(`Skill ${s.name}`, h("a", { href: link(`/s/${enc(params.space)}/skills`) }, "All skills")),
    section("About", h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))),
    section("Files", table([
      { title: "Path", cell: (f) => h("code", {}, f.path) },
      { title: "Size", cell: (f) => bytes(f.size) },
      { title: "Executable", cell: (f) => (f.executable ? badge("executable") : "no") },
      { title: "SHA-256", cell: (f) => h("code", { title: f.sha256 }, f.sha256.slice(0, 12)) },
    ], s.files, { caption: `${s.file_count} files, ${bytes(s.total_bytes)}` })),
    isAdmin(ctx) ? section("Delete", del) : null);
}, { nav: "skills" });
