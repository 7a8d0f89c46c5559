/* glmcot trace page: draws a question's events (the /v1/ask SSE stream, or the JSON a static page
 * embeds). Every string from the trace is untrusted (LLM replies, node texts, the question): it is
 * only ever set as text (textContent, text nodes, canvas labels), never parsed as HTML. */
(function () {
  "use strict";

  var MAX_TEXT = 20000;          // characters of one text shown (the rest is counted, not drawn)
  var LEVEL_NAMES = { "1": "P1 instructions", "2": "P2 notebook", "3": "P3 shared", "4": "P4 transient" };

  function $(id) { return document.getElementById(id); }

  function clip(value) {
    var text = value === null || value === undefined ? "" : String(value);
    if (text.length <= MAX_TEXT) return text;
    return text.slice(0, MAX_TEXT) + "\n... (" + (text.length - MAX_TEXT) + " more characters)";
  }

  /* el("div", {class: "x", title: "t"}, child...): strings become text nodes */
  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      for (var key in attrs) {
        if (!Object.prototype.hasOwnProperty.call(attrs, key) || attrs[key] === undefined) continue;
        if (key === "style") { for (var s in attrs.style) node.style[s] = attrs.style[s]; }
        else node.setAttribute(key, String(attrs[key]));
      }
    }
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(typeof child === "object" ? child : document.createTextNode(clip(child)));
    }
    return node;
  }

  function stepColour(step) {
    var s = Number(step) || 0;
    return "hsl(" + ((s * 67 + 210) % 360) + ", 62%, 48%)";
  }

  function fmt(seconds) { return typeof seconds === "number" ? seconds.toFixed(3) + " s" : "-"; }

  function View() {
    this.calls = [];            // {data, row, bars}
    this.maxPrompt = 1;
    this.nodes = {};            // id -> {id, label, step, retrieved, visited, chunk}
    this.edges = {};            // "src|rel|dst" -> {source, target, relation, step}
    this.nodeCount = 0;
    this.edgeCount = 0;
    this.lastMissing = null;
    this.lastOutput = null;
    this.chunkTexts = {};
    this.notebookItems = 0;
    this.scratch = 0;
    this.pipes = {};
    this.cy = null;
    this.graphDirty = false;
    this.done = false;
  }

  View.prototype.reset = function () {
    View.call(this);
    ["calls", "notebook", "scratchpad", "answer", "failure", "asked", "totals", "policy", "graph-count",
     "notebook-count", "scratchpad-count"].forEach(function (id) { $(id).textContent = ""; });
    $("pipeline").textContent = "";
    $("pipeline").appendChild(el("span", { class: "note" }, "no RetrieveNode line seen while decoding yet"));
    $("node-info").textContent = "";
    $("node-info").appendChild(el("span", { class: "note" }, "click a node to see its vertex chunk"));
    if (window.glmcotCy) { window.glmcotCy.destroy(); window.glmcotCy = null; }
    $("cy").style.display = "";
    document.body.removeAttribute("data-done");
  };

  View.prototype.ingest = function (name, data) {
    data = data || {};
    switch (name) {
      case "start": return this.onStart(data);
      case "llm": case "thought": case "action": return this.onCall(name, data);
      case "missing": this.lastMissing = data.missing; return this.onDecision(data);
      case "reasoning": return this.onDecision(data);
      case "retrieval": return this.onSnippet(data);
      case "prefetch": return this.onPrefetch(data);
      case "notebook": return this.onNotebook(data);
      case "step": return this.onGraphCoTStep(data);
      case "agent-error": return this.onError(data);
      case "answer": return this.onAnswer(data);
      case "result": return this.onResult(data);
      case "error": return this.onServerError(data);
      default: return null;   // classification, config, snippet (its code comes with retrieval)
    }
  };

  View.prototype.onStart = function (data) {
    if (data.question) $("asked").textContent = clip(data.question);
    var policy = String(data.policy || "");
    var words = [data.method ? "method " + data.method : "", data.graph ? "graph " + data.graph : "",
                 policy ? "backend " + policy : ""].filter(Boolean).join(" · ");
    if (/scripted/i.test(policy)) words += " · the scripted policy measures the system, never model accuracy";
    $("policy").textContent = words;
  };

  View.prototype.levelsOf = function (data) {
    /* [{level, tokens, cached}] from the backend's per-level counts, or estimated: the call's
       tokens shared out by characters per level (marked estimated) */
    var levels = data.levels || {};
    var keys = Object.keys(levels).sort();
    var prompt = Number(data.prompt_tokens) || 0;
    var cached = Number(data.cached_tokens) || 0;
    var measured = keys.length > 0 && keys.every(function (k) { return typeof levels[k].prompt === "number"; });
    if (measured) return { measured: true, parts: keys.map(function (k) {
      return { level: k, tokens: levels[k].prompt, cached: levels[k].cached || 0 }; }) };
    var chars = keys.reduce(function (sum, k) { return sum + (levels[k].chars || 0); }, 0) || 1;
    return { measured: false, parts: keys.map(function (k) {
      return { level: k, tokens: prompt * (levels[k].chars || 0) / chars, cached: null }; }), cached: cached };
  };

  View.prototype.onCall = function (name, data) {
    var prompt = Number(data.prompt_tokens) || 0;
    var cached = Number(data.cached_tokens) || 0;
    var output = Number(data.output_tokens) || 0;
    var levels = this.levelsOf(data);
    var attempt = Number(data.attempt) || 0;
    var label = String(data.agent || name);
    var head = el("div", { class: "head" },
      el("span", { class: "agent", style: { color: stepColour(data.step) } }, label),
      el("span", { class: "nums" }, "step " + (data.step === null || data.step === undefined ? "-" : data.step)
        + (attempt ? " (repair " + attempt + ")" : "") + " · " + fmt(data.latency_s) + " · prompt "
        + prompt + " (" + cached + " cached, " + (prompt - cached) + " computed) · generated " + output));
    var cacheBar = el("div", { class: "bar cache-bar", title: "prompt tokens: cached / computed" });
    var cachedSeg = el("div", { class: "seg cached" });
    var computedSeg = el("div", { class: "seg computed" });
    var outputSeg = el("div", { class: "seg output" });
    cacheBar.appendChild(cachedSeg); cacheBar.appendChild(computedSeg); cacheBar.appendChild(outputSeg);
    var levelBar = el("div", { class: "bar levels" });
    var levelSegs = [];
    levels.parts.forEach(function (part) {
      var name = LEVEL_NAMES[part.level] || "P" + part.level;
      if (part.cached === null) {   // estimated: the level's share of the prompt only
        var seg = el("div", { class: "seg l" + part.level, title: name + ": about " + Math.round(part.tokens)
          + " tokens (estimated from characters)" });
        levelBar.appendChild(seg);
        levelSegs.push({ seg: seg, tokens: part.tokens });
        return;
      }
      // measured by the engine: the level's cached tokens solid, its computed ones faded
      var hit = el("div", { class: "seg l" + part.level, "data-level": part.level, "data-cached": part.cached,
        title: name + ": " + part.cached + " of " + part.tokens + " tokens cached" });
      var miss = el("div", { class: "seg computed-part l" + part.level, "data-level": part.level,
        title: name + ": " + (part.tokens - part.cached) + " of " + part.tokens + " tokens computed" });
      levelBar.appendChild(hit); levelBar.appendChild(miss);
      levelSegs.push({ seg: hit, tokens: part.cached }, { seg: miss, tokens: part.tokens - part.cached });
    });
    if (levels.measured) levelBar.classList.add("measured");
    var row = el("div", { class: "call", "data-agent": label, "data-step": data.step }, head, cacheBar, levelBar);
    if (data.text) row.appendChild(el("div", { class: "reply" }, data.text));
    $("calls").appendChild(row);
    var call = { prompt: prompt, cached: cached, output: output, segs: [cachedSeg, computedSeg, outputSeg],
                 levelSegs: levelSegs, row: row, step: data.step, attempt: attempt, agent: label };
    this.calls.push(call);
    if (prompt + output > this.maxPrompt) {
      this.maxPrompt = prompt + output;
      for (var i = 0; i < this.calls.length; i++) this.scale(this.calls[i]);
    } else this.scale(call);
    return call;
  };

  View.prototype.scale = function (call) {
    var max = this.maxPrompt;
    function pct(n) { return (100 * n / max).toFixed(2) + "%"; }
    call.segs[0].style.width = pct(call.cached);
    call.segs[1].style.width = pct(Math.max(0, call.prompt - call.cached));
    call.segs[2].style.width = pct(call.output);
    call.levelSegs.forEach(function (part) { part.seg.style.width = pct(part.tokens); });
  };

  View.prototype.lastCall = function (agent, step, attempt) {
    for (var i = this.calls.length - 1; i >= 0; i--) {
      var call = this.calls[i];
      if ((!agent || call.agent === agent) && (step === undefined || call.step === step)
          && (attempt === undefined || call.attempt === attempt)) return call;
    }
    return null;
  };

  View.prototype.onDecision = function (data) {
    var call = this.lastCall("reason", data.step, data.attempt);
    if (!call) return;
    var text = data.missing !== undefined && data.missing !== null ? "missing: " + data.missing
      : "answer: " + data.answer;
    call.row.appendChild(el("div", { class: "snippet" }, el("span", { class: "label" }, "R-Agent decided "), text));
  };

  View.prototype.onSnippet = function (data) {
    var result = data.result || {};
    var call = this.lastCall("act", data.step, data.attempt) || this.lastCall(null);
    var ok = !!result.ok;
    var error = result.error || {};
    var box = el("div", { class: "snippet" + (ok ? "" : " error"), "data-step": data.step },
      el("div", { class: "label" }, (data.attempt ? "repair " + data.attempt + ": " : "") + "snippet (step "
        + data.step + ")" + (result.calls !== undefined ? " · " + result.calls + " primitive calls · "
        + fmt(result.seconds) : "")));
    if (data.code) box.appendChild(el("pre", { class: "code" }, data.code));
    else box.appendChild(el("div", { class: "note" }, "the reply held no code"));
    if (ok) box.appendChild(el("div", null, el("span", { class: "label" }, "output "), el("pre", { class: "output" },
      result.output || "(printed nothing)")));
    else box.appendChild(el("div", { class: "failure" }, "error (" + (error.kind || "?") + "): "
      + (error.type || "Error") + (error.line ? " at line " + error.line : "") + ": " + (error.message || "")));
    if (!ok || !(result.output || "").trim()) box.appendChild(el("div", { class: "repair" },
      "the A-Agent is asked again with this error, if retries remain"));
    (call ? call.row : $("calls")).appendChild(box);
    this.lastOutput = result.output || "";
    var texts = result.chunk_texts || {};
    for (var key in texts) this.chunkTexts[key] = texts[key];
    this.addWalk(data.step, result);
  };

  View.prototype.addNode = function (id, step, label) {
    var node = this.nodes[id];
    if (!node) {
      node = this.nodes[id] = { id: id, label: label || "", step: step, retrieved: false, visited: false };
      this.nodeCount++;
    } else if (label && !node.label) node.label = label;
    return node;
  };

  View.prototype.addWalk = function (step, result) {
    var labels = result.labels || {};
    var self = this;
    (result.retrieved || []).forEach(function (pair) {
      var node = self.addNode(String(pair[1]), step, labels[pair[1]]);
      node.retrieved = true;
      node.query = String(pair[0]);
    });
    (result.touched || []).forEach(function (id) { self.addNode(String(id), step, labels[id]).visited = true; });
    (result.follows || []).forEach(function (follow) {
      var source = String(follow[0]), relation = String(follow[1]);
      self.addNode(source, step, labels[source]).visited = true;
      (follow[2] || []).forEach(function (target) {
        target = String(target);
        self.addNode(target, step, labels[target]);
        var key = source + "|" + relation + "|" + target;
        if (!self.edges[key]) {
          self.edges[key] = { source: source, target: target, relation: relation, step: step };
          self.edgeCount++;
        }
      });
    });
    this.graphDirty = true;
    this.scheduleGraph();
  };

  View.prototype.scheduleGraph = function () {
    var self = this;
    if (this.graphTimer) return;
    this.graphTimer = setTimeout(function () { self.graphTimer = null; self.drawGraph(); }, this.done ? 0 : 50);
  };

  View.prototype.drawGraph = function () {
    if (!this.graphDirty) return;
    this.graphDirty = false;
    $("graph-count").textContent = this.nodeCount + " nodes · " + this.edgeCount + " relations followed";
    var legend = $("legend");
    legend.textContent = "";
    var steps = {};
    var elements = [];
    for (var id in this.nodes) {
      var n = this.nodes[id];
      steps[n.step] = true;
      var text = n.label ? n.label : n.id;
      elements.push({ group: "nodes", data: { id: n.id, label: text.length > 40 ? text.slice(0, 39) + "…" : text,
        colour: stepColour(n.step), step: n.step, kind: n.retrieved ? "retrieved" : n.visited ? "visited" : "seen" } });
    }
    for (var key in this.edges) {
      var e = this.edges[key];
      elements.push({ group: "edges", data: { id: "e" + elements.length, source: e.source, target: e.target,
        label: e.relation, colour: stepColour(e.step) } });
    }
    Object.keys(steps).sort(function (a, b) { return a - b; }).slice(0, 20).forEach(function (step) {
      legend.appendChild(el("span", { class: "swatch", style: { background: stepColour(step) } }));
      legend.appendChild(document.createTextNode("step " + step));
    });
    legend.appendChild(document.createTextNode(" · ◆ retrieved (RetrieveNode) · ● visited · ○ returned only"));
    if (typeof window.cytoscape !== "function") {
      $("cy").textContent = "the graph library did not load";
      return;
    }
    var count = this.nodeCount;
    // Small subgraphs get a force layout; large ones one cluster per step around a circle, in
    // step order (linear time), so a 500-node walk draws at once.
    var layout = { name: "cose", animate: false, randomize: false, nodeRepulsion: 8000, numIter: 600 };
    if (count > 80) {
      var groups = {};
      elements.forEach(function (item) {
        if (item.group === "nodes") (groups[item.data.step] = groups[item.data.step] || []).push(item);
      });
      var keys = Object.keys(groups).sort(function (a, b) { return a - b; });
      var widest = Math.max.apply(null, keys.map(function (k) { return 9 * Math.sqrt(groups[k].length + 1); }));
      var ring = Math.max(60, keys.length * 2.2 * widest / (2 * Math.PI));
      keys.forEach(function (key, k) {
        var angle = 2 * Math.PI * k / keys.length - Math.PI / 2;
        var cx = keys.length > 1 ? ring * Math.cos(angle) : 0, cy0 = keys.length > 1 ? ring * Math.sin(angle) : 0;
        groups[key].forEach(function (item, i) {
          var radius = 9 * Math.sqrt(i), turn = i * 2.39996;
          item.position = { x: cx + radius * Math.cos(turn), y: cy0 + radius * Math.sin(turn) };
        });
      });
      layout = { name: "preset", fit: true, padding: 10 };
    }
    if (window.glmcotCy) window.glmcotCy.destroy();
    var self = this;
    var big = count > 150;
    var cy = window.glmcotCy = window.cytoscape({
      container: $("cy"), elements: elements, layout: layout,
      textureOnViewport: big, hideEdgesOnViewport: big,
      style: [
        { selector: "node", style: { "background-color": "data(colour)", "label": big ? "" : "data(label)",
          "font-size": 9, "text-valign": "bottom", "text-margin-y": 2, "width": 14, "height": 14,
          "text-wrap": "ellipsis", "text-max-width": 120 } },
        { selector: "node[kind = 'retrieved']", style: { "shape": "diamond", "width": 20, "height": 20,
          "border-width": 2, "border-color": "#1d2330" } },
        { selector: "node[kind = 'seen']", style: { "background-opacity": 0.25, "border-width": 1.5,
          "border-color": "data(colour)" } },
        { selector: "node:selected", style: { "border-width": 3, "border-color": "#000" } },
        { selector: "edge", style: { "width": 1.2, "line-color": "data(colour)", "target-arrow-color": "data(colour)",
          "target-arrow-shape": "triangle", "curve-style": big ? "haystack" : "bezier", "label": this.edgeCount > 12 ? "" : "data(label)",
          "font-size": 7, "color": "#555", "text-rotation": "autorotate" } }
      ]
    });
    if (cy.zoom() > 1.3) { cy.zoom(1.3); cy.center(); }   // a few nodes: keep the labels readable
    cy.on("tap", "node", function (event) { self.showNode(event.target.id()); });
    cy.on("tap", "edge", function (event) {
      var edge = event.target, box = $("node-info");
      box.textContent = "";
      box.appendChild(el("div", null, "relation followed: ", el("b", null, edge.data("label")), " from "
        + (self.nodes[edge.data("source")].label || edge.data("source")) + " to "
        + (self.nodes[edge.data("target")].label || edge.data("target"))));
    });
  };

  View.prototype.showNode = function (id) {
    var node = this.nodes[id];
    var box = $("node-info");
    box.textContent = "";
    if (!node) return;
    box.appendChild(el("div", null, el("b", null, node.label || node.id), " · id " + node.id + " · step " + node.step
      + " · " + (node.retrieved ? "retrieved for \u201c" + (node.query || "") + "\u201d" : node.visited ? "visited" : "returned by a relation")));
    var chunk = this.chunkTexts[id];
    box.appendChild(chunk ? el("pre", { class: "chunk" }, chunk)
      : el("div", { class: "note" }, "no vertex chunk of this node went into the notebook (snippets add the first few nodes they touch)"));
  };

  View.prototype.onPrefetch = function (data) {
    var key = data.step + "/" + data.attempt;
    var box = $("pipeline");
    if (!Object.keys(this.pipes).length) box.textContent = "";
    var pipe = this.pipes[key];
    if (!pipe) {
      pipe = this.pipes[key] = { items: [], node: el("div", { class: "pipe" }) };
      box.appendChild(pipe.node);
    }
    pipe.items.push(data);
    this.drawPipe(pipe, data.step, data.attempt);
  };

  View.prototype.drawPipe = function (pipe, step, attempt) {
    var end = 0;
    pipe.items.forEach(function (item) {
      end = Math.max(end, item.decode_end_s || 0, item.search_end_s || 0, item.seen_s || 0);
    });
    end = end || 1;
    function pct(s) { return (100 * (s || 0) / end).toFixed(2) + "%"; }
    pipe.node.textContent = "";
    pipe.node.appendChild(el("div", { class: "label" }, "A-Agent step " + step + (attempt ? " (repair " + attempt + ")" : "")
      + ": decoding ended at " + fmt(pipe.items[0].decode_end_s)));
    pipe.items.forEach(function (item) {
      var track = el("div", { class: "track" });
      track.appendChild(el("div", { class: "decode", style: { left: "0", width: pct(item.decode_end_s) } }));
      if (item.search_start_s !== null && item.search_start_s !== undefined) {
        var stop = item.search_end_s === null || item.search_end_s === undefined ? end : item.search_end_s;
        track.appendChild(el("div", { class: "search", style: { left: pct(item.search_start_s),
          width: pct(Math.max(0, stop - item.search_start_s)) }, title: "search " + fmt(item.search_start_s) + " to " + fmt(item.search_end_s) }));
      }
      track.appendChild(el("div", { class: "seen", style: { left: pct(item.seen_s) }, title: "line seen at " + fmt(item.seen_s) }));
      pipe.node.appendChild(el("div", { class: "label" }, "RetrieveNode(\u201c" + item.text + "\u201d): seen " + fmt(item.seen_s)
        + ", " + (item.source === "search" ? "search " + fmt(item.search_start_s) + " to " + fmt(item.search_end_s)
          : item.source === "cache" ? "answered by the cache" : String(item.source))));
      pipe.node.appendChild(track);
    });
  };

  View.prototype.onNotebook = function (data) {
    var list = $("notebook");
    var self = this;
    (data.added || []).forEach(function (key) {
      key = String(key);
      self.notebookItems++;
      if (key === "fact") {
        list.appendChild(el("li", null, el("span", { class: "kind fact" }, "fact"),
          (self.lastMissing ? self.lastMissing + ": " : ""), el("pre", null, self.lastOutput || "")));
      } else {
        var id = key.replace(/^vertex:/, "").replace(/@[^@]*$/, "");
        var chunk = self.chunkTexts[id];
        list.appendChild(el("li", null, el("span", { class: "kind" }, "vertex chunk"), id,
          chunk ? el("pre", null, chunk) : null));
      }
    });
    $("notebook-count").textContent = this.notebookItems + " entries";
  };

  View.prototype.onGraphCoTStep = function (data) {
    this.scratch++;
    $("scratchpad").appendChild(el("li", null, el("div", null, el("b", null, "Thought: "), data.thought || ""),
      el("div", null, el("b", null, "Action: "), data.action || ""),
      el("pre", null, "Observation: " + (data.observation === null || data.observation === undefined ? "(none)" : data.observation))));
    var call = this.lastCall(null);
    $("scratchpad-count").textContent = this.scratch + " steps; each step's prompt holds the whole scratchpad again"
      + (call ? " (last call: " + call.prompt + " prompt tokens, " + (call.prompt - call.cached) + " computed)" : "");
  };

  View.prototype.onError = function (data) {
    $("calls").appendChild(el("div", { class: "failure" }, "error " + (data.where || "") + ": " + (data.message || "")));
  };

  View.prototype.onAnswer = function (data) {
    $("answer").textContent = data.answer === null || data.answer === undefined || data.answer === ""
      ? "(no answer)" : clip(data.answer);
    $("failure").textContent = data.failure ? "failure: " + data.failure : "";
  };

  View.prototype.onResult = function (data) {
    this.onAnswer(data);
    if (data.failure && data.failure_detail) $("failure").textContent = "failure: " + data.failure + ": " + clip(data.failure_detail);
    if (data.question && !$("asked").textContent) $("asked").textContent = clip(data.question);
    var usage = data.usage || {};
    var timing = data.timing || {};
    $("totals").textContent = (usage.llm_calls || 0) + " LLM calls · " + (usage.prompt_tokens || 0) + " prompt tokens ("
      + (usage.cached_tokens || 0) + " cached) · " + (usage.output_tokens || 0) + " generated · " + fmt(timing.latency_s);
    this.finish();
  };

  View.prototype.onServerError = function (data) {
    var error = data.error || data;
    $("failure").textContent = "server error: " + (error.message || JSON.stringify(error));
    this.finish();
  };

  View.prototype.finish = function () {
    this.done = true;
    if (this.graphTimer) { clearTimeout(this.graphTimer); this.graphTimer = null; }
    this.drawGraph();
    $("cy").style.display = this.nodeCount ? "" : "none";   // nothing to draw: no empty canvas
    if (!this.nodeCount) $("graph-count").textContent = "0 nodes · 0 relations followed" + (this.scratch
      ? " (Graph-CoT's actions are shown in its scratchpad, not recorded as a subgraph)" : "");
    document.body.setAttribute("data-done", "1");
  };

  View.prototype.nodeCountDrawn = function () { return window.glmcotCy ? window.glmcotCy.nodes().length : 0; };

  /* ---- live: the form, the key, the stream ---------------------------------------------- */

  var KEY = "glmcot-api-key";

  function headers(extra) {
    var out = extra || {};
    var key = sessionStorage.getItem(KEY);
    if (key) out["Authorization"] = "Bearer " + key;
    return out;
  }

  function status(text) { $("status").textContent = text; }

  function loadGraphs() {
    return fetch("/v1/graphs", { headers: headers() }).then(function (response) {
      if (response.status === 401) {
        $("key-box").open = true;
        status("this server needs its API key: enter it under \u201cAPI key\u201d");
        return;
      }
      if (!response.ok) { status("could not list the graphs (HTTP " + response.status + ")"); return; }
      return response.json().then(function (body) {
        var select = $("graph");
        select.textContent = "";
        (body.data || []).forEach(function (graph) {
          select.appendChild(el("option", { value: graph.name }, graph.name
            + (graph.num_nodes ? " (" + graph.num_nodes + " nodes)" : "")));
        });
        status((body.data || []).length ? "ready" : "this server serves no graph");
      });
    }).catch(function (error) { status("could not reach the server: " + error); });
  }

  /* Server-Sent Events over fetch (EventSource cannot send the Authorization header). */
  function readStream(response, onEvent) {
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    function dispatch(block) {
      var name = "message", data = [];
      block.split("\n").forEach(function (line) {
        if (line.indexOf("event:") === 0) name = line.slice(6).trim();
        else if (line.indexOf("data:") === 0) data.push(line.slice(line.charAt(5) === " " ? 6 : 5));
      });
      if (!data.length) return;
      var payload;
      try { payload = JSON.parse(data.join("\n")); } catch (e) { return; }
      onEvent(name, payload);
    }
    function pump() {
      return reader.read().then(function (chunk) {
        if (chunk.done) { if (buffer.trim()) dispatch(buffer); return; }
        buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n/g, "\n");
        var cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          dispatch(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
        }
        return pump();
      });
    }
    return pump();
  }

  function ask(view) {
    var question = $("question").value;
    if (!question.trim()) { status("type a question first"); return; }
    view.reset();
    $("asked").textContent = clip(question);
    $("ask").disabled = true;
    status("asking...");
    var started = performance.now();
    var body = { question: question, method: $("method").value, stream: true };
    if ($("graph").value) body.graph = $("graph").value;
    fetch("/v1/ask", { method: "POST", headers: headers({ "Content-Type": "application/json" }), body: JSON.stringify(body) })
      .then(function (response) {
        if (!response.ok) {
          return response.json().catch(function () { return {}; }).then(function (error) {
            var message = (error.error && error.error.message) || ("HTTP " + response.status);
            if (response.status === 401) { $("key-box").open = true; message += ": enter the server's API key"; }
            view.onServerError({ message: message });
            status("the server refused the question (HTTP " + response.status + ")");
          });
        }
        status("the agents are working...");
        return readStream(response, function (name, payload) {
          view.ingest(name, payload);
          if (name === "result") status("answered in " + ((performance.now() - started) / 1000).toFixed(2) + " s");
        });
      })
      .catch(function (error) { view.onServerError({ message: String(error) }); status("the stream broke off"); })
      .then(function () { $("ask").disabled = false; if (!view.done) view.finish(); });
  }

  function startLive(view) {
    $("save-key").addEventListener("click", function () {
      var key = $("api-key").value.trim();
      if (key) sessionStorage.setItem(KEY, key); else sessionStorage.removeItem(KEY);
      $("api-key").value = "";
      $("key-box").open = false;
      loadGraphs();
    });
    $("ask-form").addEventListener("submit", function (event) { event.preventDefault(); ask(view); });
    loadGraphs();
  }

  function startStatic(view) {
    var holder = $("glmcot-events");
    var events = holder ? JSON.parse(holder.textContent) : [];
    for (var i = 0; i < events.length; i++) view.ingest(events[i][0], events[i][1]);
    if (!view.done) view.finish();
  }

  var view = window.glmcotView = new View();
  if (document.body.getAttribute("data-mode") === "static") startStatic(view); else startLive(view);
  window.glmcotReadyMs = performance.now();
})();
