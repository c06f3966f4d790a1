// Sign-in. Two kinds, chosen by config.json:
// - "token" (agentloom serve): a one-time login link (#login=CODE, traded once for a
//   12-hour console token) or a pasted bearer token;
// - "cognito" (AWS): the hosted UI with the authorization code grant and PKCE.
// The token lives in sessionStorage only (this tab, until it closes or signs out), and
// neither the link's code nor Cognito's code stays in the address bar.

const KEY = "agentloom.console.auth";
const PKCE = "agentloom.console.pkce";

export class Auth {
  constructor(config, onChange) {
    this.config = config;
    this.kind = (config.auth && config.auth.kind) || "token";
    this.onChange = onChange;
    this.state = JSON.parse(sessionStorage.getItem(KEY) || "null");
  }

  token() {
    if (!this.state) return null;
    if (this.state.expires_at && this.state.expires_at * 1000 <= Date.now()) {
      this.forget();
      return null;
    }
    return this.state.token;
  }

  user() { return this.state && this.state.user_id; }

  remember(state, quiet = false) {
    this.state = state;
    sessionStorage.setItem(KEY, JSON.stringify(state));
    if (!quiet) this.onChange();
  }

  forget() {
    this.state = null;
    sessionStorage.removeItem(KEY);
  }

  expired() {
    if (!this.state) return;
    const pending = this.state.pending; // a pasted token on trial: the form says why
    this.forget();
    if (pending) return;
    this.onChange("Your sign-in has ended: sign in again.");
  }

  // Called once at start: finishes a sign-in the URL carries, and cleans the URL.
  async completeSignIn() {
    const hash = window.location.hash;
    if (this.kind === "token" && hash.startsWith("#login=")) {
      const code = decodeURIComponent(hash.slice("#login=".length));
      history.replaceState(null, "", `${location.pathname}#/spaces`);
      const res = await fetch(`${this.base()}/console/session`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ code }), credentials: "omit" });
      const data = await res.json().catch(() => null);
      if (!res.ok) throw new Error((data && data.error && data.error.message) || "the login link was refused");
      this.remember({ token: data.token, user_id: data.user_id, expires_at: data.expires_at, kind: "link" }, true);
      return true;
    }
    const params = new URLSearchParams(location.search);
    if (this.kind === "cognito" && (params.has("code") || params.has("error"))) {
      history.replaceState(null, "", `${location.pathname}#/spaces`);
      const saved = JSON.parse(sessionStorage.getItem(PKCE) || "null");
      sessionStorage.removeItem(PKCE);
      if (params.has("error")) throw new Error(`sign-in was refused: ${params.get("error_description") || params.get("error")}`);
      if (!saved || saved.state !== params.get("state")) throw new Error("the sign-in answer does not match this tab's request: sign in again");
      const a = this.config.auth;
      const res = await fetch(`${a.domain}/oauth2/token`, {
        method: "POST", headers: { "Content-Type": "application/x-www-form-urlencoded" },
        credentials: "omit",
        body: new URLSearchParams({ grant_type: "authorization_code", client_id: a.client_id,
          code: params.get("code"), redirect_uri: a.redirect_uri, code_verifier: saved.verifier }) });
      const data = await res.json().catch(() => null);
      if (!res.ok || !data || !data.access_token) throw new Error("the sign-in code was refused: sign in again");
      this.remember({ token: data.access_token, user_id: subject(data.id_token || data.access_token),
        expires_at: Date.now() / 1000 + Number(data.expires_in || 3600) - 30, kind: "cognito" }, true);
      return true;
    }
    return false;
  }

  base() { return (this.config.api || "").replace(/\/$/, ""); }

  useToken(token) {
    this.remember({ token: token.trim(), user_id: null, kind: "pasted", pending: true }, true);
  }

  confirm(userId) {
    this.remember({ ...this.state, user_id: userId, pending: false }, true);
  }

  async signInWithCognito() {
    const a = this.config.auth;
    const verifier = randomText(48);
    const state = randomText(24);
    sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state }));
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
    const query = new URLSearchParams({ response_type: "code", client_id: a.client_id,
      redirect_uri: a.redirect_uri, scope: (a.scopes || ["openid"]).join(" "), state,
      code_challenge: base64url(new Uint8Array(digest)), code_challenge_method: "S256" });
    location.assign(`${a.domain}/oauth2/authorize?${query}`);
  }

  async signOut() {
    const state = this.state;
    this.forget();
    if (state && state.kind === "link") {
      await fetch(`${this.base()}/console/session`, { method: "DELETE", credentials: "omit",
        headers: { Authorization: `Bearer ${state.token}` } }).catch(() => null);
    }
    if (state && state.kind === "cognito") {
      const a = this.config.auth;
      location.assign(`${a.domain}/logout?${new URLSearchParams({ client_id: a.client_id, logout_uri: a.redirect_uri })}`);
      return;
    }
    this.onChange("Signed out.");
  }
}

function randomText(bytes) {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

function base64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function subject(jwt) {
  try {
    const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(part));
    return claims["cognito:username"] || claims.username || claims.email || claims.sub || null;
  } catch {
    return null;
  }
}
