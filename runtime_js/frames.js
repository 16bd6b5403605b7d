// The page-side scripts of the browser connector's frame walk
// (connectors/browser/fabric_jev_browser/scripts.py reads it; frames.py, shadow.py and tab.py send its scripts), shipped next to snapshot.js.
// Each section, from its `//# name` line to the next one, is one script that the
// connector reads by name: quietObserver is installed at document start, the
// others are function declarations sent with Runtime.callFunctionOn.

//# quietObserver
// Installed at document start in every frame the tracker sets up, so snapshots
// know how long the DOM has been quiet from the very first one (snapshot.js
// reuses it, and installs it itself where it is missing).
(() => {
  if (window.__fabricJevMutation) return;
  const now = performance.now();
  const quiet = window.__fabricJevMutation = { last: now, installed: now };
  new MutationObserver(() => { quiet.last = performance.now(); })
    .observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
})();

//# closedHostCandidates
// Custom elements without an open shadow root: the hosts whose closed roots the
// "custom-elements" mode looks up (closed roots on built-in elements, and
// closed roots inside closed roots, are not).
function () {
  const found = [];
  const visit = (root) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT);
    for (let el = walker.nextNode(); el; el = walker.nextNode()) {
      if (el.shadowRoot) visit(el.shadowRoot);
      else if (el.localName.indexOf("-") > 0) found.push(el);
    }
  };
  visit(document);
  return found;
}

//# ownerInfo
// Where a frame's owner element (`this`) shows its content, in the owner
// document's viewport.
function () {
  const el = this, win = el.ownerDocument.defaultView, s = win.getComputedStyle(el);
  const r = el.getBoundingClientRect();
  const px = (v) => parseFloat(v) || 0;
  const left = px(s.borderLeftWidth) + px(s.paddingLeft), top = px(s.borderTopWidth) + px(s.paddingTop);
  const right = px(s.borderRightWidth) + px(s.paddingRight), bottom = px(s.borderBottomWidth) + px(s.paddingBottom);
  const owners = Array.from(el.ownerDocument.querySelectorAll("iframe, frame"));
  const cut = (v) => (v || "").slice(0, 200);  // the page chooses them: clipped like snapshot text
  return { id: cut(el.id), name: cut(el.getAttribute("name")), title: cut(el.getAttribute("title")),
           index: owners.indexOf(el), x: r.left + left, y: r.top + top,
           width: Math.max(0, r.width - left - right), height: Math.max(0, r.height - top - bottom),
           shown: s.display !== "none" && s.visibility !== "hidden" && s.visibility !== "collapse"
                  && Number(s.opacity) !== 0 && !el.closest("[hidden]") };
}

//# ownerHits
// Which of these points (owner-document viewport coordinates) land on something
// other than the owner (`this`): that thing covers the frame there.
function (points) {
  const doc = this.ownerDocument;
  const cut = (v) => v.slice(0, 200);  // the page chooses ids and classes: clipped like snapshot text
  const describe = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += "#" + cut(el.id);
    const cls = (typeof el.className === "string" ? el.className : "").trim().split(/\s+/).filter(Boolean).slice(0, 2);
    return cut(cls.length ? s + "." + cls.map(cut).join(".") : s);
  };
  // The owner inside a closed shadow root: the hit stops at a host page script cannot
  // enter, so a host above the owner says nothing about covering.
  const hostOfThis = (hit) => {
    for (let node = this; node; node = node.parentNode || node.host || null) {
      if (node.host === hit) return true;
    }
    return false;
  };
  return points.map(([x, y]) => {
    let hit = doc.elementFromPoint(x, y);
    while (hit && hit.shadowRoot) {
      const inner = hit.shadowRoot.elementFromPoint(x, y);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    return !hit || hit === this || hostOfThis(hit) ? null : describe(hit);
  });
}

//# textOfFrame
// The visible text of a frame's body.
function () { return document.body ? document.body.innerText : ''; }
