// Hash routes ("#/s/spc_1/agents"): they work the same from `serve` and from CloudFront
// (no server-side rewrites). A route's render(ctx) fills ctx.main; ctx.params has the
// pattern's :names; ctx.signal aborts when the user navigates away (stop live follows).

const routes = [];

export function route(pattern, render, { nav } = {}) {
  const names = [];
  const regex = new RegExp(`^${pattern.replace(/:([a-z_]+)/g, (_, n) => { names.push(n); return "([^/]+)"; })}$`);
  routes.push({ pattern, regex, names, render, nav });
}

export function match(path) {
  for (const r of routes) {
    const m = r.regex.exec(path);
    if (m) {
      const params = {};
      r.names.forEach((n, i) => { params[n] = decodeURIComponent(m[i + 1]); });
      return { route: r, params };
    }
  }
  return null;
}

export function currentPath() {
  const hash = location.hash.replace(/^#/, "");
  const [path, query = ""] = hash.split("?");
  return { path: path || "/spaces", query: new URLSearchParams(query) };
}

export function go(path) {
  if (location.hash === `#${path}`) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = path;
}

export function link(path) { return `#${path}`; }

export function enc(value) { return encodeURIComponent(value); }
