// Drives page.html in Debian's headless Chromium (puppeteer-core) for tests/e2e/test_browser.py.
// Env: PAGE (the page's URL, its own origin), API (the daemon), ALICE_KEY, BOB_KEY, ALICE (her
// user id). Prints one JSON object of what the page saw; the test asserts on it.
import puppeteer from "puppeteer-core";

const { PAGE, API, ALICE_KEY, BOB_KEY, ALICE } = process.env;
const browser = await puppeteer.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],  // root in CI: no user namespace sandbox
  timeout: 20000,
});
const out = { console: [] };
try {
  const page = await browser.newPage();
  page.on("console", (m) => out.console.push(m.text()));
  page.on("pageerror", (e) => out.console.push("pageerror: " + e.message));
  await page.goto(`${PAGE}?api=${encodeURIComponent(API)}`, { waitUntil: "load", timeout: 15000 });
  out.pageOrigin = await page.evaluate(() => location.origin);

  out.files = await page.evaluate((k) => files(k, "hello.txt", "hello from the browser\n"), ALICE_KEY);
  out.bobNamingAlice = await page.evaluate((k, u) => naming(k, u, "/files/list?directory=/"), BOB_KEY, ALICE);
  out.bobOwn = await page.evaluate((k) => files(k, "bob.txt", "bob's\n"), BOB_KEY);

  out.terminal = await page.evaluate((k) => openTerminal(k), ALICE_KEY);
  if (out.terminal.status === 200) {
    // Typed into xterm.js as a user would: its textarea has the focus, keys go out on the socket.
    await page.waitForFunction(() => /[$#] *$/m.test(screen()), { timeout: 10000 }).catch(() => {});
    await page.focus(".xterm-helper-textarea");
    await page.keyboard.type("echo typed-in-$((6*7))-chromium\n", { delay: 5 });
    await page
      .waitForFunction(() => screen().includes("typed-in-42-chromium"), { timeout: 10000 })
      .catch(() => {});
    out.screen = await page.evaluate(() => screen());
    out.closed = await page.evaluate(() => window.wsClosed);
  }
} catch (e) {
  out.error = String(e && e.stack || e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
