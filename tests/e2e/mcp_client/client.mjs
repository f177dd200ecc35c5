// tests/e2e/test_mcp.py's MCP client: the official TypeScript SDK (v1, protocol 2025-11-25) over
// Streamable HTTP against agentbox's /mcp, and Ajv (strict, JSON Schema 2020-12) for the tool
// schemas. One scenario per run; prints one JSON object (what the test asserts) on stdout.
//
//   node client.mjs URL KEY SCENARIO USER [USER2]
//     tour       initialize, list (schemas compiled), run, write+read, grep, progress, errors,
//                then DELETE the session and call again
//     isolation  USER writes a file; USER2 tries to reach it through every tool
//     connect    only initialize (a bad key: the error)
//     default_wait  run_command without wait: the output of a short command, not "running"
//     resources  the user's files as file:// resources (list pages, templates, read), USER2 kept out
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import Ajv2020 from "ajv/dist/2020.js";

import { resources, text } from "./shared.mjs";

const [url, key, scenario, user, user2] = process.argv.slice(2);

async function connect(who, chat) {
  const headers = { Authorization: `Bearer ${key}`, "X-User-Id": who };
  if (chat) headers["X-Session-Id"] = chat;
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } });
  const client = new Client({ name: "agentbox-e2e", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

const call = (client, name, args, options) => client.callTool({ name, arguments: args }, undefined, options);
async function failure(promise) {
  try {
    const r = await promise;
    return { ok: true, result: r };
  } catch (e) {
    return { ok: false, code: e.code ?? null, message: String(e.message || e) };
  }
}

async function tour() {
  const out = {};
  const { client, transport } = await connect(user, "chat-tour");
  out.server = client.getServerVersion();
  out.protocol = transport.protocolVersion ?? null;
  out.session = transport.sessionId;
  const { tools } = await client.listTools();
  out.tools = {};
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  for (const t of tools) {
    let compiled = null;
    try {
      ajv.compile(t.inputSchema);
    } catch (e) {
      compiled = String(e.message || e);
    }
    out.tools[t.name] = { description: t.description, schema: t.inputSchema, compile_error: compiled };
  }
  // A schema that requires what the REST route requires refuses an empty call.
  const runValidate = ajv.compile(tools.find((t) => t.name === "run_command").inputSchema);
  out.run_command_accepts_empty = runValidate({});

  const echo = await call(client, "run_command", { command: "echo one; pwd", wait: 10 });
  out.echo = { isError: echo.isError ?? false, structured: echo.structuredContent, text: text(echo) };

  const wrote = await call(client, "write_file", { path: "notes/hello.txt", content: "hello mcp\nsecond line\n" });
  out.write = { isError: wrote.isError ?? false, text: text(wrote) };
  const read = await call(client, "read_file", { path: "notes/hello.txt" });
  out.read = { isError: read.isError ?? false, structured: read.structuredContent, text: text(read) };
  const grep = await call(client, "grep_search", { query: "second", path: "notes" });
  out.grep = { isError: grep.isError ?? false, structured: grep.structuredContent };

  const progress = [];
  const long = await call(
    client,
    "run_command",
    { command: "for i in 1 2 3; do echo tick$i; sleep 1; done", wait: 30 },
    { onprogress: (p) => progress.push(p), timeout: 60000 },
  );
  out.long = { structured: long.structuredContent, progress };

  const limited = await call(client, "run_command", { command: "sleep 30", wait: 1 }, { onprogress: () => {} });
  out.limited = { structured: limited.structuredContent };
  if (limited.structuredContent?.id)
    await call(client, "kill_process", { id: limited.structuredContent.id, force: true });

  const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
  await call(client, "run_command", { command: `echo ${png} | base64 -d > dot.png`, wait: 10 });
  const image = await call(client, "read_file", { path: "dot.png" });
  out.image = { isError: image.isError ?? false, content: image.content, sent: png };

  const missing = await call(client, "read_file", { path: "no/such/file.txt" });
  out.missing = { isError: missing.isError ?? false, text: text(missing) };
  out.unknown_tool = await failure(call(client, "no_such_tool", {}));

  // DELETE ends it; a client that resumes it by its id (as after a reconnect) is refused.
  const ended = transport.sessionId;
  await transport.terminateSession();
  await client.close();
  const resumed = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    sessionId: ended,
    requestInit: { headers: { Authorization: `Bearer ${key}`, "X-User-Id": user } },
  });
  const again = new Client({ name: "agentbox-e2e", version: "1.0.0" });
  out.after_delete = await failure(again.connect(resumed).then(() => call(again, "run_command", { command: "echo again" })));
  out.after_delete.sent_session = resumed.sessionId === ended;
  await again.close();
  return out;
}

async function isolation() {
  const out = {};
  const alice = await connect(user);
  await call(alice.client, "write_file", { path: "secret/alice.txt", content: "alice-secret-42\n" });
  const where = await call(alice.client, "run_command", { command: "readlink -f secret/alice.txt", wait: 10 });
  const path = (where.structuredContent?.output ?? []).map((c) => c.data).join("").trim();
  out.alice_path = path;
  out.alice_reads = text(await call(alice.client, "read_file", { path: "secret/alice.txt" }));
  const bob = await connect(user2);
  const attempts = {
    read_file: await call(bob.client, "read_file", { path }),
    list_files: await call(bob.client, "list_files", { directory: path.replace(/\/alice\.txt$/, "") }),
    grep_search: await call(bob.client, "grep_search", { query: "alice-secret", path: path.replace(/\/secret\/alice\.txt$/, "") }),
    glob_search: await call(bob.client, "glob_search", { pattern: "**/alice.txt", path: path.replace(/\/secret\/alice\.txt$/, "") }),
    display_file: await call(bob.client, "display_file", { path }),
    run_command: await call(bob.client, "run_command", { command: `cat ${path}; ls ${path}`, wait: 10 }),
    bob_grep_home: await call(bob.client, "grep_search", { query: "alice-secret", path: "." }),
  };
  out.bob = Object.fromEntries(Object.entries(attempts).map(([k, r]) => [k, { isError: r.isError ?? false, text: text(r) }]));
  out.alice_session = alice.transport.sessionId;
  await alice.client.close();
  await bob.client.close();
  return out;
}

async function connectOnly() {
  return failure(connect(user).then(({ client }) => client.close()));
}

// run_command without wait: answered when a short command ends (the MCP default), with or
// without progress; wait 0 still answers at once (the control).
async function defaultWait() {
  const out = {};
  const { client } = await connect(user);
  const { tools } = await client.listTools();
  out.wait_schema = tools.find((t) => t.name === "run_command").inputSchema.properties.wait;
  const started = Date.now();
  const plain = await call(client, "run_command", { command: "sleep 2; echo late-plain" });
  out.plain = { structured: plain.structuredContent, seconds: (Date.now() - started) / 1000 };
  const progress = [];
  const polled = await call(
    client,
    "run_command",
    { command: "sleep 2; echo late-polled" },
    { onprogress: (p) => progress.push(p), timeout: 60000 },
  );
  out.polled = { structured: polled.structuredContent, progress };
  const now = await call(client, "run_command", { command: "sleep 2; echo late-now", wait: 0 });
  out.now = { structured: now.structuredContent };
  if (now.structuredContent?.id) await call(client, "kill_process", { id: now.structuredContent.id, force: true });
  await client.close();
  return out;
}

const scenarios = {
  tour,
  isolation,
  connect: connectOnly,
  default_wait: defaultWait,
  resources: () => resources({ connect, call, failure }, user, user2),
};
const result = await scenarios[scenario]();
process.stdout.write(JSON.stringify(result) + "\n");
process.exit(0);
