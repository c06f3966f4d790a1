// The public HTTP API, and nothing else: every page talks to it through `Api`.

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `the server answered HTTP ${status}`);
    this.status = status;
    this.code = e.code || "http_error";
    this.details = e.details || {};
    this.fields = this.details.fields || [];
  }
}

export class Api {
  // base: the API's origin ("" = this page's); auth: { token(), expired() }
  constructor(base, auth) {
    this.base = base.replace(/\/$/, "");
    this.auth = auth;
  }

  url(path, query) {
    const qs = query ? new URLSearchParams(Object.entries(query)
      .filter(([, v]) => v !== undefined && v !== null && v !== "")).toString() : "";
    return `${this.base}/api/v1${path}${qs ? `?${qs}` : ""}`;
  }

  headers(extra = {}) {
    const token = this.auth.token();
    return { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...extra };
  }

  async request(method, path, { body, query, headers, signal } = {}) {
    const init = { method, headers: this.headers(headers), signal, credentials: "omit" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(this.url(path, query), init);
    } catch (err) {
      if (err.name === "AbortError") throw err;
      throw new ApiError(0, { error: { code: "network_error",
        message: "the API could not be reached: check that the server is running" } });
    }
    if (res.status === 204) return null;
    const data = await res.json().catch(() => null);
    if (res.status === 401) this.auth.expired(data);
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }

  get(path, query, opts) { return this.request("GET", path, { query, ...opts }); }
  post(path, body = {}, opts) { return this.request("POST", path, { body, ...opts }); }
  put(path, body = {}, opts) { return this.request("PUT", path, { body, ...opts }); }
  del(path, opts) { return this.request("DELETE", path, opts); }

  // Every item of a paged list ({items, next_after} or {items, next}), up to `max`.
  async all(path, query = {}, max = 1000) {
    const items = [];
    let q = { ...query };
    for (;;) {
      const page = await this.get(path, q);
      items.push(...(page.items || []));
      const cursor = page.next_after ?? page.next ?? page.next_token;
      if (!page.items || !page.items.length || cursor === undefined || cursor === null
          || items.length >= max || (q.after !== undefined && cursor === q.after)) break;
      q = { ...q, after: cursor };
      if (page.next_after === undefined) break;
    }
    return items;
  }
}

// An idempotency key for a request a user may retry (ask, upload).
export function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
