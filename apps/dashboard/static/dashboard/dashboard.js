// The operations dashboard refreshes its panels in place: it polls the live endpoint (HTML
// rendered on the server, and the figures as JSON) and swaps the panels, with no page reload.
(function () {
  "use strict";
  const root = document.getElementById("jw-dashboard");
  if (!root) return;
  const url = root.dataset.liveUrl;
  const every = Math.max(1, Number(root.dataset.refreshSeconds) || 3) * 1000;
  const panels = document.getElementById("jw-panels");
  const updated = document.getElementById("jw-updated");
  const state = document.getElementById("jw-live-state");
  let failures = 0;

  async function refresh() {
    try {
      const response = await fetch(url, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      if (!response.ok) throw new Error("HTTP " + response.status);
      const data = await response.json();
      panels.innerHTML = data.html;
      updated.textContent = "Updated " + data.figures.at.slice(11, 19) + " UTC";
      state.textContent = "live, every " + every / 1000 + " s";
      failures = 0;
    } catch (error) {
      failures += 1;
      state.textContent = "refresh failed (" + error.message + "), retrying";
    }
    // Back off while the server does not answer, up to a minute.
    setTimeout(refresh, Math.min(every * 2 ** failures, 60000));
  }
  setTimeout(refresh, every);
})();
