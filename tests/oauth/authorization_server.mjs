// A real OAuth 2 authorization server for the tests: oauth2-mock-server (pinned in
// .ci/tools/oauth/) on 127.0.0.1, a port the OS chooses, one RS256 key.
//
//   node authorization_server.mjs <node_modules holding oauth2-mock-server>
//
// Prints `issuer <URL>` once it accepts connections. Then each line on stdin is one JSON
// command, answered by one line on stdout:
//   {"token": {"claims": {...}, "expiresIn": <s>, "kid": "<kid>", "typ": "<typ>"}}
//                                                                  ->  token <JWT>
//       signed by the issuer, `claims` merged over its own and `sub: "tester"` (a null claim is
//       removed), its header's `typ` "at+jwt" (RFC 9068) unless `typ` names another
//   {"rotate": true}                                               ->  kid <new key id>
//       a new key, published in the key set and used by later tokens
//   {"grantsExpireIn": <s>}                                        ->  expiresIn <s>
//       the token endpoint's later answers say `expires_in: <s>`
//   {"grants": true}                                               ->  grants <count>
//       how many tokens the token endpoint has issued
//   {"dropTokenAnswers": <n>}                                      ->  dropping <n>
//       the next <n> token requests get no answer: their connection is closed before they are
//       handled, as by a server closing an idle keep-alive connection the request was written to
//   {"dropping": true}                                             ->  dropping <left>
//       how many of those are left
//   {"resetMetadata": <n>}                                         ->  resetting <n>
//       the next <n> metadata requests (`GET /.well-known/…`) are answered by a TCP reset, as
//       by a server resetting a connection it is closing when the request arrives
//   {"resetting": true}                                            ->  resetting <left>
//       how many of those are left
// The token endpoint honours RFC 8707: a `resource` parameter becomes the token's `aud`; its
// tokens are typed `at+jwt` (RFC 9068 §2.1) and carry a `sub` (RFC 9068 §2.2: the client's id for
// the client credentials grant, which oauth2-mock-server leaves without one). The
// authorization endpoint approves at once (redirecting with a code); the tokens of the
// authorization code and refresh grants carry the scope the last authorization asked for.
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
const { OAuth2Server } = await import(
  pathToFileURL(join(modules, "oauth2-mock-server", "dist", "index.mjs")).href
);

const server = new OAuth2Server();
let key = await server.issuer.keys.generate("RS256");
let grants = 0;
let grantsExpireIn;
server.service.on("beforeResponse", (response) => {
  grants += 1;
  if (grantsExpireIn !== undefined) response.body.expires_in = grantsExpireIn;
});
let authorizedScope;
server.service.on("beforeAuthorizeRedirect", (_redirect, req) => {
  authorizedScope = req.query.scope;
});
// Ahead of every route: a dropped token request is closed before the server handles it, so
// its code stays unused, as when the close of an idle connection crosses the request.
let dropTokenAnswers = 0;
let resetMetadata = 0;
const app = server.service.requestHandler;
const handle = app.handle;
app.handle = function (req, res, next) {
  if (dropTokenAnswers > 0 && req.method === "POST" && req.url.startsWith("/token")) {
    dropTokenAnswers -= 1;
    req.socket.destroy();
    return;
  }
  if (resetMetadata > 0 && req.method === "GET" && req.url.startsWith("/.well-known/")) {
    resetMetadata -= 1;
    req.socket.resetAndDestroy();
    return;
  }
  return handle.call(this, req, res, next);
};
server.service.on("beforeTokenSigning", (token, req) => {
  token.header.typ = "at+jwt";
  if (typeof req.body.resource === "string") {
    token.payload.aud = req.body.resource;
  }
  const grant = req.body.grant_type;
  if (token.payload.sub === undefined) {
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? "");
    const client = basic
      ? decodeURIComponent(Buffer.from(basic[1], "base64").toString().split(":")[0])
      : req.body.client_id;
    token.payload.sub = client ?? "client";
  }
  if ((grant === "authorization_code" || grant === "refresh_token") && req.body.scope === undefined) {
    token.payload.scope = authorizedScope;
  }
});
await server.start(0, "127.0.0.1");
server.issuer.url = `http://127.0.0.1:${server.address().port}`;
console.log(`issuer ${server.issuer.url}`);

for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === "") continue;
  const command = JSON.parse(line);
  if (command.rotate) {
    key = await server.issuer.keys.generate("RS256");
    console.log(`kid ${key.kid}`);
  } else if (command.grantsExpireIn !== undefined) {
    grantsExpireIn = command.grantsExpireIn;
    console.log(`expiresIn ${grantsExpireIn}`);
  } else if (command.dropTokenAnswers !== undefined) {
    dropTokenAnswers = command.dropTokenAnswers;
    console.log(`dropping ${dropTokenAnswers}`);
  } else if (command.dropping) {
    console.log(`dropping ${dropTokenAnswers}`);
  } else if (command.resetMetadata !== undefined) {
    resetMetadata = command.resetMetadata;
    console.log(`resetting ${resetMetadata}`);
  } else if (command.resetting) {
    console.log(`resetting ${resetMetadata}`);
  } else if (command.grants) {
    console.log(`grants ${grants}`);
  } else if (command.token) {
    const { claims = {}, expiresIn, kid = key.kid, typ = "at+jwt" } = command.token;
    const token = await server.issuer.buildToken({
      kid,
      expiresIn,
      scopesOrTransform: (header, payload) => {
        header.typ = typ;
        payload.sub = "tester";
        for (const [name, value] of Object.entries(claims)) {
          if (value === null) delete payload[name];
          else payload[name] = value;
        }
      },
    });
    console.log(`token ${token}`);
  }
}
await server.stop();
