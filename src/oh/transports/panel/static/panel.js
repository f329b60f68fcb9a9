// The Memory panel's only script: a live countdown to the forget time, live updates when the
// agent writes (server-sent events, with polling as the fallback), a record's history loaded
// in place when it is opened, and anchors that find a record a memory card links to (opened):
// record-<name> with no working note goes to the reviewed record (or the removed note) of that
// name, and a record on another page of its list is asked for by name (?at=<name>), which
// shows the pages holding it. Every page works without it.
"use strict";

(function () {
  var NAME = /^[a-z][a-z0-9_]{0,31}:[a-z0-9][a-z0-9._-]{0,119}$/; // a record name (docs/tools.md)

  function words(ms) {
    if (ms <= 0) return "forgetting now";
    var s = Math.floor(ms / 1000);
    var h = Math.floor(s / 3600);
    var m = Math.floor((s % 3600) / 60);
    s = s % 60;
    var two = function (n) { return (n < 10 ? "0" : "") + n; };
    if (h) return "in " + h + " h " + two(m) + " min " + two(s) + " s";
    if (m) return "in " + m + " min " + two(s) + " s";
    return "in " + s + " s";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll(".countdown[data-until]").forEach(function (el) {
      var until = Date.parse(el.getAttribute("data-until").replace(/(\.\d{3})\d+/, "$1"));
      if (!isNaN(until)) el.textContent = "(" + words(until - now) + ")";
    });
  }

  function follow() {
    var id;
    try {
      id = decodeURIComponent(location.hash.slice(1));
    } catch (e) {
      return;
    }
    if (!id) return;
    if (document.getElementById(id)) {
      reveal(document.getElementById(id));
      return;
    }
    var prefixes = ["record-", "reviewed-", "removed-"];
    var name = null;
    prefixes.forEach(function (prefix) {
      if (name === null && id.indexOf(prefix) === 0) name = id.slice(prefix.length);
    });
    if (!name) return;
    for (var i = 0; i < prefixes.length; i++) {
      var other = document.getElementById(prefixes[i] + name);
      if (other) {
        history.replaceState(null, "", "#" + other.id);
        reveal(other);
        other.scrollIntoView();
        return;
      }
    }
    // Not on this page of the lists: ask once for the pages that hold it.
    var main = document.querySelector("main[data-notebook]");
    if (!main || !NAME.test(name) || new URLSearchParams(location.search).has("at")) return;
    location.replace(location.pathname + "?at=" + encodeURIComponent(name) + location.hash);
  }

  // A record the address names is shown open.
  function reveal(target) {
    var entry = target.querySelector && target.querySelector("details.entry");
    if (entry) entry.open = true;
  }

  // A record's history is a page of its own: loaded into its <details> the first time it opens.
  function loadHistory(event) {
    var box = event.target;
    if (!box.matches || !box.matches("details.history") || !box.open) return;
    var link = box.querySelector("p.load a[href]");
    if (!link || box.getAttribute("data-loaded")) return;
    box.setAttribute("data-loaded", "loading");
    fetch(link.href, { cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        var doc = text && new DOMParser().parseFromString(text, "text/html");
        var found = doc && doc.getElementById("history");
        if (!found) {
          box.removeAttribute("data-loaded");
          return;
        }
        var summary = box.querySelector("summary");
        box.replaceChildren(summary, document.adoptNode(found));
        box.setAttribute("data-loaded", "yes");
      })
      .catch(function () { box.removeAttribute("data-loaded"); });
  }

  // What changed since the owner last looked at this notebook (in this browser): each record
  // written at a later memory version than the one seen then is marked "changed".
  function seenKey(main) { return "oh-seen:" + main.getAttribute("data-notebook"); }

  function lastSeen(main) {
    try {
      var seen = localStorage.getItem(seenKey(main));
      return seen === null ? null : Number(seen);
    } catch (e) {
      return null;
    }
  }

  function markChanged(since) {
    document.querySelectorAll("article.record[data-version]").forEach(function (record) {
      if (!(Number(record.getAttribute("data-version")) > since)) return;
      if (record.querySelector(".changed-badge")) return;
      record.classList.add("changed");
      var badge = document.createElement("span");
      badge.className = "badge changed-badge";
      badge.textContent = "changed";
      badge.title = "written since you last looked at this notebook";
      var name = record.querySelector("summary .name");
      if (name) name.after(" ", badge);
    });
  }

  function seeNow(main) {
    var box = document.getElementById("memory");
    try {
      localStorage.setItem(seenKey(main), box.getAttribute("data-version"));
    } catch (e) { /* storage refused: nothing is marked next time */ }
  }

  function announce(text) {
    var live = document.getElementById("live");
    if (live) live.textContent = text;
  }

  function live(main, since) {
    var busy = false;
    var again = false;
    var stopped = false;
    var memory = function () { return document.getElementById("memory"); };

    function editing() {
      var box = memory();
      var active = document.activeElement;
      if (active && box.contains(active) && active.matches("input, textarea")) return true;
      return Array.prototype.some.call(
        box.querySelectorAll("textarea, input:not([type=hidden])"),
        function (field) { return field.value !== field.defaultValue; }
      );
    }

    // The record at the top of the window, and where it is: after the lists are replaced, the
    // window is moved so that it is where it was (a note inserted above it moves nothing).
    function anchorInView() {
      var records = document.querySelectorAll("#memory article.record[id]");
      for (var i = 0; i < records.length; i++) {
        var top = records[i].getBoundingClientRect().top;
        if (top >= 0) return { id: records[i].id, top: top };
      }
      return null;
    }

    function swap() {
      return fetch(location.pathname + location.search, { cache: "no-store" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (text) {
          if (text === null) return;
          var doc = new DOMParser().parseFromString(text, "text/html");
          var fresh = doc.getElementById("memory");
          var session = doc.getElementById("session");
          if (!fresh || !session) return;
          var open = Array.prototype.map.call(
            document.querySelectorAll("details[open][id]"),
            function (d) { return d.id; }
          );
          var before = Number(memory().getAttribute("data-version"));
          var place = anchorInView();
          memory().replaceWith(document.adoptNode(fresh));
          document.getElementById("session").replaceWith(document.adoptNode(session));
          open.forEach(function (id) {
            var d = document.getElementById(id);
            if (d) d.open = true;
          });
          var kept = place && document.getElementById(place.id);
          if (kept) window.scrollBy(0, kept.getBoundingClientRect().top - place.top);
          tick();
          if (since !== null) markChanged(since);
          seeNow(main);
          var version = fresh.getAttribute("data-version");
          var arrived = Array.prototype.filter.call(
            document.querySelectorAll("#memory article.record[data-version]"),
            function (record) { return Number(record.getAttribute("data-version")) > before; }
          );
          tell(arrived, version);
          announce("Memory updated: version " + version + ".");
          if (fresh.getAttribute("data-state") === "purged") stopped = true;
        });
    }

    // A notice fixed at the bottom of the window, where the owner is reading: what the agent
    // changed, with a way to it, or a button (while the owner types) to show it.
    function notice(id, text) {
      var old = document.getElementById("updates");
      if (old) old.remove();
      var note = document.createElement("div");
      note.id = "updates";
      note.className = "notice floating " + id;
      note.setAttribute("role", "status");
      var words = document.createElement("span");
      words.textContent = text;
      note.appendChild(words);
      var close = document.createElement("button");
      close.type = "button";
      close.className = "quiet";
      close.textContent = "Dismiss";
      close.addEventListener("click", function () { note.remove(); });
      document.body.appendChild(note);
      return { box: note, close: close };
    }

    function tell(arrived, version) {
      var here = arrived.length === 1 ? "1 note on this page changed" :
        arrived.length + " notes on this page changed";
      var shown = notice("updated", "Memory updated to version " + version + ": " +
        (arrived.length ? here + "." : "nothing on this page changed."));
      if (arrived.length) {
        var go = document.createElement("a");
        go.href = "#" + arrived[0].id;
        go.textContent = "Show " + (arrived.length === 1 ? "it" : "the first");
        shown.box.appendChild(go);
      }
      shown.box.appendChild(shown.close);
    }

    function offer() {
      if (document.querySelector("#updates.stale")) return;
      var shown = notice("stale", "The agent changed its memory while you were typing.");
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = "Show the new memory";
      button.addEventListener("click", function () { shown.box.remove(); swap(); });
      shown.box.appendChild(button);
      shown.box.appendChild(shown.close);
    }

    function refresh() {
      if (stopped) return;
      if (busy) {
        again = true;
        return;
      }
      busy = true;
      fetch(main.getAttribute("data-state-url"), {
        cache: "no-store",
        headers: { accept: "application/json" },
      })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (state) {
          if (!state) return null;
          var box = memory();
          if (String(state.version) === box.getAttribute("data-version") &&
              state.state === box.getAttribute("data-state")) return null;
          if (editing()) {
            offer();
            return null;
          }
          return swap();
        })
        .catch(function () { /* offline for a moment: the next poll tries again */ })
        .then(function () {
          busy = false;
          if (again) {
            again = false;
            refresh();
          }
        });
    }

    if (memory().getAttribute("data-state") === "purged") return;
    if ("EventSource" in window && main.getAttribute("data-events-url")) {
      var events = new EventSource(main.getAttribute("data-events-url"));
      events.addEventListener("memory-card", refresh);
    }
    setInterval(refresh, 5000);
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) refresh();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    tick();
    setInterval(tick, 1000);
    document.addEventListener("toggle", loadHistory, true);
    // A notice the server fixed at the bottom of the window can be put away.
    document.querySelectorAll(".notice.floating").forEach(function (note) {
      var close = document.createElement("button");
      close.type = "button";
      close.className = "quiet";
      close.textContent = "Dismiss";
      close.addEventListener("click", function () { note.remove(); });
      note.appendChild(close);
    });
    follow();
    window.addEventListener("hashchange", follow);
    var main = document.querySelector("main[data-notebook]");
    if (main && document.getElementById("memory")) {
      var since = lastSeen(main);
      if (since === null) since = Number(document.getElementById("memory").getAttribute("data-version"));
      markChanged(since);
      seeNow(main);
      live(main, since);
    }
  });
})();
