// The counting hello server (README.md) on Node.js's http module.
"use strict";
const http = require("http");

const MOD = 2147483647;
let count = 0;
let hash = 0;

const port = Number(process.argv[2]);
const server = http.createServer((req, res) => {
  let status = 200;
  let body;
  const m = /^\/r\/([0-9]{1,6})$/.exec(req.url);
  if (m) {
    const k = Number(m[1]);
    count += 1;
    // hash < 2^31 and the factor < 2^20: exact in a double.
    hash = (hash * 1000003 + k) % MOD;
    body = `hello ${k} #${count}\n`;
  } else if (req.url === "/sum") {
    body = `count ${count} hash ${hash}\n`;
  } else if (req.url === "/quit") {
    body = "bye\n";
  } else {
    status = 404;
    body = "not found\n";
  }
  res.writeHead(status, {
    "Content-Type": "text/plain",
    "Content-Length": Buffer.byteLength(body),
  });
  res.end(body, () => {
    if (req.url === "/quit") process.exit(0);
  });
});
server.listen(port, "127.0.0.1", () => console.log(`listening on ${port}`));
