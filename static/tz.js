// Reports the browser's time zone to the server in the `tz` cookie so pages show local times
// (with their offset). Pages work without it: they then show UTC.
(function () {
  try {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (tz && document.cookie.indexOf("tz=" + encodeURIComponent(tz)) === -1) {
      document.cookie = "tz=" + encodeURIComponent(tz) + "; path=/; max-age=31536000; SameSite=Lax";
    }
  } catch (e) { /* no Intl: stay on UTC */ }
})();
