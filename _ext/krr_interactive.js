// Draws the course's interactive figures (lib.plotting.interactive) with the page's own copy of
// Vega-Embed: every <script type="application/json" class="krr-interactive-spec"> holds a
// Vega-Lite spec with its data inline, drawn as SVG into the <div> named by its data-target.
// The figure follows the theme's dark mode (the data-theme attribute of <html>); when the mode
// changes it is drawn again with the controls' current values.
(function () {
  "use strict";
  const views = {};
  const dark = () => document.documentElement.dataset.theme === "dark";

  async function draw(script) {
    const id = script.dataset.target;
    const el = document.getElementById(id);
    if (!el) return;
    const spec = JSON.parse(script.textContent);
    const old = views[id];
    if (old) {  // keep the reader's settings across a change of theme
      for (const p of spec.params || []) {
        try { p.value = old.view.signal(p.name); } catch (e) { /* not a signal */ }
      }
      old.finalize();
    }
    const options = {renderer: "svg", actions: false, ...(dark() ? {theme: "dark"} : {})};
    views[id] = await vegaEmbed(el, spec, options);
    el.dataset.krrTheme = dark() ? "dark" : "light";
    el.classList.add("krr-interactive-ready");
  }

  function drawAll() {
    for (const s of document.querySelectorAll("script.krr-interactive-spec")) {
      draw(s).catch((err) => console.error("interactive figure " + s.dataset.target, err));
    }
  }

  function start() {
    drawAll();
    new MutationObserver(() => {
      const want = dark() ? "dark" : "light";
      if (Object.keys(views).some((id) => document.getElementById(id).dataset.krrTheme !== want)) {
        drawAll();
      }
    }).observe(document.documentElement, {attributes: true, attributeFilter: ["data-theme"]});
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
