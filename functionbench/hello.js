// hello_nodejs: the paper's Node.js hello-world function, an HTTP server
// answering a constant on 127.0.0.1:PORT (argv[2], else $PORT, else 8080).
// `GET /quit` answers, then exits.
"use strict";
const http = require("http");

const port = Number(process.argv[2] || process.env.PORT || 8080);
const server = http.createServer((req, res) => {
  const t0 = process.hrtime.bigint();
  const quit = req.url === "/quit";
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const body = quit ? "bye\n" : `hello in ${ms.toFixed(3)} ms\n`;
  res.writeHead(req.url === "/" || quit ? 200 : 404, {
    "Content-Type": "text/plain",
    "Content-Length": Buffer.byteLength(body),
  });
  res.end(body);
  if (quit) server.close(() => process.exit(0));
});
server.listen(port, "127.0.0.1", () => console.log(`listening on ${port}`));
