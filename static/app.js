// Feedback on long work. A form marked `data-busy="Adding evidence…"` disables its submit
// button when submitted and shows what it is doing with the seconds elapsed, so a slow paste is
// not submitted twice. A large paste or a file upload goes through XMLHttpRequest so the page can
// show how much has been sent; the browser then follows the server's answer as a normal submit
// would. Without JavaScript every form posts as usual. No inline script: CSP stays `script-src
// 'self'`.
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
      ticker(form, "Sent; extracting observations…");
    };
    xhr.onload = function () {
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
      say(form, "The upload failed (network error). Nothing was added; try again.");
      var buttons = form.querySelectorAll("button");
      for (var i = 0; i < buttons.length; i++) { buttons[i].disabled = false; }
      form.removeAttribute("data-busy-sent");
    };
    xhr.send(new FormData(form));
  }

  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-busy")) { return; }
    if (form.getAttribute("data-busy-sent") === "1") { ev.preventDefault(); return; }
    var label = form.getAttribute("data-busy") || "Working…";
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
    for (var i = 0; i < sent.length; i++) {
      sent[i].removeAttribute("data-busy-sent");
      var buttons = sent[i].querySelectorAll("button");
      for (var j = 0; j < buttons.length; j++) { buttons[j].disabled = false; }
    }
  });
})();
