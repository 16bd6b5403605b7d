// Page-state snapshot of one frame's document, called through CDP as
// `(<this function>)(options, closedRoots)` in the frame's main world. It walks
// the DOM (open shadow roots, and the closed ones the driver found through CDP
// and passes in `closedRoots`) and returns every rendered interactive or
// landmark element with its role, accessible name, state and geometry, plus
// diagnostics. Geometry is in this frame's own coordinates: the driver
// (fabric_jev_browser/frames.py) places frames on the page. Password values
// never leave the page.
(function snapshot(options, closedRoots) {
  "use strict";
  options = options || {};
  // Closed shadow roots are unreachable from page script; the driver hands them in.
  const closedRootOf = new Map();
  for (const root of closedRoots || []) {
    if (root && root.host) closedRootOf.set(root.host, root);
  }
  function shadowOf(el) {
    return el.shadowRoot || closedRootOf.get(el) || null;
  }
  const MAX_VALUE = 200;
  const MAX_TEXT = options.maxText || 200;
  // The page chooses every string below, and a hostile one makes them megabytes:
  // attributes and names are cut like text, URLs at a common browser-safe length.
  const MAX_URL = 2048;
  const MAX_ELEMENTS = options.maxElements || 5000;
  const doc = document;
  const win = window;
  const vw = win.innerWidth, vh = win.innerHeight;

  // ms since the last DOM mutation: the observer is installed at document
  // start by pages the connector opens (QUIET_OBSERVER in page.py), or else by
  // the first snapshot, and kept on the window for later ones.
  const now = win.performance.now();
  let quiet = win.__fabricJevMutation;
  if (!quiet) {
    quiet = win.__fabricJevMutation = { last: now, installed: now };
    try {
      new MutationObserver(() => { quiet.last = win.performance.now(); })
        .observe(doc, { subtree: true, childList: true, attributes: true, characterData: true });
    } catch (e) { /* a document without a root yet */ }
  }

  const INPUT_ROLES = {
    button: "button", submit: "button", reset: "button", image: "button",
    checkbox: "checkbox", radio: "radio", range: "slider", number: "spinbutton",
    search: "searchbox", email: "textbox", tel: "textbox", text: "textbox", url: "textbox",
    password: "textbox", date: "textbox", "datetime-local": "textbox", month: "textbox",
    time: "textbox", week: "textbox", color: "button", file: "button",
  };
  const LANDMARK_ROLES = new Set(["banner", "contentinfo", "navigation", "main", "complementary",
    "form", "region", "search", "dialog", "alertdialog", "alert", "heading", "status", "log"]);
  const INTERACTIVE_ROLES = new Set(["button", "link", "textbox", "searchbox", "checkbox", "radio",
    "switch", "menuitem", "menuitemcheckbox", "menuitemradio", "tab", "option", "combobox",
    "listbox", "slider", "spinbutton", "separator", "treeitem", "gridcell"]);

  function implicitRole(el) {
    const tag = el.tagName;
    switch (tag) {
      case "A": case "AREA": return el.hasAttribute("href") ? "link" : null;
      case "BUTTON": return "button";
      case "SUMMARY": return "button";
      case "INPUT": {
        const type = (el.getAttribute("type") || "text").toLowerCase();
        if (type === "hidden") return null;
        if (type === "checkbox" && el.getAttribute("switch") !== null) return "switch";
        if (type === "text" && el.hasAttribute("list")) return "combobox";
        return INPUT_ROLES[type] || "textbox";
      }
      case "TEXTAREA": return "textbox";
      case "SELECT": return el.multiple || el.size > 1 ? "listbox" : "combobox";
      case "OPTION": return "option";
      case "HR": return "separator";
      case "H1": case "H2": case "H3": case "H4": case "H5": case "H6": return "heading";
      case "NAV": return "navigation";
      case "MAIN": return "main";
      case "ASIDE": return "complementary";
      case "DIALOG": return "dialog";
      case "SEARCH": return "search";
      case "HEADER": return el.closest("article, aside, main, nav, section") ? null : "banner";
      case "FOOTER": return el.closest("article, aside, main, nav, section") ? null : "contentinfo";
      case "FORM": return hasName(el) ? "form" : null;
      case "SECTION": return hasName(el) ? "region" : null;
      case "OUTPUT": return "status";
      case "IMG": return el.getAttribute("alt") === "" ? null : "img";
      default: return null;
    }
  }

  function hasName(el) {
    return el.hasAttribute("aria-label") || el.hasAttribute("aria-labelledby") || el.hasAttribute("title");
  }

  function roleOf(el) {
    const explicit = (el.getAttribute("role") || "").trim().split(/\s+/)[0];
    if (explicit && explicit !== "none" && explicit !== "presentation") return { role: cut(explicit, MAX_TEXT), explicit: true };
    const implicit = implicitRole(el);
    if (implicit) return { role: implicit, explicit: false };
    if (el.isContentEditable && el === el.closest("[contenteditable]")) return { role: "textbox", explicit: false };
    if (el.hasAttribute("onclick") || (el.tabIndex >= 0 && el.hasAttribute("tabindex"))) {
      return { role: "generic-interactive", explicit: false };
    }
    return null;
  }

  function clip(s, n) {
    s = String(s).replace(/\s+/g, " ").trim();
    return s.length > n ? s.slice(0, n) : s;
  }

  // An exact value (an id, an attribute) cut to `n`, whitespace kept; null stays null.
  function cut(s, n) {
    if (s === null || s === undefined) return null;
    s = String(s);
    return s.length > n ? s.slice(0, n) : s;
  }

  function textOf(el) {
    return clip(el.textContent || "", MAX_TEXT);
  }

  function byIds(el, attr) {
    const ids = (el.getAttribute(attr) || "").trim().split(/\s+/).filter(Boolean);
    const root = el.getRootNode();
    const parts = [];
    for (const id of ids) {
      const ref = (root.getElementById ? root.getElementById(id) : null) || doc.getElementById(id);
      if (ref) parts.push(clip(ref.textContent || "", MAX_TEXT));
    }
    return clip(parts.join(" "), MAX_TEXT);
  }

  function labelText(el) {
    if (el.labels && el.labels.length) {
      return clip(Array.from(el.labels).map(l => l.textContent || "").join(" "), MAX_TEXT);
    }
    return "";
  }

  function nameOf(el, role) {
    const lb = byIds(el, "aria-labelledby");
    if (lb) return lb;
    const al = el.getAttribute("aria-label");
    if (al && al.trim()) return clip(al, MAX_TEXT);
    const tag = el.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") {
      const l = labelText(el);
      if (l) return l;
      const type = (el.getAttribute("type") || "").toLowerCase();
      if (["button", "submit", "reset"].includes(type)) return clip(el.value || (type === "submit" ? "Submit" : type === "reset" ? "Reset" : ""), MAX_TEXT);
      if (type === "image" && el.alt) return clip(el.alt, MAX_TEXT);
    }
    if (tag === "IMG" || tag === "AREA") {
      if (el.alt) return clip(el.alt, MAX_TEXT);
    }
    const fromContent = ["button", "link", "heading", "tab", "menuitem", "menuitemcheckbox",
      "menuitemradio", "option", "switch", "checkbox", "radio", "treeitem", "cell", "gridcell"];
    if (fromContent.includes(role) && tag !== "INPUT") {
      const t = clip(el.textContent || "", MAX_TEXT);
      if (t) return t;
    }
    if (tag === "FIELDSET") {
      const legend = el.querySelector(":scope > legend");
      if (legend) return clip(legend.textContent || "", MAX_TEXT);
    }
    const title = el.getAttribute("title");
    if (title && title.trim()) return clip(title, MAX_TEXT);
    const ph = el.getAttribute("placeholder") || el.getAttribute("aria-placeholder");
    if (ph && ph.trim()) return clip(ph, MAX_TEXT);
    return "";
  }

  function tri(v) {
    if (v === "true") return true;
    if (v === "false") return false;
    if (v === "mixed") return "mixed";
    return null;
  }

  function bool(v) {
    return v === "true" ? true : v === "false" ? false : null;
  }

  function disabledOf(el) {
    // Native disabled, a disabled fieldset ancestor (outside its first legend),
    // and aria-disabled on the element or an ancestor.
    if (el.matches && el.matches(":disabled")) return { disabled: true, source: "native" };
    let node = el;
    while (node && node.nodeType === 1) {
      if (node.getAttribute("aria-disabled") === "true") {
        return { disabled: true, source: node === el ? "aria" : "inherited" };
      }
      const parent = node.parentElement || (node.getRootNode && node.getRootNode().host) || null;
      node = parent;
    }
    return { disabled: false, source: null };
  }

  function checkedOf(el, role) {
    const aria = tri(el.getAttribute("aria-checked"));
    if (el.tagName === "INPUT" && (el.type === "checkbox" || el.type === "radio")) {
      if (el.indeterminate) return { checked: "mixed", aria: aria };
      return { checked: !!el.checked, aria: aria };
    }
    if (aria !== null) return { checked: aria, aria: aria };
    if (["checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"].includes(role)) {
      return { checked: false, aria: null };
    }
    return { checked: null, aria: null };
  }

  function valueOf(el, role) {
    const tag = el.tagName;
    let value = null, redacted = false;
    if (tag === "INPUT") {
      const type = (el.type || "").toLowerCase();
      if (type === "password") {
        redacted = true;
        value = el.value ? "••••••••" : "";
      } else if (type !== "checkbox" && type !== "radio" && type !== "button" && type !== "submit"
                 && type !== "reset" && type !== "file" && type !== "image") {
        value = el.value;
      }
    } else if (tag === "TEXTAREA") {
      value = el.value;
    } else if (tag === "SELECT") {
      const picked = Array.from(el.selectedOptions).map(o => o.label || o.text);
      value = el.multiple ? picked.join(", ") : (picked[0] || "");
    } else if (el.isContentEditable) {
      value = el.innerText;
    } else if (el.hasAttribute("aria-valuenow")) {
      value = el.getAttribute("aria-valuetext") || el.getAttribute("aria-valuenow");
    }
    if (value === null) return { value: null, redacted: false, clipped: false };
    const clipped = value.length > MAX_VALUE;
    return { value: clipped ? value.slice(0, MAX_VALUE) : value, redacted: redacted, clipped: clipped };
  }

  const TEXT_INPUT_TYPES = new Set(["text", "search", "email", "tel", "url", "password", "number",
    "date", "datetime-local", "month", "time", "week"]);

  function editingOf(el, visible, disabled) {
    // readonly: native readonly, aria-readonly, or contenteditable=false inside
    // an editable host. editable: a text control or contenteditable that is
    // visible, enabled and not read-only.
    const tag = el.tagName;
    const textInput = tag === "INPUT" && TEXT_INPUT_TYPES.has((el.type || "text").toLowerCase());
    const textControl = textInput || tag === "TEXTAREA" || el.isContentEditable;
    let readonly = el.getAttribute("aria-readonly") === "true";
    if ((textInput || tag === "TEXTAREA") && el.readOnly) readonly = true;
    if (!el.isContentEditable) {
      const parent = el.parentElement || (el.getRootNode() && el.getRootNode().host) || null;
      if (parent && parent.isContentEditable) readonly = true;
    }
    return { readonly: readonly, editable: !!(textControl && visible && !disabled && !readonly) };
  }

  function describe(el) {
    if (!el || el.nodeType !== 1) return null;
    let s = el.tagName.toLowerCase();
    if (el.id) s += "#" + cut(el.id, MAX_TEXT);
    const cls = (typeof el.className === "string" ? el.className : "").trim().split(/\s+/).filter(Boolean).slice(0, 2);
    if (cls.length) s += "." + cls.map(c => cut(c, MAX_TEXT)).join(".");
    return cut(s, MAX_TEXT);
  }

  function containsDeep(root, node) {
    while (node) {
      if (node === root) return true;
      node = node.parentNode || (node.host !== undefined ? node.host : null);
    }
    return false;
  }

  function hitAt(x, y) {
    let hit = doc.elementFromPoint(x, y);
    // Descend into shadow roots (open, and closed ones handed in) for the innermost element.
    while (hit && shadowOf(hit)) {
      const inner = shadowOf(hit).elementFromPoint(x, y);
      if (!inner || inner === hit) break;
      hit = inner;
    }
    return hit;
  }

  const out = [];
  let nodeCount = 0;
  let index = 0;
  let truncated = false;

  function visit(root) {
    const walker = doc.createTreeWalker(root, NodeFilter.SHOW_ELEMENT);
    let el = walker.currentNode.nodeType === 1 ? walker.currentNode : walker.nextNode();
    while (el) {
      nodeCount++;
      const shadow = shadowOf(el);
      if (shadow) visit(shadow);
      consider(el);
      el = walker.nextNode();
    }
  }

  function consider(el) {
    if (out.length >= MAX_ELEMENTS) { truncated = true; return; }
    const r = roleOf(el);
    if (!r) return;
    const role = r.role;
    if (!INTERACTIVE_ROLES.has(role) && !LANDMARK_ROLES.has(role) && role !== "generic-interactive"
        && role !== "img" && !r.explicit) return;
    const style = win.getComputedStyle(el);
    if (style.display === "none") return;
    const rects = el.getClientRects();
    if (!rects.length && el.tagName !== "OPTION") return;
    const box = el.getBoundingClientRect();
    const hiddenByStyle = style.visibility === "hidden" || style.visibility === "collapse" || Number(style.opacity) === 0;
    const tiny = box.width <= 1 || box.height <= 1;
    const clipRect = style.clip && style.clip !== "auto" && /rect\(0(px)?,? 0(px)?,? 0(px)?,? 0(px)?\)/.test(style.clip.replace(/\s+/g, " "));
    const clipPath = style.clipPath && /inset\(50%\)/.test(style.clipPath);
    const visible = !hiddenByStyle && !tiny && !clipRect && !clipPath && !el.closest("[hidden]");
    const inViewport = box.right > 0 && box.bottom > 0 && box.left < vw && box.top < vh && box.width > 0 && box.height > 0;
    let occluded = false, occludedBy = null;
    if (visible && inViewport && options.occlusion !== false) {
      const cx = Math.min(Math.max((Math.max(box.left, 0) + Math.min(box.right, vw)) / 2, 0), vw - 1);
      const cy = Math.min(Math.max((Math.max(box.top, 0) + Math.min(box.bottom, vh)) / 2, 0), vh - 1);
      const hit = hitAt(cx, cy);
      if (hit && !containsDeep(el, hit) && !(el.tagName === "INPUT" && el.labels && Array.from(el.labels).some(l => containsDeep(l, hit)))) {
        occluded = true;
        occludedBy = describe(hit);
      }
    }
    const checked = checkedOf(el, role);
    const dis = disabledOf(el);
    const editing = editingOf(el, visible, dis.disabled);
    const val = valueOf(el, role);
    const expanded = bool(el.getAttribute("aria-expanded")) ?? (el.tagName === "DETAILS" ? el.open : (el.tagName === "SUMMARY" && el.parentElement && el.parentElement.tagName === "DETAILS" ? el.parentElement.open : null));
    const pressed = tri(el.getAttribute("aria-pressed"));
    let selected = bool(el.getAttribute("aria-selected"));
    if (selected === null && el.tagName === "OPTION") selected = el.selected;
    let level = null;
    if (role === "heading") {
      const al = el.getAttribute("aria-level");
      level = al ? Number(al) : (/^H[1-6]$/.test(el.tagName) ? Number(el.tagName[1]) : 2);
    }
    out.push(compact({
      index: index++,
      role: role,
      explicit_role: r.explicit,
      tag: el.tagName.toLowerCase(),
      name: nameOf(el, role),
      text: textOf(el),
      value: val.value,
      value_redacted: val.redacted,
      value_clipped: val.clipped,
      input_type: el.tagName === "INPUT" ? (el.type || "text").toLowerCase() : null,
      checked: checked.checked,
      aria_checked: checked.aria,
      disabled: dis.disabled,
      aria_disabled: el.getAttribute("aria-disabled") === "true",
      disabled_source: dis.source,
      expanded: expanded,
      pressed: pressed,
      selected: selected,
      level: level,
      placeholder: cut(el.getAttribute("placeholder"), MAX_TEXT),
      testid: cut(el.getAttribute("data-testid"), MAX_TEXT),
      id: cut(el.id || null, MAX_TEXT),
      in_shadow: el.getRootNode() !== doc,
      readonly: editing.readonly,
      editable: editing.editable,
      bbox: { x: Math.round(box.left + win.scrollX), y: Math.round(box.top + win.scrollY),
              width: Math.round(box.width), height: Math.round(box.height) },
      visible: visible,
      in_viewport: inViewport,
      is_occluded: occluded,
      occluded_by: occludedBy,
    }));
  }

  // Fields at their default (null, false, "") are left out to keep large pages
  // cheap to transfer; the Python side restores them (see page.py DEFAULTS).
  const FALSE_BY_DEFAULT = new Set(["explicit_role", "value_redacted", "value_clipped", "disabled",
    "aria_disabled", "in_shadow", "readonly", "editable", "visible", "in_viewport", "is_occluded"]);
  function compact(record) {
    const kept = {};
    for (const key in record) {
      const v = record[key];
      if (v === null || v === "" || (v === false && FALSE_BY_DEFAULT.has(key))) continue;
      kept[key] = v;
    }
    return kept;
  }

  visit(doc.documentElement || doc);
  return {
    url: cut(win.location.href, MAX_URL),
    title: cut(doc.title, MAX_TEXT),
    ready_state: doc.readyState,
    node_count: nodeCount,
    quiet_ms: Math.round(now - quiet.last),
    observed_ms: Math.round(now - quiet.installed),
    viewport: { width: vw, height: vh },
    scroll: { x: win.scrollX, y: win.scrollY,
              width: doc.documentElement ? doc.documentElement.scrollWidth : 0,
              height: doc.documentElement ? doc.documentElement.scrollHeight : 0 },
    element_count: out.length,
    truncated: truncated,
    elements: out,
  };
})
