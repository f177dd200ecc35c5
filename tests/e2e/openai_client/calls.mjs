// The official `openai` client against agentbox's /v1, as an OpenAI-compatible tool would call
// it: each case is one call; what the client made of the answer (its error class, status, code,
// type and message, or the content) is printed as one JSON line for the pytest test to judge.
// Usage: node calls.mjs BASE_URL API_KEY USER
import OpenAI from "openai";

const [base, key, user] = process.argv.slice(2);
const client = (apiKey) =>
  new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, defaultHeaders: { "X-OpenWebUI-User-Id": user } });
const one = [{ role: "user", content: "say hello from the official client" }];

const cases = {
  models: () => client(key).models.list(),
  answer: () => client(key).chat.completions.create({ model: "claude-code", messages: one }),
  streamed: async () => {
    const stream = await client(key).chat.completions.create({ model: "claude-code", messages: one, stream: true });
    let content = "";
    for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? "";
    return { content };
  },
  empty_messages: () => client(key).chat.completions.create({ model: "claude-code", messages: [] }),
  unknown_model: () => client(key).chat.completions.create({ model: "gpt-9", messages: one }),
  bad_key: () => client("not-the-key").chat.completions.create({ model: "claude-code", messages: one }),
};

for (const [name, call] of Object.entries(cases)) {
  try {
    const r = await call();
    const data = r.data ? r.data.map((m) => m.id) : undefined;
    const content = r.choices ? r.choices[0].message.content : r.content;
    console.log(JSON.stringify({ name, ok: true, data, content }));
  } catch (e) {
    console.log(JSON.stringify({
      name, ok: false, class: e.constructor.name, api_error: e instanceof OpenAI.APIError,
      status: e.status, code: e.code, type: e.type, message: e.message,
    }));
  }
}
