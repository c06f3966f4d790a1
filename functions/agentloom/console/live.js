// Following a run's events: Server-Sent Events read with fetch (so the token goes in a
// header, never in the URL) where the server streams them (agentloom serve), long-poll
// pages where it answers JSON (API Gateway). After a dropped connection it reconnects
// from the last event it saw (Last-Event-ID / after), so no event is lost or repeated.

export function followRun(api, sessionId, runId, { after = 0, onEvent, onEnd, onState }) {
  const control = new AbortController();
  let cursor = after;
  let stopped = false;
  const path = `/sessions/${encodeURIComponent(sessionId)}/runs/${encodeURIComponent(runId)}/events`;
  const state = (s) => onState && onState(s);

  const deliver = (event) => {
    if (event.seq <= cursor) return; // a replay after a reconnect
    cursor = event.seq;
    onEvent(event);
  };

  async function stream() {
    const res = await fetch(api.url(path, { after: cursor }), {
      headers: api.headers({ Accept: "text/event-stream" }), signal: control.signal,
      credentials: "omit" });
    if (!res.ok) {
      const body = await res.json().catch(() => null);
      const err = new Error((body && body.error && body.error.message) || `HTTP ${res.status}`);
      err.status = res.status;
      throw err;
    }
    if (!(res.headers.get("content-type") || "").includes("text/event-stream")) {
      return pages(await res.json());
    }
    state("live");
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false; // cut off: reconnect
      buffer += decoder.decode(value, { stream: true });
      let split;
      while ((split = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, split);
        buffer = buffer.slice(split + 2);
        const parsed = parseFrame(frame);
        if (!parsed) continue;
        if (parsed.event === "end") { onEnd(JSON.parse(parsed.data)); return true; }
        deliver(JSON.parse(parsed.data));
      }
    }
  }

  // Long-poll: the JSON page the route answers without an event stream.
  async function pages(first) {
    state("polling");
    let page = first;
    for (;;) {
      for (const item of page.items || []) deliver(item);
      if (page.next_after !== undefined) cursor = Math.max(cursor, page.next_after);
      if (page.done) {
        onEnd({ status: page.status, next_after: page.next_after, way_out: page.way_out });
        return true;
      }
      page = await api.get(path, { after: cursor, wait: 20 }, { signal: control.signal });
    }
  }

  (async () => {
    let delay = 500;
    while (!stopped) {
      try {
        if (await stream()) return;
        delay = 500;
      } catch (err) {
        if (stopped || err.name === "AbortError") return;
        if (err.status && err.status < 500 && err.status !== 408) { state("error"); onEnd({ error: err.message }); return; }
      }
      state("reconnecting");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 8000);
    }
  })();

  return {
    stop() { stopped = true; control.abort(); },
    get cursor() { return cursor; },
  };
}

function parseFrame(frame) {
  let event = "message";
  const data = [];
  for (const line of frame.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (name === "event") event = value;
    else if (name === "data") data.push(value);
  }
  return data.length ? { event, data: data.join("\n") } : null;
}
