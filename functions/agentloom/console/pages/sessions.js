// Sessions: the user's sessions in a space, a new one on a published agent, and one
// session's conversation (messages paged, instance filter), its runs and the Ask box.
import { ApiError, newKey } from "../api.js";
import {
  badge, button, clear, field, formatCost, formatTime, formatTokens, h, input, pageTitle,
  section, select, showErrors, table,
} from "../dom.js";
import { enc, go, link, route } from "../router.js";

const PAGE = 50;

function sessionLink(space, s) { return link(`/s/${enc(space)}/sessions/${enc(s)}`); }
export function runLink(space, s, r) { return link(`/s/${enc(space)}/sessions/${enc(s)}/runs/${enc(r)}`); }

export function usageText(usage) {
  if (!usage) return "—";
  return `${formatTokens(usage.total_tokens)} tokens · ${usage.calls ?? 0} calls · ${formatCost(usage.cost)}`;
}

route("/s/:space/sessions", async ({ api, main, params }) => {
  const sp = enc(params.space);
  const [{ items: sessions }, { items: agents }] = await Promise.all([
    api.get(`/spaces/${sp}/sessions`), api.get(`/spaces/${sp}/agents`)]);
  const names = new Map(agents.map((a) => [a.agent_id, a.name]));
  const published = agents.filter((a) => a.latest_version > 0);
  const agent = select(published.map((a) => [a.agent_id, `${a.name} (v${a.latest_version})`]),
    { name: "agent_id", required: true });
  const title = input({ name: "title", maxlength: 200 });
  const form = h("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const made = await api.post(`/spaces/${sp}/sessions`, { agent_id: agent.value, title: title.value });
      go(`/s/${sp}/sessions/${enc(made.session_id)}`);
    } catch (err) { showErrors(form, err); }
  } }, field("Agent", agent, { name: "agent_id", hint: "Published agents only." }),
  field("Title", title, { name: "title", hint: "Optional." }),
  h("button", { type: "submit", class: "primary", disabled: !published.length }, "New session"));
  sessions.sort((a, b) => b.created_at - a.created_at);
  clear(main, pageTitle("Sessions"),
    section("New session", published.length ? form
      : h("p", { class: "muted empty" }, "No agent of this space is published yet: publish one first.")),
    section("Your sessions", table([
      { title: "Session", cell: (s) => h("a", { href: sessionLink(params.space, s.session_id) }, s.title || s.session_id) },
      { title: "Agent", cell: (s) => `${names.get(s.agent_id) || s.agent_id} v${s.version}` },
      { title: "Runs", cell: (s) => String(s.runs) },
      { title: "State", cell: (s) => (s.active_run ? badge("running") : h("span", { class: "muted" }, "idle")) },
      { title: "Created", cell: (s) => formatTime(s.created_at) },
    ], sessions, { caption: "Your sessions in this space", empty: "No session yet: start one above." })));
}, { nav: "sessions" });

// One message as the conversation shows it: its kind, instance, text and tool calls.
export function messageView(item) {
  const m = item.message || {};
  const kind = item.kind;
  const parts = [];
  if (typeof m.content === "string" && m.content) parts.push(h("pre", {}, cap(m.content, 2000)));
  for (const call of m.tool_calls || []) {
    const fn = call.function || {};
    parts.push(h("div", {}, h("strong", {}, `calls ${fn.name}`), h("pre", {}, cap(fn.arguments || "", 2000))));
  }
  return h("article", { class: `message message-${kind === "user" ? "user" : "other"}`, "data-seq": item.seq },
    h("header", {}, `${kind} · ${item.instance} · #${item.seq}${m.tool_call_id ? ` · result of ${m.tool_call_id}` : ""}`),
    parts.length ? parts : h("span", { class: "muted" }, "(empty)"));
}

function cap(text, n) { return text.length > n ? `${text.slice(0, n)}… (${text.length} characters)` : text; }

route("/s/:space/sessions/:session", async (ctx) => {
  const { api, main, params } = ctx;
  const sid = enc(params.session);
  const [session, { items: runs }] = await Promise.all([
    api.get(`/sessions/${sid}`), api.get(`/sessions/${sid}/runs`)]);
  runs.sort((a, b) => b.created_at - a.created_at);

  // Messages, paged: "Load more" reads on from the cursor; the filter restarts it.
  const list = h("div", { class: "messages", "aria-live": "polite" });
  const instances = new Set(["main"]);
  const filter = select([["", "all instances"], ["main", "main"]], { name: "instance" });
  const more = button("Load more", () => loadMessages(), { class: "secondary" });
  let after = 0;
  async function loadMessages(reset = false) {
    if (reset) { after = 0; clear(list); }
    const page = await api.get(`/sessions/${sid}/messages`, { after, limit: PAGE, instance: filter.value });
    for (const item of page.items) {
      list.append(messageView(item));
      if (!instances.has(item.instance)) {
        instances.add(item.instance);
        filter.append(h("option", { value: item.instance }, item.instance));
      }
    }
    after = page.next_after ?? after;
    more.hidden = page.items.length < PAGE;
    if (!list.children.length) list.append(h("p", { class: "muted empty" }, "No messages yet: ask below."));
  }
  filter.addEventListener("change", () => loadMessages(true).catch((err) => ctx.notify(err.message, "error")));
  await loadMessages();

  const question = h("textarea", { name: "question", required: true, rows: 3 });
  let key = newKey(); // the same key for a retry of this question
  question.addEventListener("input", () => { key = newKey(); });
  const ask = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const made = await api.post(`/sessions/${sid}/runs`, { question: question.value },
        { headers: { "Idempotency-Key": key } });
      go(`/s/${enc(params.space)}/sessions/${sid}/runs/${enc(made.run.run_id)}`);
    } catch (err) {
      showErrors(ask, err);
      if (err instanceof ApiError && err.code === "run_active" && err.details.run_id) {
        ask.querySelector(".form-alert").append(h("p", {},
          `Way out: ${err.details.way_out || "wait"} — `,
          h("a", { href: runLink(params.space, params.session, err.details.run_id) }, "open the active run")));
      }
    }
  } }, field("Question", question, { name: "question" }),
  h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Ask")));

  const danger = h("div", { class: "row" });
  const askDelete = () => clear(danger, h("span", {}, "Delete this session, its runs and messages?"),
    button("Yes, delete", async () => {
      try {
        await api.del(`/sessions/${sid}`);
        ctx.notify("The session was deleted.", "ok");
        go(`/s/${enc(params.space)}/sessions`);
      } catch (err) { clear(danger, h("p", { class: "notice notice-error", role: "alert" }, err.message)); }
    }, { class: "danger" }), button("Keep it", () => clear(danger, deleteButton)));
  const deleteButton = button("Delete session", askDelete, { class: "danger" });
  danger.append(deleteButton);

  clear(main, pageTitle(session.title || "Session", h("code", {}, session.session_id)),
    h("div", { class: "split" },
      h("div", {},
        section("Conversation", h("div", { class: "row" }, field("Instance", filter, { hint: "main, or a sub-agent" })), list, more),
        section("Ask", ask)),
      h("div", {},
        section("Runs", table([
          { title: "Run", cell: (r) => h("a", { href: runLink(params.space, params.session, r.run_id) }, r.run_id) },
          { title: "Status", cell: (r) => badge(r.status) },
          { title: "Usage", cell: (r) => usageText(r.usage) },
        ], runs, { caption: "Runs of this session", empty: "No run yet." })),
        section("Session", h("dl", { class: "facts" },
          h("dt", {}, "Agent"), h("dd", {}, `${session.agent_id} v${session.version}`),
          h("dt", {}, "Created"), h("dd", {}, formatTime(session.created_at)),
          h("dt", {}, "Active run"), h("dd", {}, session.active_run
            ? h("a", { href: runLink(params.space, params.session, session.active_run) }, session.active_run) : "none")),
        danger))));
}, { nav: "sessions" });
