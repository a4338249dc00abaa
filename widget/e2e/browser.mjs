// The Widget in a real browser (Debian's Chromium through playwright-core),
// against a running svc-api and svc-worker that tests/tests/widget.rs starts
// and configures. A React host page under a strict CSP is served on an allowed
// origin and on a refused one; then the Public Chat page is visited. Fails on
// any console error, failed request, leaked CSS or serious axe violation.
//
// Environment: SVC_API (the API's base URL), SVC_AGENT (the Agent id),
// SVC_ALLOWED_PORT and SVC_REFUSED_PORT (free ports on 127.0.0.1),
// SVC_SOURCE_TITLE (the title an answer must name), SVC_SCREENSHOTS (a folder
// to write screenshots to; none when unset).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { chromium } from "playwright-core";

const here = join(dirname(fileURLToPath(import.meta.url)), "..");
const env = (name) => process.env[name] ?? assert.fail(`${name} is not set`);
const api = env("SVC_API");
const agent = env("SVC_AGENT");
const title = env("SVC_SOURCE_TITLE");
const shots = process.env.SVC_SCREENSHOTS;
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

// The host application: React from this package's own dev dependencies, and
// SvcChat from its source, bundled as a site would.
const bundled = await build({
  stdin: {
    contents: `
      import { createElement } from "react";
      import { createRoot } from "react-dom/client";
      import { SvcChat } from "./src/index";
      const props = JSON.parse(document.getElementById("props").textContent);
      window.svcErrors = [];
      createRoot(document.getElementById("root")).render(
        createElement(SvcChat, { ...props, onError: (e) => window.svcErrors.push(e) }),
      );`,
    resolveDir: here,
    loader: "ts",
  },
  bundle: true,
  format: "iife",
  minify: true,
  define: { "process.env.NODE_ENV": '"production"' },
  write: false,
  logLevel: "warning",
});
const appJs = bundled.outputFiles[0].text;

// Rules a careless widget would inherit or a careless host would impose.
const hostCss = `* { letter-spacing: 3px !important; font-family: "Comic Sans MS", cursive !important; color: rgb(0, 128, 0); }
button { background: rgb(255, 0, 0) !important; border: 5px solid lime !important; }
textarea { display: none !important; }
main { max-width: 40rem; margin: 2rem auto; }`;
const icon = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 8 8"><rect width="8" height="8" fill="#555"/></svg>`;

function hostPage() {
  const props = JSON.stringify({ embedId: agent, baseUrl: api }).replace(/</g, "\\u003c");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Harbour Shop</title>
<link rel="icon" href="/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/host.css">
<script type="application/json" id="props">${props}</script>
<script src="/app.js" defer></script></head>
<body><main><h1>Harbour Shop</h1><p id="para">Boats, sails and rope since 1921.</p>
<button type="button" id="host-button">Host button</button><div id="root"></div></main></body></html>`;
}

/** A host site on 127.0.0.1:port with a strict policy: no inline script or style. */
function serve(port) {
  const csp = `default-src 'none'; script-src 'self'; style-src 'self'; connect-src ${api}; img-src 'self'; base-uri 'none'; form-action 'none'`;
  const files = {
    "/": ["text/html; charset=utf-8", hostPage()],
    "/app.js": ["text/javascript", appJs],
    "/host.css": ["text/css", hostCss],
    "/icon.svg": ["image/svg+xml", icon],
  };
  const server = http.createServer((req, res) => {
    const file = files[new URL(req.url, "http://x").pathname];
    if (!file) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": file[0], "content-security-policy": csp }).end(file[1]);
  });
  return new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve(server)));
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
  ],
});

/** A page that records console errors and failed requests. */
async function open(context) {
  // Generous: a busy machine (the whole suite runs in parallel) is slow, not wrong.
  context.setDefaultTimeout(60000);
  const page = await context.newPage();
  const problems = [];
  page.on("console", (m) => m.type() === "error" && problems.push(`console: ${m.text()}`));
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on("response", (r) => r.status() >= 400 && problems.push(`status ${r.status()}: ${r.url()}`));
  return { page, problems };
}

/** axe-core over `selector` (the Widget on a host page: the host's own
 * deliberately clashing colours are not ours), else the whole page. */
async function axe(page, selector) {
  await page.evaluate(axeSource);
  const result = await page.evaluate(
    (selector) => window.axe.run(selector ? document.querySelector(selector) : document, { resultTypes: ["violations"] }),
    selector,
  );
  const serious = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(
    serious.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`),
    [],
    "axe-core finds no serious violation",
  );
}

const shot = async (page, name) => shots && (await page.screenshot({ path: join(shots, name) }));

/** What the page showed and reported, for a failure's message. */
let current = null;
async function diagnose() {
  if (!current) return "";
  const html = await current.page
    .evaluate(() => document.querySelector("[data-svc-chat], #chat")?.shadowRoot?.innerHTML ?? document.body.innerHTML)
    .catch((e) => String(e));
  return `\nproblems: ${JSON.stringify(current.problems)}\nwidget: ${html}`;
}

const allowed = await serve(Number(env("SVC_ALLOWED_PORT")));
const refused = await serve(Number(env("SVC_REFUSED_PORT")));
try {
  // 1. The allowed origin: ask, get an answer naming its source.
  const context = await browser.newContext({ viewport: { width: 1100, height: 760 }, reducedMotion: "reduce" });
  const { page, problems } = (current = await open(context));
  await page.goto(`http://127.0.0.1:${env("SVC_ALLOWED_PORT")}/`);
  const launcher = page.getByRole("button", { name: "Ask the harbour" });
  await launcher.waitFor();
  assert.equal(await launcher.getAttribute("aria-expanded"), "false");
  // Host CSS stays out of the Widget, and the Widget's stays out of the page.
  const styles = await page.evaluate(() => {
    const root = document.querySelector("[data-svc-chat]").shadowRoot;
    const style = (el) => getComputedStyle(el);
    const l = style(root.querySelector(".l"));
    return {
      launcher: [l.backgroundColor, l.letterSpacing, l.fontFamily, l.borderTopWidth],
      hostButton: style(document.getElementById("host-button")).backgroundColor,
      para: style(document.getElementById("para")).fontFamily,
      sheets: root.adoptedStyleSheets.length,
      styleElements: root.querySelectorAll("style").length,
    };
  });
  assert.notEqual(styles.launcher[0], "rgb(255, 0, 0)", "the host's button rule stays out");
  assert.equal(styles.launcher[1], "normal", "the host's letter-spacing stays out");
  assert.doesNotMatch(styles.launcher[2], /Comic/, "the host's font stays out");
  assert.equal(styles.launcher[3], "0px", "the host's border stays out");
  assert.equal(styles.hostButton, "rgb(255, 0, 0)", "the Widget does not restyle the host");
  assert.match(styles.para, /Comic/);
  assert.equal(styles.sheets, 1, "a constructable stylesheet, no inline style");
  assert.equal(styles.styleElements, 0);

  await launcher.click();
  assert.equal(await launcher.getAttribute("aria-expanded"), "true");
  const dialog = page.getByRole("dialog", { name: "Harbour Help" });
  await dialog.waitFor();
  const question = page.getByRole("textbox", { name: "Your question" });
  assert.ok(await question.evaluate((el) => el === el.getRootNode().activeElement), "the question has focus");
  assert.ok(await question.isVisible(), "the host's textarea rule stays out");
  // The predefined questions, in their order.
  const offered = page.locator(".q button");
  assert.deepEqual(await offered.allTextContents(), ["When is the office open?", "Where do I park?"]);
  // In words of the asker's own, none of the Knowledge's: found by meaning.
  await question.fill("At what time do you start work each day?");
  await question.press("Enter");
  const answer = page.locator(".m li.a").filter({ hasText: title });
  await answer.waitFor();
  const text = await answer.textContent();
  assert.match(text, /nine/, text);
  assert.match(text, new RegExp(`Sources: ${title}`), text);
  await axe(page, "[data-svc-chat]");
  await shot(page, "widget-open.png");
  // Esc closes and gives focus back to the launcher.
  await question.press("Escape");
  await dialog.waitFor({ state: "hidden" });
  assert.ok(await launcher.evaluate((el) => el === el.getRootNode().activeElement), "focus is back on the launcher");
  // A reload keeps the conversation (sessionStorage, per Agent).
  await page.reload();
  await page.getByRole("button", { name: "Ask the harbour" }).click();
  await page.locator(".m li.a").filter({ hasText: title }).waitFor();
  assert.deepEqual(problems, [], "no console error and no failed request");
  await context.close();

  // 2. A refused origin: the Widget says so when it mounts, before anyone types.
  {
    const context = await browser.newContext();
    const { page, problems } = (current = await open(context));
    await page.goto(`http://127.0.0.1:${env("SVC_REFUSED_PORT")}/`);
    const launcher = page.getByRole("button", { name: "Open chat" });
    await launcher.click();
    await page.getByText("This chat is not available on this site.").waitFor();
    const errors = await page.evaluate(() => window.svcErrors);
    assert.equal(errors.length, 1, JSON.stringify(errors));
    assert.equal(errors[0].status, 403);
    assert.equal(errors[0].code, "permission_denied");
    assert.ok(await page.getByRole("textbox", { name: "Your question" }).isDisabled());
    await axe(page, "[data-svc-chat]");
    // The refusal's own 403 is all the browser reports.
    const expected = (p) => /403/.test(p) && (p.includes("/widget") || p.startsWith("console: Failed to load resource"));
    assert.deepEqual(problems.filter((p) => !expected(p)), [], "nothing else went wrong");
    await context.close();
  }

  // 3. The Public Chat page: the same Widget, inline, under the page's policy.
  {
    const context = await browser.newContext({ viewport: { width: 900, height: 760 } });
    const { page, problems } = (current = await open(context));
    const response = await page.goto(`${api}/chat/${agent}`);
    assert.match(response.headers()["content-security-policy"], /default-src 'none'/);
    await page.getByRole("region", { name: "Harbour Help" }).waitFor();
    assert.equal(await page.locator(".q button").count(), 2);
    await page.getByRole("button", { name: "Where do I park?" }).click();
    await page.locator(".m li.a").filter({ hasText: title }).waitFor();
    await axe(page);
    await shot(page, "public-chat.png");
    assert.deepEqual(problems, [], "no console error and no failed request (the icon included)");
    await context.close();
  }
  console.log("widget browser test: allowed origin, refused origin and Public Chat page passed");
} catch (error) {
  console.error(error, await diagnose());
  process.exitCode = 1;
} finally {
  await browser.close();
  allowed.close();
  refused.close();
}
