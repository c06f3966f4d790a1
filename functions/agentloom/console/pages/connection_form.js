// A model connection's form (new, or an edit at its revision): provider, base URL, a
// write-only key, discovery (pick a model from the provider's own list), the context
// window with its source and warnings, manual figures and prices.
import { button, clear, field, h, input, section, select, showErrors, uid } from "../dom.js";
import { enc } from "../router.js";

export const PROVIDERS = [["openai_compatible", "OpenAI-compatible server"], ["openai", "OpenAI"],
  ["deepseek", "DeepSeek"]];
export const SOURCE_TEXT = {
  provider: "provider", official_manifest: "official manifest",
  platform_default: "platform default", manual: "manual entry",
};
const SOURCE_ICON = { provider: "✓", official_manifest: "✓", platform_default: "⚠", manual: "✎" };
export const SOURCE_MEANS = {
  provider: "the provider's own model list (GET /models) gives it",
  official_manifest: "the platform's dated catalogue of OpenAI's published figures (exact ids at OpenAI's own endpoint)",
  platform_default: "32,768 tokens: a fallback, not the model's official limit — check it and enter it manually",
  manual: "typed by an admin",
};
// a discovery failure that is about an address or a key goes under that control
const DISCOVERY_FIELD = { address_not_allowed: "spec.base_url", provider_unreachable: "spec.base_url",
  provider_redirected: "spec.base_url", provider_status_error: "spec.base_url",
  provider_response_invalid: "spec.base_url", provider_response_too_large: "spec.base_url",
  provider_auth_failed: "api_key" };

const tokens = (n) => `${Number(n).toLocaleString("en")} tokens`;

export function sourceTag(source) {
  return h("span", { class: `badge source source-${source}` },
    h("span", { "aria-hidden": "true" }, SOURCE_ICON[source] || "•"), ` ${SOURCE_TEXT[source] || source}`);
}

export function warningList(warnings) {
  if (!warnings || !warnings.length) return null;
  return h("ul", { class: "warnings" }, warnings.map((w) => h("li", { class: "notice notice-warn" },
    h("strong", {}, h("span", { "aria-hidden": "true" }, "⚠ "), "Warning:"), ` ${w.message}`,
    h("code", { class: "code" }, w.code))));
}

// The window of a budget (a ResolvedBudget as the API returns it), its source, the other
// figures and the warnings.
export function windowInfo(budget) {
  const w = budget.context_window;
  const out = budget.max_output_tokens;
  const margin = budget.safety_margin_tokens;
  const ref = !w.reference ? null : /^https:\/\//.test(w.reference)
    ? h("a", { href: w.reference, rel: "noreferrer", target: "_blank" }, "the model's page")
    : h("code", {}, w.reference);
  return h("div", { class: "window-info" },
    h("p", {}, h("strong", {}, `Context window: ${tokens(w.value)}`), " — source: ", sourceTag(w.source),
      ` (${SOURCE_MEANS[w.source] || w.source}${w.checked ? `, checked ${w.checked}` : ""})`,
      ref ? [", from ", ref] : null, w.note ? ` — ${w.note}` : null),
    h("p", { class: "muted" }, `Output reserve ${tokens(out.value)} (${SOURCE_TEXT[out.source]}), safety margin `
      + `${tokens(margin.value)}; input budget ${tokens(w.value - out.value - margin.value)}.`),
    warningList(budget.warnings));
}

function discoveryError(err) {
  const where = DISCOVERY_FIELD[err.code];
  const reason = err.details && (err.details.reason || err.details.status);
  const message = `${err.message}${reason ? ` (${reason})` : ""}`;
  const fields = (err.fields || []).map((f) => ({ ...f, field: f.field === "api_key" ? f.field : `spec.${f.field}` }));
  if (where && !fields.length) fields.push({ field: where, message });
  return { message: `Discovery failed: ${message}`, code: err.code, fields };
}

// r: the connection being edited (null: a new one); base: its collection's path.
export function connectionForm(ctx, base, r) {
  const spec = r ? r.spec : {};
  const name = input({ required: true, maxlength: 200, value: r ? r.name : "" });
  const provider = select(PROVIDERS, { value: spec.provider || "openai_compatible" });
  const baseUrl = input({ type: "url", maxlength: 2000, value: spec.base_url || "",
    placeholder: "http://127.0.0.1:8000/v1" });
  const key = input({ type: "password", autocomplete: "new-password", maxlength: 4096, spellcheck: "false" });
  const model = input({ required: true, maxlength: 200, value: spec.model_id || "", spellcheck: "false" });
  const windowIn = input({ type: "number", min: "1024", max: "10000000", step: "1" });
  const outputIn = input({ type: "number", min: "16", max: "1000000", step: "1" });
  const inPrice = input({ type: "number", min: "0", step: "any", value: spec.input_price_per_million ?? "" });
  const outPrice = input({ type: "number", min: "0", step: "any", value: spec.output_price_per_million ?? "" });
  const found = h("div", { class: "discovered", "aria-live": "polite" });
  const chosen = h("div", { class: "window-panel", "aria-live": "polite" });
  let picked = null; // the DiscoveredModel chosen from the list
  const unpicked = () => clear(chosen, r && model.value.trim() === spec.model_id ? windowInfo(r.budget)
    : h("p", { class: "muted" }, model.value.trim()
      ? "A typed model id: its window is resolved when saved (official manifest or platform default, with its warning), unless you enter one."
      : "Discover the provider's models and pick one, or type a model id: its window and where it comes from are shown here."));
  const pick = (m) => {
    picked = m;
    model.value = m.id;
    if (!name.value) name.value = m.id;
    clear(chosen, h("p", {}, "Picked ", h("code", {}, m.id), m.owned_by ? ` (owned by ${m.owned_by})` : null), windowInfo(m.budget));
  };
  model.addEventListener("input", () => { if (!picked || picked.id !== model.value.trim()) { picked = null; unpicked(); } });
  // another endpoint: the list (and a model picked from it) was another provider's
  const forget = () => { if (picked || found.childNodes.length) { picked = null; clear(found); unpicked(); } };
  provider.addEventListener("change", forget);
  baseUrl.addEventListener("input", forget);
  unpicked();

  const modelList = (items) => {
    if (!items.length) return h("p", { class: "muted" }, "The provider lists no models.");
    const group = uid("models");
    const rows = items.map((m) => {
      const radio = h("input", { type: "radio", name: group, value: m.id, disabled: !m.selectable,
        onchange: () => pick(m) });
      const w = m.budget && m.budget.context_window;
      return { m, el: h("label", { class: `check model-choice${m.selectable ? "" : " unselectable"}` }, radio, " ",
        h("code", {}, m.id), m.selectable ? ` — window ${tokens(w.value)}, ${SOURCE_TEXT[w.source]}`
          : ` — not selectable: ${m.not_selectable_reason}`) };
    });
    const filter = input({ type: "search", placeholder: "llama" });
    filter.addEventListener("input", () => {
      for (const row of rows) row.el.hidden = !row.m.id.toLowerCase().includes(filter.value.trim().toLowerCase());
    });
    const usable = items.filter((m) => m.selectable).length;
    return [items.length > 8 ? field("Filter models", filter) : null,
      h("fieldset", { class: "picker model-list" },
        h("legend", {}, `Models at this provider: ${items.length} listed, ${usable} selectable`), rows.map((row) => row.el))];
  };

  const discover = async (e) => {
    showErrors(form, null);
    e.target.disabled = true;
    clear(found, h("p", { class: "muted" }, "Asking the provider for its models…"));
    const body = { provider: provider.value, base_url: baseUrl.value.trim(), api_key: key.value || null };
    if (r && !key.value) body.resource_id = r.connection_id; // the stored key, same endpoint only
    try {
      const out = await ctx.api.post(`/spaces/${enc(ctx.params.space)}/models/discover`, body);
      clear(found, modelList(out.items));
    } catch (err) { clear(found); showErrors(form, discoveryError(err)); }
    e.target.disabled = false;
  };

  const num = (el) => (el.value === "" ? null : Number(el.value));
  // The spec to save: an unchanged endpoint and model keep their figures and sources; a
  // model picked from the list brings the provider's figures (the others are resolved
  // when saved); typed figures are manual.
  const specOf = () => {
    const endpoint = { provider: provider.value, base_url: baseUrl.value.trim(), model_id: model.value.trim() };
    const repicked = picked && picked.id === endpoint.model_id;
    const same = r && !repicked && ["provider", "base_url", "model_id"].every((k) => endpoint[k] === spec[k]);
    const out = same ? { ...spec } : r ? { embedding: spec.embedding, price_currency: spec.price_currency } : {};
    delete out.api_key_ref; // the platform sets it
    Object.assign(out, endpoint, { input_price_per_million: inPrice.value || null,
      output_price_per_million: outPrice.value || null });
    const sources = { ...(out.budget_sources || {}) };
    if (repicked && picked.budget) {
      for (const f of ["context_window", "provider_max_output_tokens"]) {
        const s = picked.budget[f];
        if (s && s.source === "provider") { out[f] = s.value; sources[f] = "provider"; }
      }
    }
    if (num(windowIn) !== null) { out.context_window = num(windowIn); sources.context_window = "manual"; }
    if (num(outputIn) !== null) { out.max_output_tokens = num(outputIn); sources.max_output_tokens = "manual"; }
    if (Object.keys(sources).length) out.budget_sources = sources;
    return out;
  };

  const form = h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    showErrors(form, null);
    const body = { name: name.value, spec: specOf(), api_key: key.value || null };
    try {
      const saved = r ? await ctx.api.put(`${base}/${enc(r.connection_id)}`, { ...body, revision: r.revision })
        : await ctx.api.post(base, body);
      key.value = "";
      ctx.notify(`${r ? "Saved" : "Created"} ${saved.name} (revision ${saved.revision}): ${saved.has_key
        ? "its key is stored sealed and is never shown again" : "no key is stored"}.`, "ok");
      ctx.refresh();
    } catch (err) {
      showErrors(form, err);
      // a stale revision: someone saved meanwhile; reload shows theirs (this edit is lost)
      if (err.code === "connection_changed") {
        form.querySelector(".form-alert").append(" ", button("Reload", () => ctx.refresh(), { class: "link",
          "aria-label": "Reload the connection" }));
      }
    }
  } },
  h("div", { class: "grid" },
    field("Name", name, { name: "name" }),
    field("Provider", provider, { name: "spec.provider" }),
    field("Base URL", baseUrl, { name: "spec.base_url",
      hint: "Empty: the provider's own (https://api.openai.com/v1, https://api.deepseek.com)." }),
    field(r ? "New API key" : "API key", key, { name: "api_key", hint: r
      ? "Write-only. Empty: keep the stored key (only while provider and base URL stay the same)."
      : "Write-only: used for discovery, sealed when saved, never shown again. Empty: a keyless OpenAI-compatible server." })),
  h("div", { class: "row" }, button("Discover models", discover, { class: "secondary",
    "aria-label": r ? `Discover the models of ${r.name}'s provider` : "Discover models" })),
  found,
  field("Model id", model, { name: "spec.model_id", hint: "The exact id: picked from the list above, or typed." }),
  section("Context window", chosen,
    h("div", { class: "grid" },
      field("Context window (manual)", windowIn, { name: "spec.context_window",
        hint: "Empty: from the source shown above. A value typed here is saved as a manual entry." }),
      field("Max output tokens (manual)", outputIn, { name: "spec.max_output_tokens",
        hint: "Empty: 4,096, or less when the provider's maximum is lower." }),
      field("Input price per million tokens", inPrice, { name: "spec.input_price_per_million", hint: "Optional, USD: for cost per run." }),
      field("Output price per million tokens", outPrice, { name: "spec.output_price_per_million", hint: "Optional, USD." }))),
  h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, r ? "Save changes" : "Create connection"),
    r ? button("Close", () => form.closest("section").remove()) : null));
  return form;
}
