// tests/e2e/test_mcp_stdio.py's MCP client: the official TypeScript SDK (v1, protocol 2025-11-25)
// over stdio, starting `agentbox mcp` itself as Claude Desktop does. Prints one JSON object (what
// the test asserts) on stdout.
//
//   node stdio.mjs SPEC     SPEC: JSON {command, args, env, tour: bool, commands: [line, ...]}
//     tour      initialize, list tools, run, write+read, a long command with progress, errors
//     commands  each line run with run_command (wait 30): its status, exit code and output
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(process.argv[2]);
const text = (result) => (result.content || []).map((c) => c.text || "").join("");
const call = (client, name, args, options) => client.callTool({ name, arguments: args }, undefined, options);
const output = (r) => (r.structuredContent?.output ?? []).map((c) => c.data).join("");
async function failure(promise) {
  try {
    return { ok: true, result: await promise };
  } catch (e) {
    return { ok: false, code: e.code ?? null, message: String(e.message || e) };
  }
}

const transport = new StdioClientTransport({ command: spec.command, args: spec.args, env: spec.env, stderr: "pipe" });
let stderr = "";
transport.stderr?.on("data", (d) => (stderr += d.toString()));
const client = new Client({ name: "agentbox-e2e-stdio", version: "1.0.0" });
const out = {};
try {
  await client.connect(transport);
  out.server = client.getServerVersion();
  out.pid = transport.pid;
  if (spec.tour) {
    out.tools = (await client.listTools()).tools.map((t) => t.name);
    const echo = await call(client, "run_command", { command: "echo one; pwd; id -un", wait: 10 });
    out.echo = { isError: echo.isError ?? false, structured: echo.structuredContent };
    const wrote = await call(client, "write_file", { path: "notes/hello.txt", content: "hello stdio\n" });
    out.write = { isError: wrote.isError ?? false, text: text(wrote) };
    const read = await call(client, "read_file", { path: "notes/hello.txt" });
    out.read = { isError: read.isError ?? false, structured: read.structuredContent };
    const progress = [];
    const long = await call(
      client,
      "run_command",
      { command: "for i in 1 2 3; do echo tick$i; sleep 1; done", wait: 30 },
      { onprogress: (p) => progress.push(p), timeout: 60000 },
    );
    out.long = { structured: long.structuredContent, progress };
    const missing = await call(client, "read_file", { path: "no/such/file.txt" });
    out.missing = { isError: missing.isError ?? false, text: text(missing) };
    out.unknown_tool = await failure(call(client, "no_such_tool", {}));
  }
  out.commands = [];
  for (const line of spec.commands ?? []) {
    const r = await call(client, "run_command", { command: line, wait: 30 });
    out.commands.push({
      isError: r.isError ?? false,
      status: r.structuredContent?.status,
      exit_code: r.structuredContent?.exit_code,
      output: output(r),
      text: r.structuredContent ? undefined : text(r),
    });
  }
} catch (e) {
  out.error = String(e.stack || e);
}
await client.close();
out.stderr = stderr;
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
