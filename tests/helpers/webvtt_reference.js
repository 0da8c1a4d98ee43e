// The W3C WebVTT parser (npm webvtt-parser) on one file: its cues as JSON, for
// tests/helpers/subtitle_reference.py. Usage: NODE_PATH=.node/node_modules node webvtt_reference.js FILE
"use strict";
const fs = require("fs");
const { WebVTTParser } = require("webvtt-parser");
const entities = require("webvtt-parser/html-entities.json");

function text(nodes) {
  return nodes.map((n) => (n.type === "text" ? n.value : n.children ? text(n.children) : "")).join("");
}

const tree = new WebVTTParser(entities).parse(fs.readFileSync(process.argv[2], "utf8").replace(/^\uFEFF/, ""), "subtitles");
process.stdout.write(
  JSON.stringify({
    cues: tree.cues.map((c) => [c.startTime, c.endTime, text(c.tree.children)]),
    errors: tree.errors.map((e) => e.line),
  }),
);
