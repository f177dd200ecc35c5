// tests/e2e/test_mcp.py's client of the modern revision (2026-07-28: stateless, server/discover,
// the revision in each request's _meta and MCP-Protocol-Version header): the official v2 client
// `@modelcontextprotocol/client`, pinned to that revision so it cannot fall back to initialize.
// Prints one JSON object on stdout.
//
//   node client2.mjs URL KEY SCENARIO USER [USER2]
//     tour       discover, list (schemas compiled), run, write+read, grep, progress, errors
//     isolation  USER writes a file; USER2 tries to read it, list and grep for it
//     connect    only the discovery (a bad key: the error)
//     resources  the user's files as file:// resources (list pages, templates, read), USER2 kept out
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import Ajv2020 from "ajv/dist/2020.js";

import { resources, text } from "./shared.mjs";

const [url, key, scenario, user, user2] = process.argv.slice(2);
const seen = [];  // what each request carried: the header and whether a session id was sent

async function connect(who) {
  const headers = { Authorization: `Bearer ${key}`, "X-User-Id": who };
  const fetchSpy = async (input, init) => {
    const h = new Headers(init?.headers);
    let meta = null;
    try {
      meta = JSON.parse(init?.body ?? "null")?.params?._meta ?? null;
    } catch {}
    seen.push({ header: h.get("mcp-protocol-version"), session: h.get("mcp-session-id"), meta });
    return fetch(input, init);
  };
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers }, fetch: fetchSpy });
  const client = new Client({ name: "agentbox-e2e", version: "2.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
  await client.connect(transport);
  return { client, transport };
}

const call = (client, name, args, options) => client.callTool({ name, arguments: args }, options);
async function failure(promise) {
  try {
    return { ok: true, result: await promise };
  } catch (e) {
    return { ok: false, code: e.code ?? null, status: e.data?.status ?? e.status ?? null, message: String(e.message || e) };
  }
}

async function tour() {
  const out = {};
  const { client } = await connect(user);
  out.protocol = client.getNegotiatedProtocolVersion();
  out.server = client.getServerVersion() ?? null;
  const { tools } = await client.listTools();
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  out.tools = {};
  for (const t of tools) {
    let error = null;
    try {
      ajv.compile(t.inputSchema);
    } catch (e) {
      error = String(e.message || e);
    }
    out.tools[t.name] = { compile_error: error };
  }
  const echo = await call(client, "run_command", { command: "echo one", wait: 10 });
  out.echo = { isError: echo.isError ?? false, structured: echo.structuredContent };
  await call(client, "write_file", { path: "modern/hello.txt", content: "hello modern\n" });
  const read = await call(client, "read_file", { path: "modern/hello.txt" });
  out.read = { isError: read.isError ?? false, text: text(read) };
  const grep = await call(client, "grep_search", { query: "modern", path: "modern" });
  out.grep = { structured: grep.structuredContent };
  const progress = [];
  const long = await call(client, "run_command", { command: "for i in 1 2 3; do echo tock$i; sleep 1; done", wait: 30 },
    { onprogress: (p) => progress.push(p), timeout: 60000 });
  out.long = { structured: long.structuredContent, progress };
  const missing = await call(client, "read_file", { path: "no/such/file" });
  out.missing = { isError: missing.isError ?? false, text: text(missing) };
  out.unknown_tool = await failure(call(client, "no_such_tool", {}));
  await client.close();
  out.seen = seen;
  return out;
}

async function isolation() {
  const alice = await connect(user);
  await call(alice.client, "write_file", { path: "secret/alice.txt", content: "alice-modern-7\n" });
  const where = await call(alice.client, "run_command", { command: "readlink -f secret/alice.txt", wait: 10 });
  const path = (where.structuredContent?.output ?? []).map((c) => c.data).join("").trim();
  const home = path.replace(/\/secret\/alice\.txt$/, "");
  const bob = await connect(user2);
  const tries = {
    read_file: await call(bob.client, "read_file", { path }),
    list_files: await call(bob.client, "list_files", { directory: `${home}/secret` }),
    grep_search: await call(bob.client, "grep_search", { query: "alice-modern", path: home }),
    run_command: await call(bob.client, "run_command", { command: `cat ${path}`, wait: 10 }),
  };
  const out = { alice_path: path, alice_reads: text(await call(alice.client, "read_file", { path })) };
  out.bob = Object.fromEntries(Object.entries(tries).map(([k, r]) => [k, { isError: r.isError ?? false, text: text(r) }]));
  await alice.client.close();
  await bob.client.close();
  return out;
}

const scenarios = {
  tour,
  isolation,
  connect: () => failure(connect(user).then(({ client }) => client.close())),
  resources: () => resources({ connect, call, failure }, user, user2),
};
process.stdout.write(JSON.stringify(await scenarios[scenario]()) + "\n");
process.exit(0);
