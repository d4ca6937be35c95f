// The live incident page (issue #55). The page follows its change stream
// (`GET /incidents/{id}/events`, server-sent events): for each change it fetches the panels that
// changed from `GET /incidents/{id}/panels?show=…` (the page's own template blocks) and puts them
// in place of the old ones, says quietly who changed what ("bob added evidence · just now"),
// shows who has the incident open, and keeps the forms' hidden `version` current, so a
// teammate's change does not turn the next submit into a 409.
//
// What the person is typing is never touched: a panel holding a form with input (or the focus)
// keeps that form's own element, with its text, selection and focus, and only what is around it
// is replaced; when the new panel no longer has that form (a teammate did the same thing), the
// panel is left as it is until the form is sent or emptied, and its form keeps its old version
// (the server then says what changed). Without JavaScript, or without EventSource, the page
// works as a plain page. No inline script: CSP stays `script-src 'self'`.
(function () {
  "use strict";
  var head = document.getElementById("incident-head");
  if (!head || !head.hasAttribute("data-live-events") || !window.EventSource) { return; }

  var eventsUrl = head.getAttribute("data-live-events");
  var panelsUrl = head.getAttribute("data-live-panels");
  var lastSeen = Number(head.getAttribute("data-live-after")) || 0;
  var version = head.getAttribute("data-live-version");
  var bar = document.getElementById("live-bar");
  var presence = document.getElementById("presence");
  var line = document.getElementById("live-line");
  var me = (function () {
    var who = document.querySelector(".who a[href='/profile']");
    return who ? who.textContent.trim() : "";
  })();
  var source = null;
  var wanted = {};        // panel name -> true, waiting to be fetched
  var stale = {};         // panel name -> true, left as it was around a form being typed in
  var fetching = false;
  var timer = 0;
  var lastChange = null;  // {who, what, at}
  var hiddenSince = 0;
  var HIDDEN_CLOSE_MS = 5 * 60 * 1000;

  // A form holds input when one of its fields differs from what the server rendered, a file is
  // chosen, or a field has the focus.
  function typing(form) {
    if (form.getAttribute("data-busy-sent") === "1") { return true; }
    var els = form.elements;
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      if (el === document.activeElement && el.type !== "submit" && el.tagName !== "BUTTON") { return true; }
      if (el.type === "hidden" || el.type === "submit" || el.tagName === "BUTTON") { continue; }
      if (el.type === "checkbox" || el.type === "radio") {
        if (el.checked !== el.defaultChecked) { return true; }
      } else if (el.type === "file") {
        if (el.files && el.files.length > 0) { return true; }
      } else if (el.tagName === "SELECT") {
        for (var j = 0; j < el.options.length; j++) {
          if (el.options[j].selected !== el.options[j].defaultSelected) { return true; }
        }
      } else if (el.value !== el.defaultValue) {
        return true;
      }
    }
    return false;
  }

  function holdsInput(el) {
    if (el.tagName === "FORM") { return typing(el); }
    var forms = el.querySelectorAll("form");
    for (var i = 0; i < forms.length; i++) { if (typing(forms[i])) { return true; } }
    return false;
  }

  // What identifies an element among its siblings across two renders.
  function key(el) {
    var k = el.tagName + "#" + el.id + "." + el.className;
    if (el.tagName === "FORM") { k += "@" + el.getAttribute("action"); }
    if (el.tagName === "LI" && el.querySelector("form[action]")) {
      k += "@" + el.querySelector("form[action]").getAttribute("action");
    }
    return k;
  }

  // The new child matching each old child that holds input, in order; null when one has none.
  function counterparts(old, fresh) {
    var pairs = [];
    var used = [];
    var kids = old.children;
    for (var i = 0; i < kids.length; i++) {
      if (!holdsInput(kids[i])) { continue; }
      var match = null;
      for (var j = 0; j < fresh.children.length; j++) {
        var c = fresh.children[j];
        if (used.indexOf(c) < 0 && key(c) === key(kids[i])) { match = c; break; }
      }
      if (!match) { return null; }
      used.push(match);
      pairs.push([kids[i], match]);
    }
    for (var p = 1; p < pairs.length; p++) {
      var a = Array.prototype.indexOf.call(fresh.children, pairs[p - 1][1]);
      var b = Array.prototype.indexOf.call(fresh.children, pairs[p][1]);
      if (a > b) { return null; }
    }
    return pairs;
  }

  // Whether `fresh` can replace `old` while every form holding input stays in place.
  function fits(old, fresh) {
    if (!holdsInput(old)) { return true; }
    if (old.tagName === "FORM") {
      return fresh.tagName === "FORM" && fresh.getAttribute("action") === old.getAttribute("action");
    }
    var pairs = counterparts(old, fresh);
    if (!pairs) { return false; }
    for (var i = 0; i < pairs.length; i++) { if (!fits(pairs[i][0], pairs[i][1])) { return false; } }
    return true;
  }

  // Makes `old` read as `fresh` without moving the elements that hold input (moving a focused
  // field would blur it). Call only when fits(old, fresh).
  function morph(old, fresh) {
    if (!holdsInput(old)) { old.replaceWith(fresh); return; }
    if (old.tagName === "FORM") { return; }
    for (var a = 0; a < fresh.attributes.length; a++) {
      var attr = fresh.attributes[a];
      if (attr.name !== "open") { old.setAttribute(attr.name, attr.value); }
    }
    var pairs = counterparts(old, fresh);
    var keptFor = [];
    var kept = [];
    for (var i = 0; i < pairs.length; i++) {
      morph(pairs[i][0], pairs[i][1]);
      kept.push(pairs[i][0]);
      keptFor.push(pairs[i][1]);
    }
    var nodes = Array.prototype.slice.call(old.childNodes);
    for (var n = 0; n < nodes.length; n++) {
      if (kept.indexOf(nodes[n]) < 0) { old.removeChild(nodes[n]); }
    }
    var cursor = null;
    var incoming = Array.prototype.slice.call(fresh.childNodes);
    for (var m = 0; m < incoming.length; m++) {
      var at = keptFor.indexOf(incoming[m]);
      if (at >= 0) { cursor = kept[at]; continue; }
      if (cursor) { cursor.after(incoming[m]); } else { old.prepend(incoming[m]); }
      cursor = incoming[m];
    }
  }

  // The <details> that are open, by what their summary says, so a re-rendered panel keeps them.
  function openDetails(root) {
    var open = {};
    var all = root.querySelectorAll("details[open] > summary");
    for (var i = 0; i < all.length; i++) { open[all[i].textContent.trim()] = true; }
    return open;
  }

  function reopen(root, open) {
    var all = root.querySelectorAll("details > summary");
    for (var i = 0; i < all.length; i++) {
      if (open[all[i].textContent.trim()]) { all[i].parentNode.open = true; }
    }
  }

  function setVersions(v) {
    var inputs = document.querySelectorAll("form input[type=hidden][name=version]");
    for (var i = 0; i < inputs.length; i++) {
      var panel = inputs[i].closest("[data-live-panel]");
      if (panel && stale[panel.getAttribute("data-live-panel")]) { continue; }
      inputs[i].value = v;
    }
  }

  function swap(html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    var fresh = t.content.querySelectorAll("[data-live-panel]");
    for (var i = 0; i < fresh.length; i++) {
      var name = fresh[i].getAttribute("data-live-panel");
      var old = document.querySelector("[data-live-panel='" + name + "']");
      if (!old || fresh[i].parentNode !== t.content) { continue; }
      if (!fits(old, fresh[i])) { stale[name] = true; continue; }
      delete stale[name];
      var open = openDetails(old);
      var node = fresh[i];
      morph(old, node);
      var now = document.querySelector("[data-live-panel='" + name + "']");
      if (now) { reopen(now, open); }
    }
  }

  function fetchPanels() {
    timer = 0;
    var names = Object.keys(wanted);
    if (fetching || names.length === 0) { return; }
    wanted = {};
    fetching = true;
    var req = new XMLHttpRequest();
    req.open("GET", panelsUrl + "?show=" + encodeURIComponent(names.join(",")));
    req.setRequestHeader("Accept", "text/html");
    req.onload = function () {
      fetching = false;
      if (req.status === 200) {
        var v = req.getResponseHeader("X-Incident-Version");
        swap(req.responseText);
        if (v) { version = v; setVersions(v); }
      } else if (req.status === 401 || req.status === 404) {
        stop();
        return;
      }
      if (Object.keys(wanted).length) { schedule(); }
    };
    req.onerror = function () {
      fetching = false;
      for (var i = 0; i < names.length; i++) { wanted[names[i]] = true; }
      window.setTimeout(schedule, 2000);
    };
    req.send();
  }

  function schedule() {
    if (!timer) { timer = window.setTimeout(fetchPanels, 120); }
  }

  function ago(at) {
    var s = Math.round((Date.now() - at) / 1000);
    if (s < 60) { return "just now"; }
    var m = Math.round(s / 60);
    if (m < 60) { return m + " min ago"; }
    return Math.round(m / 60) + " h ago";
  }

  function showLine() {
    if (!lastChange || !line) { return; }
    var kept = Object.keys(stale).length ? " — your input is kept; that part updates when you send or clear it" : "";
    line.textContent = lastChange.who + " " + lastChange.what + " · " + ago(lastChange.at) + kept;
  }

  function onChange(ev) {
    var c;
    try { c = JSON.parse(ev.data); } catch (e) { return; }
    lastSeen = Math.max(lastSeen, Number(ev.lastEventId) || c.id || 0);
    for (var i = 0; i < c.panels.length; i++) { wanted[c.panels[i]] = true; }
    if (c.actor !== me) {
      lastChange = { who: c.actor, what: c.what, at: Date.now() };
      showLine();
    }
    schedule();
  }

  function onPresence(ev) {
    var p;
    try { p = JSON.parse(ev.data); } catch (e) { return; }
    var others = p.here.filter(function (n) { return n !== me; });
    if (presence) {
      presence.textContent = others.length ? "Here now: you, " + others.join(", ") : "Here now: only you";
      presence.setAttribute("data-here", p.here.join(","));
    }
    if (bar) { bar.hidden = false; }
  }

  function onReload() {
    var forms = document.querySelectorAll("form");
    for (var i = 0; i < forms.length; i++) {
      if (typing(forms[i])) {
        lastChange = { who: "Teammates", what: "made many changes", at: Date.now() };
        showLine();
        return;
      }
    }
    window.location.reload();
  }

  function stop() {
    if (source) { source.close(); source = null; }
  }

  function start() {
    stop();
    source = new EventSource(eventsUrl + "?after=" + lastSeen);
    source.addEventListener("change", onChange);
    source.addEventListener("presence", onPresence);
    source.addEventListener("reload", onReload);
    source.onerror = function () {
      // The browser reconnects by itself (with Last-Event-ID) unless the server refused the
      // stream (401, 404, 429): then try again later from the last change seen.
      if (source && source.readyState === EventSource.CLOSED) {
        stop();
        window.setTimeout(function () { if (!document.hidden) { start(); } }, 30000);
      }
    };
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) {
      hiddenSince = Date.now();
      window.setTimeout(function () {
        if (document.hidden && Date.now() - hiddenSince >= HIDDEN_CLOSE_MS) { stop(); }
      }, HIDDEN_CLOSE_MS);
    } else if (!source) {
      start();
    }
  });

  // A panel left as it was around a form: try again once the person leaves the form.
  document.addEventListener("focusout", function () {
    window.setTimeout(function () {
      var names = Object.keys(stale);
      if (!names.length) { return; }
      for (var i = 0; i < names.length; i++) { wanted[names[i]] = true; }
      schedule();
    }, 1000);
  });

  window.setInterval(showLine, 30000);
  start();
})();
