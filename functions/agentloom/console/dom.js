// DOM helpers: every text goes in as a text node (never innerHTML), so nothing an API
// returns can become markup.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "value" || key === "checked" || key === "selected") {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

let ids = 0;
export function uid(prefix = "f") {
  ids += 1;
  return `${prefix}-${ids}`;
}

// A labelled form control. `name` is the API's field name (e.g. "config.prompt"): a 422
// naming that field puts its message under this control.
export function field(label, control, { hint, name } = {}) {
  const id = control.id || uid();
  control.id = id;
  if (name) control.dataset.field = name;
  const hintEl = hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null;
  const errorEl = h("p", { class: "field-error", id: `${id}-error`, hidden: true });
  control.setAttribute("aria-describedby", [hintEl && hintEl.id, errorEl.id].filter(Boolean).join(" "));
  return h("div", { class: "field" }, h("label", { for: id }, label), control, hintEl, errorEl);
}

export function input(props = {}) {
  return h("input", { type: "text", ...props });
}

export function select(options, props = {}) {
  return h("select", props, options.map((o) => {
    const [value, text] = Array.isArray(o) ? o : [o, o];
    return h("option", { value, selected: props.value === value }, text);
  }));
}

export function button(text, onclick, props = {}) {
  return h("button", { type: "button", onclick, ...props }, text);
}

// Shows an ApiError on a form: each named field's message under its control (and
// aria-invalid), the rest in the form's alert area.
export function showErrors(form, err) {
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  for (const el of form.querySelectorAll(".field-error")) { el.hidden = true; el.textContent = ""; }
  let alert = form.querySelector(".form-alert");
  if (!alert) {
    alert = h("div", { class: "form-alert", role: "alert" });
    form.prepend(alert);
  }
  if (!err) { alert.hidden = true; alert.textContent = ""; return; }
  const unplaced = [];
  for (const f of (err.fields || [])) {
    const control = findField(form, f.field);
    if (control) {
      control.setAttribute("aria-invalid", "true");
      const slot = document.getElementById(`${control.id}-error`);
      if (slot) { slot.hidden = false; slot.textContent = `${f.field}: ${f.message}`; }
    } else {
      unplaced.push(`${f.field}: ${f.message}`);
    }
  }
  alert.hidden = false;
  clear(alert, h("strong", {}, `${err.message}`), err.code ? h("code", { class: "code" }, err.code) : null,
    unplaced.length ? h("ul", {}, unplaced.map((m) => h("li", {}, m))) : null);
  const first = form.querySelector("[aria-invalid]");
  (first || alert).focus?.();
}

function findField(form, name) {
  const controls = [...form.querySelectorAll("[data-field]")];
  const bare = name.replace(/^body\./, "");
  return controls.find((c) => c.dataset.field === name || c.dataset.field === bare)
    || controls.find((c) => bare.startsWith(`${c.dataset.field}.`) || bare.startsWith(`${c.dataset.field}[`));
}

// A run/record status as a badge: its word is always shown (never colour alone).
const STATUS_ICON = {
  completed: "✓", running: "●", queued: "○", blocked: "‖", failed: "✕", cancelled: "⊘",
  interrupted: "⚠", published: "✓", indexed: "✓", indexing: "●", error: "✕",
};
export function badge(status) {
  const word = String(status || "unknown");
  return h("span", { class: `badge badge-${word.replace(/[^a-z_]/g, "")}` },
    h("span", { "aria-hidden": "true" }, STATUS_ICON[word] || "•"), ` ${word}`);
}

export function table(columns, rows, { caption, empty = "Nothing here yet." } = {}) {
  if (!rows.length) return h("p", { class: "muted empty" }, empty);
  return h("table", {},
    caption ? h("caption", {}, caption) : null,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col" }, c.title)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, columns.map((c) => h("td", {}, c.cell(row)))))));
}

export function section(title, ...children) {
  return h("section", { class: "card" }, h("h2", {}, title), children);
}

export function formatCost(cost, currency = "USD") {
  if (cost === null || cost === undefined) return "—";
  const n = Number(cost);
  const digits = n !== 0 && Math.abs(n) < 0.01 ? 5 : 4;
  return `${n.toFixed(digits)} ${currency}`;
}

export function formatTime(epochSeconds) {
  if (!epochSeconds) return "—";
  return new Date(epochSeconds * 1000).toLocaleString();
}

export function formatTokens(n) {
  return n === null || n === undefined ? "—" : Number(n).toLocaleString();
}

export function pageTitle(text, ...extra) {
  document.title = `${text} · AgentLoom`;
  return h("div", { class: "page-head" }, h("h1", { tabindex: "-1" }, text), extra);
}
