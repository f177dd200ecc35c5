// What client.mjs (v1 SDK) and client2.mjs (v2 client) both do, the same way through either: a
// tool result's text, and the resources scenario. Each passes its own connect, call and failure
// (they differ in how the SDK is called and in what an error carries).

export const text = (result) => (result.content || []).map((c) => c.text || "").join("");

// The user's files as resources: every page of the list, the template, a text and a binary
// read, a path outside the home, and USER2 reading USER's file by its URI (USER reads it: the
// control).
export async function resources({ connect, call, failure }, user, user2) {
  const out = {};
  const alice = await connect(user);
  out.capabilities = alice.client.getServerCapabilities()?.resources ?? null;
  await call(alice.client, "write_file", { path: "res/a b.txt", content: "alpha resource\n" });
  await call(alice.client, "run_command", {
    command: "mkdir -p res/many && for i in $(seq 1 130); do echo $i > res/many/f$i.txt; done && printf '\\000\\001\\377' > res/bin.dat",
    wait: 30,
  });
  const names = [];
  const pages = [];
  let cursor;
  do {
    const page = await alice.client.listResources(cursor === undefined ? {} : { cursor });
    pages.push(page.resources.length);
    for (const r of page.resources) names.push({ name: r.name, uri: r.uri, size: r.size });
    cursor = page.nextCursor;
  } while (cursor !== undefined && pages.length < 10);
  out.pages = pages;
  out.resources = names;
  out.templates = (await alice.client.listResourceTemplates()).resourceTemplates;
  const uriOf = (name) => names.find((r) => r.name === name)?.uri;
  out.text = (await alice.client.readResource({ uri: uriOf("res/a b.txt") })).contents;
  out.binary = (await alice.client.readResource({ uri: uriOf("res/bin.dat") })).contents;
  out.outside = await failure(alice.client.readResource({ uri: "file:///etc/passwd" }));
  const bob = await connect(user2);
  out.bob_reads_alice = await failure(bob.client.readResource({ uri: uriOf("res/a b.txt") }));
  out.bob_lists = (await bob.client.listResources()).resources.map((r) => r.uri);
  await alice.client.close();
  await bob.client.close();
  return out;
}
