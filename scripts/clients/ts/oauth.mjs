// The official TypeScript client against agent-mcp as an OAuth 2.1 resource server: with the
// SDK's ClientCredentialsProvider it must discover the authorization server from the 401 alone
// (WWW-Authenticate resource_metadata → RFC 9728 metadata → the issuer's metadata), get a token
// for resource = the server's URL from the real oidc-provider, and complete a task end to end,
// in both eras. Run by scripts/clients.sh (the "typescript-sdk-oauth" suite), which starts the
// provider and a server whose auth.oauth.issuer is it; the environment it sets is read here.
import { Client, ClientCredentialsProvider, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { CLIENT_INFO, ERAS, UUID, assert, check, env, fields, sleep, summary, textOf } from "./lib.mjs";

const url = new URL(env("MCP_URL_OAUTH"));
const issuer = env("OAUTH_ISSUER");

function provider(clientId) {
  return new ClientCredentialsProvider({
    clientId,
    clientSecret: `${clientId}-secret`,
    expectedIssuer: issuer,
  });
}

async function connect(era, authProvider) {
  const client = new Client(CLIENT_INFO, { versionNegotiation: ERAS[era].versionNegotiation });
  const transport = new StreamableHTTPClientTransport(url, authProvider ? { authProvider } : {});
  await client.connect(transport, { timeout: 30_000 });
  return client;
}

async function statusOf(client, taskId) {
  const result = await client.callTool({ name: "agent_status", arguments: { task_id: taskId } });
  assert(!result.isError, `agent_status is a tool error: ${textOf(result)}`);
  return fields(textOf(result));
}

await check("without credentials the server answers 401 with where to get a token", async () => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  assert(response.status === 401, `status ${response.status}`);
  const challenge = response.headers.get("www-authenticate") ?? "";
  assert(challenge.includes('resource_metadata="'), `challenge: ${challenge}`);
  let refused;
  try {
    await connect("2026-07-28", undefined);
  } catch (error) {
    refused = error;
  }
  assert(refused !== undefined, "a client without credentials connected");
});

for (const era of Object.keys(ERAS)) {
  await check(`${era}: ClientCredentialsProvider discovers, gets a token, runs a task to the end`, async () => {
    const auth = provider("client-a");
    const client = await connect(era, auth);
    const tokens = auth.tokens();
    assert(tokens?.access_token, "the provider holds no token after connecting");
    // The token is for this server (RFC 8707) and carries the scopes the 401 asked for.
    const claims = JSON.parse(Buffer.from(tokens.access_token.split(".")[1], "base64url").toString());
    const audiences = [claims.aud].flat();
    assert(audiences.some((a) => a.replace(/\/$/, "") === url.href.replace(/\/$/, "")), `aud ${claims.aud}`);
    assert(claims.iss === issuer, `iss ${claims.iss}`);
    assert(`${claims.scope}`.split(" ").includes("agent:run"), `scope ${claims.scope}`);
    const run = await client.callTool({ name: "agent_run", arguments: { request: `say hello (${era})` } });
    assert(!run.isError, `agent_run is a tool error: ${textOf(run)}`);
    const taskId = fields(textOf(run)).task_id;
    assert(UUID.test(taskId ?? ""), `no task id in ${textOf(run)}`);
    let status;
    for (let i = 0; i < 120; i += 1) {
      status = await statusOf(client, taskId);
      if (["completed", "failed", "cancelled"].includes(status.status)) break;
      await sleep(500);
    }
    assert(status.status === "completed", `ended ${status.status}: ${JSON.stringify(status)}`);
    // Another client of the same authorization server is another caller: it does not see it.
    const other = await connect(era, provider("client-b"));
    // (An unknown task, as the tool contract words it: status failed, "not found".)
    const theirs = fields(textOf(await other.callTool({ name: "agent_status", arguments: { task_id: taskId } })));
    assert(theirs.status === "failed" && /見つかりません/.test(theirs.message ?? ""), `client-b read client-a's task: ${JSON.stringify(theirs)}`);
    await other.close();
    await client.close();
  }, 120_000);
}

summary();
