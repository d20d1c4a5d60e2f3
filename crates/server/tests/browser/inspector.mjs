// Drives the inspector in real headless chromium (Debian's /usr/bin/chromium): opens a
// conversation, moves the budget slider, and checks that the kept-turn count the page draws
// equals the API's report for the same request, under the page's Content-Security-Policy (any
// violation fails the run). Saves a screenshot.
//
// Usage: node inspector.mjs BASE_URL CONVERSATION SCREENSHOT.png
import { chromium } from "playwright-core";

const [base, conv, shot] = process.argv.slice(2);
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

function fail(message) {
  console.error("inspector test: " + message);
  process.exit(1);
}

async function apiKept(budget, format, tokenizer) {
  const res = await fetch(`${base}/v1/conversations/${conv}/projection?report=true`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input: "What did we decide?", format, tokenizer, policy: "turns", max_bytes: budget }),
  });
  if (!res.ok) fail(`API projection answered ${res.status}`);
  return (await res.json()).report.turns.kept;
}

/// Waits until the page has drawn the report for `budget`, and returns what it drew.
async function drawn(page, budget) {
  await page.waitForFunction((b) => document.getElementById("kept-turns").dataset.budget === String(b), budget, { timeout: 15000 });
  return page.evaluate(() => ({
    kept: Number(document.getElementById("kept-turns").dataset.kept),
    text: document.getElementById("kept-turns").textContent,
    keptRows: [...document.querySelectorAll("#timeline li.kept")].filter((li) => li.querySelector(".kind").textContent === "user").length,
    droppedRows: document.querySelectorAll("#timeline li.dropped").length,
    tiers: document.querySelectorAll("#tiers div").length,
    tierWidths: [...document.querySelectorAll("#tiers div")].map((d) => d.getBoundingClientRect().width),
  }));
}

async function moveSlider(page, value) {
  await page.$eval("#budget-slider", (el, v) => {
    el.value = String(v);
    el.dispatchEvent(new Event("input", { bubbles: true }));
  }, value);
  return Number(await page.$eval("#budget-slider", (el) => el.value));
}

const browser = await chromium.launch({ executablePath, args, headless: true });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on("pageerror", (e) => fail("page error: " + e.message));
  page.on("console", (m) => { if (m.text().startsWith("CSP violation")) fail(m.text()); });
  await page.addInitScript(() => document.addEventListener("securitypolicyviolation",
    (e) => console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"}`)));
  const loaded = await page.goto(base + "/");
  const headers = loaded.headers();
  if (!/default-src 'self'/.test(headers["content-security-policy"] || "")) fail("no Content-Security-Policy on the page: " + JSON.stringify(headers));
  if (headers["x-frame-options"] !== "DENY") fail("no X-Frame-Options: DENY on the page");
  await page.click(`#conversations button[data-name="${conv}"]`);
  await page.waitForSelector("#timeline li");
  const rows = await page.$$eval("#timeline li", (lis) => lis.length);
  if (rows === 0) fail("the timeline is empty");

  const checks = [];
  for (const [target, format, tokenizer] of [[900, "openai-chat", "o200k"], [2500, "anthropic-messages", "cl100k"], [6000, "openai-chat", "cl100k"]]) {
    await page.selectOption("#format", format);
    await page.selectOption("#tokenizer", tokenizer);
    const budget = await moveSlider(page, target);
    const seen = await drawn(page, budget);
    const expected = await apiKept(budget, format, tokenizer);
    if (seen.kept !== expected || seen.text !== String(expected)) fail(`budget ${budget} ${format}: drew ${seen.text}, the API reports ${expected}`);
    if (seen.keptRows !== expected) fail(`budget ${budget}: ${seen.keptRows} user rows marked kept, the API reports ${expected} turns`);
    if (seen.tiers === 0) fail("no tier bar drawn");
    if (!seen.tierWidths.some((w) => w > 0)) fail("the tier bar has no width (its style was refused?)");
    checks.push({ budget, format, tokenizer, kept: expected, dropped_rows: seen.droppedRows });
  }
  if (new Set(checks.map((c) => c.kept)).size < 2) fail("moving the slider never changed the kept-turn count: " + JSON.stringify(checks));

  await page.fill("#query", "deployment window");
  await page.click("#recall-form button");
  await page.waitForSelector("#hits li .prov");
  const prov = await page.$eval("#hits li .prov", (el) => el.textContent);
  if (!/seq \d+ · user|seq \d+ · assistant/.test(prov)) fail("recall hit without provenance: " + prov);

  await page.selectOption("#format", "openai-chat");
  await moveSlider(page, 2500);
  await drawn(page, 2500);
  await page.screenshot({ path: shot, fullPage: true });
  console.log(JSON.stringify({ ok: true, timeline_rows: rows, checks, recall_provenance: prov, screenshot: shot }));
} finally {
  await browser.close();
}
