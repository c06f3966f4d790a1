// Members: the space's members with their roles (everyone in the space reads them);
// admins invite by user id with a role, change a role and remove a member. Only an
// owner grants, changes or removes the owner role, and a space keeps one owner: the
// API's refusals (role_required, last_owner) are shown as it words them.
import { badge, button, clear, field, formatTime, h, input, pageTitle, section, select, showErrors, table } from "../dom.js";
import { enc, go, route } from "../router.js";

const ROLES = [["member", "member"], ["admin", "admin"], ["owner", "owner"]];
const MAY = [
  ["member", "reads the space, its members, agents and published versions; has sessions of their own"],
  ["admin", "also agents and drafts, model connections, MCP, knowledge, members and the space's runs"],
  ["owner", "also grants, changes and removes the owner role (a space keeps at least one owner)"],
];

route("/s/:space/members", async (ctx) => {
  const { api, main, params, me } = ctx;
  const base = `/spaces/${enc(params.space)}/members`;
  const { items } = await api.get(base);
  const mine = ctx.space.role;
  const admin = mine === "admin" || mine === "owner";
  const choices = mine === "owner" ? ROLES : ROLES.filter(([r]) => r !== "owner");
  const alert = h("div", { class: "form-alert", role: "alert", tabindex: "-1", hidden: true });
  const fail = (what, err) => {
    alert.hidden = false;
    clear(alert, h("strong", {}, `${what}: ${err.message}`), h("code", { class: "code" }, err.code));
    alert.focus();
  };

  const setRole = async (m, role) => {
    try {
      await api.put(`${base}/${enc(m.user_id)}`, { role });
      if (m.user_id === me.user_id) ctx.space.role = role; // the menu follows
      ctx.notify(`${m.user_id} is now ${role}.`, "ok");
      ctx.refresh();
    } catch (err) { fail(`Could not make ${m.user_id} ${role}`, err); }
  };
  const remove = async (m) => {
    try {
      await api.del(`${base}/${enc(m.user_id)}`);
      ctx.notify(m.user_id === me.user_id ? "You left the space." : `Removed ${m.user_id} from the space.`, "ok");
      if (m.user_id === me.user_id) go("/spaces"); else ctx.refresh();
    } catch (err) { fail(`Could not remove ${m.user_id}`, err); }
  };
  const actions = (m) => {
    if (m.role === "owner" && mine !== "owner") return h("span", { class: "muted" }, "Only an owner changes an owner.");
    const role = select(choices, { value: m.role, "aria-label": `Role of ${m.user_id}` });
    const slot = h("div", { class: "row" });
    const plain = () => clear(slot, role,
      button("Change role", () => setRole(m, role.value), { class: "secondary", "aria-label": `Change the role of ${m.user_id}` }),
      button("Remove", confirm, { class: "danger secondary", "aria-label": `Remove ${m.user_id}` }));
    const confirm = () => {
      clear(slot, h("span", {}, m.user_id === me.user_id ? "Leave this space?" : `Remove ${m.user_id} from this space?`),
        button(`Yes, remove ${m.user_id}`, () => remove(m), { class: "danger" }),
        button("Keep", () => { plain(); slot.querySelector("button").focus(); }, { "aria-label": `Keep ${m.user_id}` }));
      slot.querySelector("button").focus();
    };
    plain();
    return slot;
  };

  const listed = table([
    { title: "User", cell: (m) => [h("strong", {}, m.user_id), m.user_id === me.user_id ? " (you)" : null] },
    { title: "Role", cell: (m) => badge(m.role) },
    { title: "Added", cell: (m) => `${formatTime(m.added_at)} by ${m.added_by}` },
    ...(admin ? [{ title: "Actions", cell: actions }] : []),
  ], items, { caption: `${items.length} members`, empty: "No members." });
  clear(main, pageTitle("Members"), section("In this space", alert, listed),
    admin ? section("Invite a member", inviteForm(ctx, base, items, choices)) : null,
    h("details", { class: "schema" }, h("summary", {}, "What each role may do"),
      h("dl", { class: "facts" }, MAY.map(([r, text]) => [h("dt", {}, badge(r)), h("dd", {}, text)]))));
}, { nav: "members" });

function inviteForm(ctx, base, members, choices) {
  const user = input({ required: true, maxlength: 128, autocomplete: "off", spellcheck: "false" });
  const role = select(choices, { value: "member" });
  const form = h("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    showErrors(form, null);
    const id = user.value.trim();
    if (members.some((m) => m.user_id === id)) {
      showErrors(form, { message: `${id} is already a member`, code: "already_member",
        fields: [{ field: "user_id", message: "already in this space: change their role in the table" }] });
      return;
    }
    try {
      await ctx.api.put(`${base}/${enc(id)}`, { role: role.value });
      ctx.notify(`Added ${id} as ${role.value}.`, "ok");
      ctx.refresh();
    } catch (err) {
      // a refused id names no field: it is this control's
      if (err.code === "invalid_user_id") err.fields = [{ field: "user_id", message: err.message }];
      showErrors(form, err);
    }
  } }, field("User id", user, { name: "user_id",
    hint: "The id they sign in with (shown as “Signed in as …”). They are in the space at once." }),
  field("Role", role, { name: "role" }), h("button", { type: "submit", class: "primary" }, "Invite"));
  return form;
}
