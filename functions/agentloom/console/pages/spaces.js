// Spaces: the ones you are in, and a new one (you become its owner).
import { badge, clear, field, h, input, pageTitle, section, showErrors, table } from "../dom.js";
import { enc, go, link, route } from "../router.js";

route("/spaces", async ({ api, main }) => {
  const { items } = await api.get("/spaces");
  const name = input({ name: "name", required: true, maxlength: 200 });
  const form = h("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const created = await api.post("/spaces", { name: name.value });
      go(`/s/${enc(created.space.space_id)}/sessions`);
    } catch (err) { showErrors(form, err); }
  } }, field("Name", name, { name: "name" }), h("button", { type: "submit", class: "primary" }, "Create space"));
  clear(main, pageTitle("Spaces"),
    section("Your spaces", table([
      { title: "Space", cell: (s) => h("a", { href: link(`/s/${enc(s.space.space_id)}/sessions`) }, s.space.name) },
      { title: "Role", cell: (s) => badge(s.role) },
      { title: "Id", cell: (s) => h("code", {}, s.space.space_id) },
    ], items, { empty: "You are in no space yet: create one below." })),
    section("New space", form));
});
