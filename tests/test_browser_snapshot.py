"""runtime_js/snapshot.js on a page with every control kind, in real Chromium."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fabric_jev_browser import Page

from tests.browser_support import Pages

pytestmark = [pytest.mark.anyio, pytest.mark.browser]

CONTROLS = """<!doctype html>
<html><head><title>Controls</title>
<style>
  body { margin: 0; font: 16px sans-serif; }
  .sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  #overlay { position: fixed; left: 0; top: 0; width: 400px; height: 60px; background: rgba(0,0,0,.5); }
  #far { position: absolute; top: 3000px; }
</style></head>
<body>
  <header><nav aria-label="Main"><a href="#home">Home</a></nav></header>
  <main>
  <button id="covered" data-testid="covered-btn">Covered</button>
  <div id="overlay"></div>
  <h2>Settings</h2>
  <h3 aria-level="5">Odd level</h3>
  <button class="sr-only">Skip to content</button>
  <button id="far">Far away</button>
  <span id="lbl">Labelled by span</span><input aria-labelledby="lbl" value="one">
  <input aria-label="Aria named" value="two">
  <label for="email">Email address</label><input id="email" type="email" placeholder="you@example.com">
  <input type="text" placeholder="Only a placeholder">
  <input type="password" value="hunter2-secret" aria-label="Password">
  <textarea aria-label="Long">VALUE</textarea>
  <img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" alt="A logo" width="10" height="10">
  <button title="Titled"></button>
  <fieldset disabled><legend>Locked</legend><input aria-label="In disabled fieldset"></fieldset>
  <div aria-disabled="true"><button>Aria disabled parent</button></div>
  <button disabled>Native disabled</button>
  <div role="checkbox" aria-checked="mixed" tabindex="0">Mixed by aria</div>
  <input type="checkbox" id="ind" aria-label="Indeterminate">
  <input type="checkbox" checked aria-label="Checked box">
  <input type="radio" name="r" aria-label="Radio off">
  <button aria-pressed="true">Bold</button>
  <button aria-expanded="false">Menu</button>
  <details><summary>More</summary>hidden text</details>
  <div role="tablist"><div role="tab" aria-selected="true">Tab A</div><div role="tab" aria-selected="false">Tab B</div></div>
  <select multiple aria-label="Many"><option selected>A</option><option>B</option><option selected>C</option></select>
  <select aria-label="One"><option>X</option><option selected>Y</option></select>
  <hr>
  <div role="alert">Saved!</div>
  <input type="range" aria-label="Volume" min="0" max="10" value="3">
  <button style="display:none">Never shown</button>
  <button style="visibility:hidden">Invisible</button>
  <shadow-host></shadow-host>
  </main>
  <script>
    document.getElementById('ind').indeterminate = true;
    document.querySelector('textarea').value = 'x'.repeat(250);
    customElements.define('shadow-host', class extends HTMLElement {
      constructor() { super(); this.attachShadow({mode: 'open'}).innerHTML =
        '<button aria-label="Shadow button">in shadow</button><input placeholder="Shadow input">'; }
    });
  </script>
</body></html>"""


@pytest.fixture
async def snap(page: Page, pages: Pages) -> dict[str, Any]:
    await page.navigate(pages.add("/controls.html", CONTROLS))
    result: dict[str, Any] = await page.snapshot()
    return result


def find(snap: dict[str, Any], name: str) -> dict[str, Any]:
    matches = [e for e in snap["elements"] if e["name"] == name]
    assert len(matches) == 1, (name, [e["name"] for e in snap["elements"]])
    return matches[0]


async def test_diagnostics(snap: dict[str, Any]) -> None:
    assert snap["ready_state"] == "complete" and snap["title"] == "Controls"
    assert snap["node_count"] > 40 and snap["quiet_ms"] >= 0
    assert snap["viewport"] == {"width": 1280, "height": 800}
    assert snap["scroll"]["x"] == 0 and snap["scroll"]["height"] > 3000
    assert snap["element_count"] == len(snap["elements"]) and snap["truncated"] is False


async def test_occlusion_names_the_covering_element(snap: dict[str, Any]) -> None:
    covered = find(snap, "Covered")
    assert covered["is_occluded"] is True and covered["occluded_by"] == "div#overlay"
    assert covered["testid"] == "covered-btn" and covered["visible"] is True
    assert find(snap, "Settings")["is_occluded"] is False


async def test_clipped_offscreen_hidden(snap: dict[str, Any]) -> None:
    assert find(snap, "Skip to content")["visible"] is False
    far = find(snap, "Far away")
    assert far["visible"] is True and far["in_viewport"] is False and far["is_occluded"] is False
    assert far["bbox"]["y"] >= 3000
    names = [e["name"] for e in snap["elements"]]
    assert "Never shown" not in names
    assert find(snap, "Invisible")["visible"] is False


async def test_roles_and_names(snap: dict[str, Any]) -> None:
    assert find(snap, "Labelled by span")["role"] == "textbox"
    assert find(snap, "Aria named")["value"] == "two"
    email = find(snap, "Email address")
    assert email["input_type"] == "email" and email["placeholder"] == "you@example.com"
    assert find(snap, "Only a placeholder")["role"] == "textbox"
    assert find(snap, "A logo")["role"] == "img"
    assert find(snap, "Titled")["role"] == "button"
    assert find(snap, "Main")["role"] == "navigation"
    assert find(snap, "Home")["role"] == "link"
    assert find(snap, "Settings")["level"] == 2 and find(snap, "Odd level")["level"] == 5
    # An alert takes no name from its content (ARIA); its text carries the message.
    [alert] = [e for e in snap["elements"] if e["role"] == "alert"]
    assert alert["text"] == "Saved!" and alert["name"] == ""
    assert find(snap, "Volume")["role"] == "slider"
    assert [e["role"] for e in snap["elements"]].count("separator") == 1
    roles = {e["role"] for e in snap["elements"]}
    assert {"banner", "main", "navigation"} <= roles


async def test_disabled_states(snap: dict[str, Any]) -> None:
    fs = find(snap, "In disabled fieldset")
    assert fs["disabled"] is True and fs["disabled_source"] == "native"
    inherited = find(snap, "Aria disabled parent")
    assert inherited["disabled"] is True and inherited["disabled_source"] == "inherited"
    native = find(snap, "Native disabled")
    assert native["disabled"] is True and native["aria_disabled"] is False
    assert find(snap, "Covered")["disabled"] is False


async def test_checked_pressed_expanded_selected(snap: dict[str, Any]) -> None:
    mixed = find(snap, "Mixed by aria")
    assert mixed["checked"] == "mixed" and mixed["aria_checked"] == "mixed"
    assert find(snap, "Indeterminate")["checked"] == "mixed"
    assert find(snap, "Checked box")["checked"] is True
    assert find(snap, "Radio off")["checked"] is False and find(snap, "Radio off")["role"] == "radio"
    assert find(snap, "Bold")["pressed"] is True
    assert find(snap, "Menu")["expanded"] is False
    assert find(snap, "More")["expanded"] is False
    assert find(snap, "Tab A")["selected"] is True and find(snap, "Tab B")["selected"] is False


async def test_values_selects_and_clipping(snap: dict[str, Any]) -> None:
    many = find(snap, "Many")
    assert many["role"] == "listbox" and many["value"] == "A, C"
    one = find(snap, "One")
    assert one["role"] == "combobox" and one["value"] == "Y"
    options = [e for e in snap["elements"] if e["role"] == "option"]
    assert [o["selected"] for o in options if o["name"] in ("A", "B", "C")] == [True, False, True]
    long = find(snap, "Long")
    assert len(long["value"]) == 200 and long["value_clipped"] is True


async def test_password_never_leaves_the_page(snap: dict[str, Any]) -> None:
    pw = find(snap, "Password")
    assert pw["value_redacted"] is True and pw["value"] == "••••••••"
    assert "hunter2" not in json.dumps(snap)


async def test_shadow_dom_elements_are_found(snap: dict[str, Any]) -> None:
    button = find(snap, "Shadow button")
    assert button["in_shadow"] is True and button["role"] == "button" and button["visible"] is True
    assert find(snap, "Shadow input")["in_shadow"] is True


async def test_quiet_ms_tracks_mutations(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/mutating.html", "<button>b</button>"))
    await page.snapshot()  # installs the observer
    await page.evaluate("document.body.appendChild(document.createElement('p'))")
    snap = await page.snapshot()
    assert snap["quiet_ms"] < snap["observed_ms"] or snap["observed_ms"] == 0


async def test_quiet_ms_is_measured_from_document_start(page: Page, pages: Pages) -> None:
    await page.navigate(pages.add("/busy-from-start.html", """<!doctype html><body><button>Go</button><p id="t"></p>
      <script>setInterval(() => { document.getElementById('t').textContent = performance.now(); }, 10);</script>
      </body>"""))
    # Wait for one observed mutation (an event, not a clock), then the very first snapshot knows.
    await page.evaluate("new Promise(done => new MutationObserver((_, o) => { o.disconnect(); done(); })"
                        ".observe(document.body, {subtree: true, childList: true, characterData: true}))",
                        await_promise=True)
    snap = await page.snapshot()
    assert snap["observed_ms"] > snap["quiet_ms"]


HUGE = 100_000


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


async def test_every_string_a_page_controls_is_clipped(page: Page, pages: Pages) -> None:
    # 30 buttons with 1 MiB attributes once pushed 67 MB into the host: every string
    # the page chooses is clipped in the page, like `text` (URLs at 2,048 characters).
    labels = "".join(f'<span id="l{i}">{"L" * 150}</span>' for i in range(50))
    html = f"""<!doctype html><html><head><title>{"T" * HUGE}</title><style>
      iframe {{ position: fixed; left: 10px; top: 100px; width: 200px; height: 100px; }}
    </style></head><body>
      <button id="{"i" * HUGE}" data-testid="{"d" * HUGE}">Big</button>
      <input placeholder="{"p" * HUGE}" style="position: absolute; top: 600px">
      <div role="{"r" * HUGE}" tabindex="0" style="position: absolute; top: 650px">R</div>
      <button aria-labelledby="{" ".join(f"l{i}" for i in range(50))}"
              style="position: absolute; top: 700px">x</button>{labels}
      <iframe id="{"f" * HUGE}" srcdoc="<button>In frame</button>"></iframe>
      <div id="{"o" * HUGE}" class="{"c" * HUGE} {"k" * HUGE}" style="position: fixed; left: 0; top: 0;
           width: 400px; height: 400px"></div>
      <script>history.replaceState(null, "", location.pathname + "?" + "q".repeat({HUGE}));</script>
    </body></html>"""
    await page.navigate(pages.add("/huge-attributes.html", html))
    snap = await page.snapshot()
    assert max(len(s) for s in _strings(snap)) <= 2048
    assert len(json.dumps(snap)) < 40_000
    big = find(snap, "Big")
    assert big["id"] == "i" * 200 and big["testid"] == "d" * 200
    assert big["is_occluded"] is True and big["occluded_by"].startswith("div#ooo") \
        and len(big["occluded_by"]) == 200
    assert [e["placeholder"] for e in snap["elements"] if e["placeholder"]] == ["p" * 200]
    assert [e["role"] for e in snap["elements"] if e["role"].startswith("r")] == ["r" * 200]
    assert [len(e["name"]) for e in snap["elements"] if e["name"].startswith("L")] == [200]
    assert snap["title"] == "T" * 200 and len(snap["url"]) == 2048 and snap["url"].endswith("q")
    [in_frame] = [e for e in snap["elements"] if e["name"] == "In frame"]
    assert in_frame["frame"] == "f" * 200 and in_frame["occluded_by"].startswith("div#ooo") \
        and len(in_frame["occluded_by"]) == 200
