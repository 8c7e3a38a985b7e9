// Draws the course's interactive figures (lib.plotting.interactive) with the page's own copy of
// Vega-Embed: every <script type="application/json" class="krr-interactive-spec"> holds a
// Vega-Lite spec with its data inline, drawn as SVG into the <div> named by its data-target.
// The figure follows the theme's dark mode (the data-theme attribute of <html>); when the mode
// changes it is drawn again with the controls' current values.
(function () {
  "use strict";
  const views = {};
  const dark = () => document.documentElement.dataset.theme === "dark";

  // A slider over an index (e.g. the step of a sweep) shows, next to it, the label the figure's
  // spec gives for that index (usermeta.krr_labels.<param>: one text per index) instead of the
  // bare index, and gives the same text to screen readers (aria-valuetext). Vega writes the
  // index into the span after the slider on every move; the observer writes the label back.
  function relabel(el, spec) {
    const labels = (spec.usermeta || {}).krr_labels || {};
    for (const [name, texts] of Object.entries(labels)) {
      const input = el.querySelector(`.vega-bindings input[type="range"][name="${name}"]`);
      if (!input) continue;
      const shown = input.nextElementSibling;
      const fix = () => {
        const text = texts[Math.round(Number(input.value))];
        if (text === undefined) return;
        if (shown && shown.textContent !== text) shown.textContent = text;
        if (input.getAttribute("aria-valuetext") !== text) {
          input.setAttribute("aria-valuetext", text);
        }
      };
      if (shown) {
        new MutationObserver(fix).observe(shown, {childList: true, characterData: true,
                                                  subtree: true});
      }
      input.addEventListener("input", fix);
      input.addEventListener("change", fix);
      fix();
    }
  }

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
    relabel(el, spec);
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
