// The games list. Every string from the feed goes in with textContent: a name is text, never markup.
"use strict";
async function refresh() {
  const games = await (await fetch("/api/games")).json();
  const body = document.querySelector("#games tbody");
  body.replaceChildren(...games.map((g) => {
    const tr = document.createElement("tr");
    for (const v of [g.event, g.white, g.black, g.moves, g.result || "live"]) {
      const td = document.createElement("td");
      td.textContent = String(v);
      tr.append(td);
    }
    const td = document.createElement("td");
    const a = document.createElement("a");
    a.href = "/overlay/" + encodeURIComponent(g.game_id);
    a.textContent = "overlay";
    td.append(a);
    tr.append(td);
    return tr;
  }));
}
refresh();
setInterval(refresh, 5000);
