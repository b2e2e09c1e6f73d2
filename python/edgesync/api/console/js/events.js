// The project's governance event stream (GET …/events/stream, Server-Sent Events) read
// with fetch, since EventSource cannot send the Authorization header. List pages follow
// it to read themselves again when a review is queued or decided, a lineage paused or
// resumed, a replay done. Reconnects after 3 s (resuming after the last id seen) until
// stopped.

import { projectPath, session } from "./api.js";
import { say } from "./ui.js";

export function follow(onEvent) {
  const stop = new AbortController();
  let last = null;
  (async () => {
    while (!stop.signal.aborted) {
      const s = session();
      if (!s) return;
      try {
        const headers = { Authorization: `Bearer ${s.token}`, "ORG-ID": s.org, Accept: "text/event-stream" };
        if (last !== null) headers["Last-Event-ID"] = last;
        const res = await fetch(projectPath("/events/stream", s), { headers, signal: stop.signal });
        if (!res.ok || !res.body) return; // a refused token: the pages' own calls say why
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let cut;
          while ((cut = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            let type = null;
            for (const line of block.split("\n")) {
              if (line.startsWith("id:")) last = line.slice(3).trim();
              else if (line.startsWith("event:")) type = line.slice(6).trim();
            }
            if (type) onEvent(type);
          }
        }
      } catch {
        if (stop.signal.aborted) return;
      }
      await new Promise((resolve) => setTimeout(resolve, 3000));
    }
  })();
  return () => stop.abort();
}

// Re-render the current page at most once a second while events arrive.
export function refreshOnEvents() {
  let timer = null;
  const stopFollowing = follow(() => {
    if (timer) return;
    timer = setTimeout(() => {
      timer = null;
      // Never under the operator's hands: typing in a field, or on a link or button of
      // the page (a re-render would take the focus away); the status line says so.
      const a = document.activeElement;
      const main = document.getElementById("main");
      if (a && a !== main && main.contains(a) && a.tagName !== "H1") {
        say("new events: this page may be out of date (reload it to see them)");
        return;
      }
      window.dispatchEvent(new CustomEvent("console:reload", { detail: { live: true } }));
    }, 1000);
  });
  return () => { clearTimeout(timer); stopFollowing(); };
}
