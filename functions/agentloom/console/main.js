// The console's start: config, sign-in, the frame (space nav, who), then the router.
import { Api } from "./api.js";
import { Auth } from "./auth.js";
import { button, clear, field, h, input, pageTitle, showErrors } from "./dom.js";
import { currentPath, go, link, match } from "./router.js";
import { SPACE_NAV } from "./pages/index.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const banner = document.getElementById("banner");
const spaces = new Map(); // space_id -> {space, role}
let config, auth, api, me = null, current = null;

export function notify(message, kind = "info") {
  clear(banner, message ? h("div", { class: `notice notice-${kind}` }, message,
    button("Dismiss", () => clear(banner), { class: "link", "aria-label": "Dismiss message" })) : null);
}

async function start() {
  config = await fetch("config.json", { credentials: "omit" }).then((r) => r.json())
    .catch(() => ({ api: "", auth: { kind: "token" } }));
  auth = new Auth(config, (message) => { me = null; spaces.clear(); if (message) notify(message); render(); });
  api = new Api(config.api || "", auth);
  window.addEventListener("hashchange", render);
  // the skip link moves focus without touching the hash (the hash is the route)
  document.querySelector(".skip").addEventListener("click", (e) => {
    e.preventDefault();
    (main.querySelector("h1") || main).focus();
  });
  render();
}

// A login link opened in a tab that is already on the console arrives as a hash change.
async function finishSignIn() {
  try {
    if (await auth.completeSignIn()) { me = null; spaces.clear(); clear(banner); }
  } catch (err) {
    notify(err.message, "error");
  }
}

async function space(spaceId) {
  if (!spaces.has(spaceId)) spaces.set(spaceId, await api.get(`/spaces/${encodeURIComponent(spaceId)}`));
  return spaces.get(spaceId);
}

async function render() {
  if (location.hash.startsWith("#login=") || location.search.includes("code=") || location.search.includes("error=")) {
    await finishSignIn();
  }
  if (current) current.abort();
  current = new AbortController();
  const signal = current.signal;
  if (!auth.token()) {
    clear(nav);
    clear(who);
    return signInPage();
  }
  try {
    if (!me) me = await api.get("/me");
    if (signal.aborted) return;
  } catch (err) {
    if (!auth.token()) return signInPage();
    clear(main, h("p", { class: "notice notice-error", role: "alert" }, err.message));
    return;
  }
  clear(who, h("span", { class: "muted" }, "Signed in as "), h("strong", {}, me.user_id), " ",
    button("Sign out", () => auth.signOut(), { class: "secondary" }));
  const { path, query } = currentPath();
  const found = match(path);
  if (!found) { go("/spaces"); return; }
  // The page renders into its own element, swapped in when it is ready and only if
  // the user has not navigated on meanwhile (an older render never overwrites a newer).
  const view = h("div", { class: "page" });
  const ctx = { api, main: view, params: found.params, query, signal, me, notify, refresh: render };
  try {
    if (found.params.space) {
      ctx.space = await space(found.params.space);
      if (signal.aborted) return;
      drawNav(ctx.space, found.route.nav);
    } else {
      clear(nav);
    }
    await found.route.render(ctx);
  } catch (err) {
    if (signal.aborted || err.name === "AbortError") return;
    clear(view, pageTitle("Something went wrong"),
      h("p", { class: "notice notice-error", role: "alert" }, err.message, err.code ? h("code", { class: "code" }, err.code) : null));
  }
  if (signal.aborted) return;
  main.replaceChildren(view);
  (main.querySelector("h1") || main).focus({ preventScroll: true });
}

function drawNav(spaceOut, active) {
  const id = encodeURIComponent(spaceOut.space.space_id);
  const admin = spaceOut.role === "admin" || spaceOut.role === "owner";
  clear(nav, h("span", { class: "space-name" }, spaceOut.space.name),
    h("ul", {}, SPACE_NAV.filter((item) => admin || !item.admin).map((item) =>
      h("li", {}, h("a", { href: link(`/s/${id}/${item.path}`),
        "aria-current": item.path === active ? "page" : null }, item.title)))));
}

function signInPage() {
  document.title = "Sign in · AgentLoom";
  if (auth.kind === "cognito") {
    clear(main, h("section", { class: "card narrow" }, h("h1", { tabindex: "-1" }, "Sign in to AgentLoom"),
      h("p", {}, "Sign in with your organisation's account."),
      button("Sign in", () => auth.signInWithCognito(), { class: "primary" })));
    return;
  }
  const token = input({ type: "password", autocomplete: "off", name: "token", required: true });
  const form = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    auth.useToken(token.value);
    try {
      me = await api.get("/me");
      auth.confirm(me.user_id);
      go("/spaces");
      render();
    } catch (err) {
      auth.forget();
      showErrors(form, err);
    }
  } }, field("Bearer token", token, { name: "token", hint: "A token from 'bin/agentloom serve bootstrap' or 'serve token'." }),
  h("button", { type: "submit", class: "primary" }, "Sign in"));
  clear(main, h("section", { class: "card narrow" }, h("h1", { tabindex: "-1" }, "Sign in to AgentLoom"),
    h("p", {}, "Open a login link printed by ", h("code", {}, "bin/agentloom serve login --user NAME"),
      " (it works once, for 10 minutes), or paste a bearer token."), form));
  main.querySelector("h1").focus();
}

start();
