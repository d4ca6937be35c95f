// Feedback on long work. A form marked `data-busy="Adding evidence…"` disables its submit
// button when submitted and shows what it is doing with the seconds elapsed, so a slow paste is
// not submitted twice. A large paste or a file upload goes through XMLHttpRequest so the page can
// show how much has been sent; the browser then follows the server's answer as a normal submit
// would. A form with `data-max-bytes` (the server's body limit) is checked before it is sent: a
// paste or file over the limit is not sent, the form says why and keeps what was typed, and a 413
// from the server is shown the same way. Without JavaScript every form posts as usual (an over-
// limit body then gets the server's 413 page). No inline script: CSP stays `script-src 'self'`.
(function () {
  "use strict";
  var LARGE = 256 * 1024; // characters of paste above which the upload progress is shown

  function say(form, text) {
    var s = form.querySelector(".busy-status");
    if (s) { s.textContent = text; }
  }

  function lock(form) {
    var buttons = form.querySelectorAll("button");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].disabled = true;
      buttons[i].setAttribute("aria-busy", "true");
    }
    form.setAttribute("data-busy-sent", "1");
  }

  function ticker(form, label) {
    var started = Date.now();
    say(form, label);
    return window.setInterval(function () {
      say(form, label + " " + Math.round((Date.now() - started) / 1000) + " s");
    }, 1000);
  }

  function large(form) {
    var file = form.querySelector("input[type=file]");
    if (file && file.files && file.files.length > 0) { return true; }
    var text = form.querySelector("textarea");
    return !!(text && text.value.length > LARGE);
  }

  // As the server writes a limit (web/view.rs `mebibytes`): `50 MiB`, `1.5 MiB`, `4 KiB`.
  function mib(bytes) {
    if (bytes < 1024) { return bytes + " bytes"; }
    if (bytes < 1024 * 1024) { return Math.floor(bytes / 1024) + " KiB"; }
    var tenths = Math.round(bytes / (1024 * 1024) * 10);
    return (tenths % 10 === 0 ? String(tenths / 10) : (tenths / 10).toFixed(1)) + " MiB";
  }

  // Bytes the form's paste and file add up to (UTF-8), or 0 when it cannot tell.
  function payloadBytes(form) {
    var total = 0;
    var file = form.querySelector("input[type=file]");
    if (file && file.files) {
      for (var i = 0; i < file.files.length; i++) { total += file.files[i].size; }
    }
    var text = form.querySelector("textarea");
    if (text && window.Blob) { total += new Blob([text.value]).size; }
    return total;
  }

  function unlock(form) {
    var buttons = form.querySelectorAll("button");
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].disabled = false;
      buttons[i].removeAttribute("aria-busy");
    }
    form.removeAttribute("data-busy-sent");
  }

  function tooLarge(form, bytes, limit) {
    say(form, "Too large: " + (bytes ? mib(bytes) + " against the limit of " : "over the limit of ") +
      mib(limit) + ". Nothing was sent and your input is kept; shorten the paste or split the file.");
    var s = form.querySelector(".busy-status");
    if (s) { s.classList.add("error-text"); }
  }

  function sendWithProgress(form, label) {
    var bar = form.querySelector("progress.busy-progress");
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.upload.onprogress = function (e) {
      if (!e.lengthComputable) { return; }
      if (bar) { bar.hidden = false; bar.max = e.total; bar.value = e.loaded; }
      say(form, label + " " + Math.round((100 * e.loaded) / e.total) + " % sent");
    };
    xhr.upload.onload = function () {
      if (bar) { bar.removeAttribute("value"); }
      form.busyTicker = ticker(form, "Sent; extracting observations…");
    };
    xhr.onload = function () {
      if (xhr.status === 413) {
        // Over the server's limit: keep this page and its input, say so.
        window.clearInterval(form.busyTicker);
        if (bar) { bar.hidden = true; }
        unlock(form);
        tooLarge(form, 0, Number(form.getAttribute("data-max-bytes")) || 0);
        return;
      }
      if (xhr.status >= 200 && xhr.status < 300 && xhr.responseURL) {
        // The answer redirected to the incident page: show it. When that is this very URL, a
        // plain assign would only move to the anchor, so reload.
        if (xhr.responseURL === window.location.href.split("#")[0]) {
          window.location.hash = "observations";
          window.location.reload();
        } else {
          window.location.assign(xhr.responseURL + "#observations");
        }
      } else {
        // An error page (409, 413, 422) in place of this one, as a normal submit would show.
        document.open();
        document.write(xhr.responseText);
        document.close();
      }
    };
    xhr.onerror = function () {
      window.clearInterval(form.busyTicker);
      say(form, "The upload failed (network error). Nothing was added; try again.");
      unlock(form);
    };
    xhr.send(new FormData(form));
  }

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-busy")) { return; }
    if (form.getAttribute("data-busy-sent") === "1") { ev.preventDefault(); return; }
    var label = form.getAttribute("data-busy") || "Working…";
    var status = form.querySelector(".busy-status");
    if (status) { status.classList.remove("error-text"); }
    var limit = Number(form.getAttribute("data-max-bytes")) || 0;
    var bytes = limit ? payloadBytes(form) : 0;
    if (limit && bytes > limit) {
      ev.preventDefault();
      tooLarge(form, bytes, limit);
      return;
    }
    if (form.enctype === "multipart/form-data" && window.FormData && large(form)) {
      ev.preventDefault();
      lock(form);
      sendWithProgress(form, label);
      return;
    }
    // The form data is built after this handler, so disabling the (unnamed) button is safe.
    window.setTimeout(function () { lock(form); }, 0);
    ticker(form, label);
  });

  // Coming back with the browser's Back button: forms work again.
  window.addEventListener("pageshow", function () {
    var sent = document.querySelectorAll("form[data-busy-sent]");
    for (var i = 0; i < sent.length; i++) { unlock(sent[i]); }
  });
})();
