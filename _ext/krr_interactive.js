// Draws the course's interactive figures (lib.plotting.interactive) with the page's own copy of
// Vega-Embed: every <script type="application/json" class="krr-interactive-spec"> holds a
// Vega-Lite spec with its data inline, drawn as SVG into the <div> named by its data-target.
// The figure follows the theme's dark mode (the data-theme attribute of <html>); when the mode
// changes it is drawn again with the controls' current values.
//
// A figure wider than the text column (the chapters' hconcat of charts with fixed widths, e.g.
// 360 + 230 px plus axes) is drawn again with every chart's width and height scaled down until
// it fits: axis labels, titles and legends keep their size, so the drawn width is not
// proportional to the factor and a few draws may be needed. The charts are never drawn below
// MIN_SCALE of their size: a side-by-side figure (hconcat) that does not fit even so is drawn
// with its charts one above the other (vconcat), fitted the same way; a figure that still does
// not fit stays that small and its container scrolls sideways (very narrow windows). The
// figure is fitted again when the width of the window or of the column changes. The SVG itself
// is never scaled with CSS: Vega's pointer coordinates (tooltips) would be off.
(function () {
  "use strict";
  const views = {};
  const fits = {};    // per figure: what its draws measured, per layout (see draw)
  const queues = {};  // per figure: its draws run one after the other
  const MIN_SCALE = 0.55;
  const MAX_REDRAWS = 4;
  const dark = () => document.documentElement.dataset.theme === "dark";

  // Scale, in place, the sizes of every chart of a Vega-Lite spec by f: numeric width and
  // height, and {step} sizes, through hconcat/vconcat/concat/layer and the inner spec of a
  // facet or repeat; "container" sizes are left alone. Charts without a size of their own take
  // the config's view size, scaled too.
  function scaleSizes(node, f) {
    if (!node || typeof node !== "object") return;
    for (const key of ["width", "height"]) {
      const v = node[key];
      if (typeof v === "number") {
        node[key] = Math.max(20, Math.round(v * f));
      } else if (v && typeof v === "object" && typeof v.step === "number") {
        v.step = Math.max(2, v.step * f);
      }
    }
    for (const key of ["hconcat", "vconcat", "concat", "layer"]) {
      if (Array.isArray(node[key])) node[key].forEach((child) => scaleSizes(child, f));
    }
    if (node.spec) scaleSizes(node.spec, f);
  }

  function scaledSpec(text, f, stacked) {
    const spec = JSON.parse(text);
    if (stacked && Array.isArray(spec.hconcat)) {
      spec.vconcat = spec.hconcat;
      delete spec.hconcat;
    }
    if (f < 1) {
      scaleSizes(spec, f);
      const view = (spec.config || {}).view;
      if (view) {
        for (const key of ["continuousWidth", "continuousHeight"]) {
          if (typeof view[key] === "number") view[key] = Math.round(view[key] * f);
        }
        for (const key of ["discreteWidth", "discreteHeight"]) {
          const v = view[key];
          if (typeof v === "number") view[key] = Math.round(v * f);
          else if (v && typeof v.step === "number") v.step *= f;
        }
      }
    }
    return spec;
  }

  // The width the figure may take: its container's content box (the container is a block, see
  // krr-interactive.css); 0 when it is not laid out (hidden).
  function available(el) {
    const style = getComputedStyle(el);
    return el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  }

  function drawnWidth(el) {
    const svg = el.querySelector("svg");
    return svg ? svg.getBoundingClientRect().width : 0;
  }

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

  // Embed spec in el, keeping the reader's settings of the view it replaces.
  async function embed(el, spec, old) {
    if (old) {
      for (const p of spec.params || []) {
        try { p.value = old.view.signal(p.name); } catch (e) { /* not a signal */ }
      }
      old.finalize();
    }
    // Vega's dark theme colours axes and titles but leaves text marks black (unreadable on its
    // dark background); a colour a chart gives its text marks itself still wins
    const darkOptions = {theme: "dark", config: {text: {color: "#e6e6e6"}}};
    const options = {renderer: "svg", actions: false, ...(dark() ? darkOptions : {})};
    const result = await vegaEmbed(el, spec, options);
    relabel(el, spec);
    return result;
  }

  // Draw the figure in one layout (stacked: an hconcat drawn as a vconcat) as large as fits in
  // avail, at most full size and at least MIN_SCALE. lay keeps what was measured in this layout:
  // natural (drawn width at full size) and model (drawn width = fixed + per * scale, from the
  // last two draws), which give the first guess next time.
  async function fitLayout(el, script, avail, stacked, lay) {
    const id = el.id;
    let scale = 1;
    if (avail > 0 && lay.natural > avail) {
      const m = lay.model;
      const guess = m && m.per > 0 ? (avail - 1 - m.fixed) / m.per : (avail - 1) / lay.natural;
      scale = Math.min(1, Math.max(MIN_SCALE, guess));
    }
    views[id] = await embed(el, scaledSpec(script.textContent, scale, stacked), views[id]);
    let width = drawnWidth(el);
    if (scale === 1) lay.natural = width;
    for (let i = 0; i < MAX_REDRAWS && avail > 0 && width > avail + 0.5 && scale > MIN_SCALE;
         i++) {
      const m = lay.model;
      let next = m && m.per > 0 ? (avail - 1 - m.fixed) / m.per : scale * (avail - 1) / width;
      next = Math.max(MIN_SCALE, Math.min(next, scale * 0.97));  // always smaller than before
      views[id] = await embed(el, scaledSpec(script.textContent, next, stacked), views[id]);
      const w = drawnWidth(el);
      if (w !== width) {
        const per = (w - width) / (next - scale);
        lay.model = {per: per, fixed: w - per * next};
      }
      scale = next;
      width = w;
    }
    if (scale <= MIN_SCALE) lay.atMin = width;
    return {scale: scale, width: width};
  }

  async function draw(script) {
    const id = script.dataset.target;
    const el = document.getElementById(id);
    if (!el) return;
    const canStack = Array.isArray(JSON.parse(script.textContent).hconcat);
    const fit = fits[id] || (fits[id] = {side: {natural: 0}, stacked: {natural: 0}});
    const avail = available(el);
    // side by side unless that was seen not to fit at the smallest scale
    let stacked = canStack && avail > 0 && fit.side.atMin > avail + 0.5;
    let got = await fitLayout(el, script, avail, stacked, stacked ? fit.stacked : fit.side);
    if (!stacked && canStack && avail > 0 && got.width > avail + 0.5 && got.scale <= MIN_SCALE) {
      stacked = true;
      got = await fitLayout(el, script, avail, true, fit.stacked);
    }
    fit.avail = avail;
    fit.scale = got.scale;
    fit.isStacked = stacked;
    el.dataset.krrScale = got.scale.toFixed(3);
    el.dataset.krrLayout = stacked ? "stacked" : "side";
    el.dataset.krrTheme = dark() ? "dark" : "light";
    el.classList.add("krr-interactive-ready");
  }

  // Draws of one figure never overlap (a theme change during a resize, say).
  function schedule(script) {
    const id = script.dataset.target;
    queues[id] = (queues[id] || Promise.resolve()).then(() => draw(script)).catch(
      (err) => console.error("interactive figure " + id, err));
    return queues[id];
  }

  function drawAll() {
    for (const s of document.querySelectorAll("script.krr-interactive-spec")) schedule(s);
  }

  // After a change of the window's or the column's width, draw again the figures whose
  // available width changed and that may now be drawn at another size.
  function refit() {
    for (const s of document.querySelectorAll("script.krr-interactive-spec")) {
      const el = document.getElementById(s.dataset.target);
      const fit = fits[s.dataset.target];
      if (!el || !fit || fit.avail === undefined) continue;
      const avail = available(el);
      if (Math.abs(avail - fit.avail) < 1) continue;
      const stillFull = !fit.isStacked && fit.scale === 1 && fit.side.natural <= avail;
      const stillMin = fit.isStacked && fit.scale <= MIN_SCALE && avail < fit.avail;
      if (stillFull || stillMin || avail <= 0) {
        fit.avail = avail;
        continue;
      }
      schedule(s);
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
    // the window's width, or the column's alone (a sidebar shown or hidden): fitted again
    // 200 ms after the last change
    let timer = null;
    const later = () => {
      clearTimeout(timer);
      timer = setTimeout(refit, 200);
    };
    window.addEventListener("resize", later);
    if (window.ResizeObserver) {
      const observer = new ResizeObserver(later);
      for (const s of document.querySelectorAll("script.krr-interactive-spec")) {
        const el = document.getElementById(s.dataset.target);
        if (el) observer.observe(el);
      }
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
