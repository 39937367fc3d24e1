// Measures a `fare lab report` page in the browser and writes the result into the DOM
// (read back with chromium --dump-dom): pairs of rendered text boxes that intersect,
// text boxes over a node's box other than their own, and the links drawn.
(function () {
  const boxes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    if (!t.textContent.trim()) continue;
    const el = t.parentElement;
    if (!el || el.closest('script,style,title')) continue;
    // SVG text: the element's box; HTML text: each line box of the text itself.
    let rects;
    if (el.closest('svg')) {
      rects = [el.getBoundingClientRect()];
    } else {
      const r = document.createRange();
      r.selectNodeContents(t);
      rects = Array.from(r.getClientRects());
    }
    for (const b of rects) {
      if (b.width > 0 && b.height > 0) {
        boxes.push({ b: b, text: t.textContent.trim().slice(0, 40), owner: el.closest('[data-label-for]'), id: boxes.length, node: t });
      }
    }
  }
  const overlap = (p, q) =>
    Math.min(p.right, q.right) - Math.max(p.left, q.left) > 0.5 &&
    Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top) > 0.5;
  const textPairs = [];
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      if (boxes[i].node === boxes[j].node) continue;
      if (overlap(boxes[i].b, boxes[j].b)) textPairs.push([boxes[i].text, boxes[j].text]);
    }
  }
  const nodeHits = [];
  for (const n of document.querySelectorAll('[data-node]')) {
    const nb = n.getBoundingClientRect();
    const name = n.getAttribute('data-node');
    for (const t of boxes) {
      const own = t.owner && t.owner.getAttribute('data-label-for') === name;
      if (!own && overlap(nb, t.b)) nodeHits.push([name, t.text]);
    }
  }
  const links = new Set();
  for (const l of document.querySelectorAll('[data-link]')) links.add(l.getAttribute('data-link'));
  const out = document.createElement('pre');
  out.id = 'layout-result';
  out.textContent = JSON.stringify({
    texts: boxes.length,
    text_overlaps: textPairs.slice(0, 20),
    text_overlap_count: textPairs.length,
    node_overlaps: nodeHits.slice(0, 20),
    node_overlap_count: nodeHits.length,
    links: Array.from(links).sort(),
    nodes: document.querySelectorAll('[data-node]').length,
  });
  document.body.appendChild(out);
})();
