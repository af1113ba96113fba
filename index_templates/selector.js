(function () {
  var data = document.getElementById("kf-builds");
  if (!data) return;
  var rows = JSON.parse(data.textContent);
  var keys = ["torch", "backend", "arch"];
  var picked = {};
  var hash = new URLSearchParams(location.hash.slice(1));
  function uniq(key) {
    var seen = {};
    rows.forEach(function (r) { seen[r[key]] = true; });
    return Object.keys(seen).sort(function (a, b) { return b.localeCompare(a, undefined, {numeric: true}); });
  }
  keys.forEach(function (key) {
    var sel = document.getElementById("sel-" + key);
    [""].concat(uniq(key)).forEach(function (v) {
      var o = document.createElement("option");
      o.value = v; o.textContent = v || "any";
      sel.appendChild(o);
    });
    if (hash.get(key) !== null) sel.value = hash.get(key);
    picked[key] = sel.value;
    sel.addEventListener("change", function () { picked[key] = sel.value; update(); });
  });
  function fits(r) {
    return keys.every(function (k) { return !picked[k] || r[k] === picked[k]; });
  }
  function update() {
    var chosen = rows.filter(fits);
    var shown = {};
    chosen.forEach(function (r) { shown[r.label + " " + r.platform] = true; });
    document.querySelectorAll(".entry").forEach(function (e) {
      var label = e.querySelector("a.label").textContent.replace(/^\+/, "");
      var plat = e.querySelector(".plat").textContent.split(" ")[0];
      var noarch = plat === "any";
      e.hidden = !(noarch || shown[label + " " + plat]);
    });
    var out = document.getElementById("sel-cmds");
    out.textContent = "";
    var all = keys.every(function (k) { return picked[k]; });
    if (!all) {
      out.textContent = chosen.length + " build(s) fit; pick torch, backend and arch for the install commands.";
      return;
    }
    if (!chosen.length) { out.textContent = "No build fits this choice."; return; }
    chosen.forEach(function (r) {
      [r.pip, r.uv].forEach(function (cmd) {
        var div = document.createElement("div"); div.className = "cmd";
        var code = document.createElement("code"); code.textContent = cmd;
        div.appendChild(code); out.appendChild(div);
      });
    });
  }
  update();
})();
