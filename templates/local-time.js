/* local-time.js -- served as /static/local-time.js, the only script of consentd's pages
 * (CSP script-src 'self', no inline script).  The server writes every time in UTC as
 *   <time datetime="2026-12-01T20:00:00Z" title="2026-12-01 20:00 UTC">2026-12-01 20:00 UTC</time>
 * and this rewrites the text into the reader's own time zone and language; the title keeps
 * the UTC time as a tooltip.  Without script the UTC text stays.  It must never insert
 * markup: it sets textContent only. */
(function () {
  'use strict';
  var fmt;
  try {
    fmt = new Intl.DateTimeFormat(undefined, {
      year: 'numeric', month: 'short', day: 'numeric',
      hour: '2-digit', minute: '2-digit', timeZoneName: 'short'
    });
  } catch (e) {
    return;
  }
  var els = document.querySelectorAll('time[datetime]');
  for (var i = 0; i < els.length; i++) {
    var when = els[i].getAttribute('datetime');
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/.test(when)) continue;
    var d = new Date(when);
    if (isNaN(d.getTime())) continue;
    els[i].textContent = fmt.format(d);
  }
}());
