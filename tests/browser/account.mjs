// The web application end to end in a real browser (Debian's chromium, driven
// by playwright-core): a brand-new identity signs in, finishes setup, creates
// a Workspace and an API key that then answers identity.status; an invited
// second User joins with the role given; a forged form post is refused; every
// page passes axe-core with no serious violation and logs no console error
// (a CSP violation is one). Screenshots of each page go to $SCREENSHOTS.
//
// Started by tests/tests/account_browser.rs with the real svc-api and the test
// OpenID Connect provider (tests/oidc/provider.js, signing in OIDC_ACCOUNTS in
// turn). Environment: SVC_URL, SCREENSHOTS. Prints one JSON line of results.

import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const axeSource = fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const base = process.env.SVC_URL;
const shots = process.env.SCREENSHOTS;
fs.mkdirSync(shots, { recursive: true });

const problems = [];
// Set while the test itself sends a request the server must refuse.
let expectingRefusal = false;
const results = { pages: [] };
function check(ok, message) {
  if (!ok) problems.push(message);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});

async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1000, height: 760 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  const page = await context.newPage();
  page.on('console', (message) => {
    const refusal = expectingRefusal && message.text().includes('status of 403');
    if (message.type() === 'error' && !refusal) problems.push(`console error on ${page.url()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error on ${page.url()}: ${error.message}`));
  return page;
}

// Screenshot and axe-core check of the page as it is now.
async function visit(page, name) {
  await page.waitForLoadState('load');
  await page.screenshot({ path: path.join(shots, `account-${name}.png`), fullPage: true });
  await page.evaluate(axeSource);
  const report = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
  const serious = report.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  for (const v of serious) problems.push(`axe ${name}: ${v.id} (${v.impact}): ${v.help}`);
  results.pages.push({ name, url: new URL(page.url()).pathname, violations: report.violations.length, serious: serious.length });
}

try {
  // 1. A brand-new identity signs in and finishes setup.
  const alice = await newPage();
  await alice.goto(`${base}/account`);
  await visit(alice, 'sign-in');
  await alice.getByRole('link', { name: 'Sign in' }).click();
  await alice.waitForURL(`${base}/account/setup`);
  await visit(alice, 'setup');
  await alice.getByLabel('Your name').fill('Alice Example');
  await alice.getByLabel('Name of your first Workspace').fill('Alice Labs');
  await alice.getByRole('button', { name: 'Continue' }).click();
  await alice.waitForURL(`${base}/account/setup`);
  check((await alice.locator('#slug').textContent()) === 'alice-labs', 'the slug is shown before submit');
  await visit(alice, 'setup-confirm');
  await alice.getByRole('button', { name: /Finish setup/ }).click();
  await alice.waitForURL(`${base}/account`);
  await visit(alice, 'next-steps');
  check((await alice.content()).includes(`svc auth login --endpoint ${base}`), 'the next steps name the CLI sign-in');

  // 2. An API key, shown once, copied, and answering identity.status.
  await alice.getByRole('link', { name: 'Alice Labs' }).click();
  await alice.waitForURL(/\/account\/workspaces\//);
  const workspaceUrl = alice.url();
  await visit(alice, 'workspace');
  await alice.getByLabel('Name', { exact: true }).fill('ci');
  await alice.getByLabel(/Operator/).check();
  await alice.getByRole('button', { name: 'Create API key' }).click();
  const secret = (await alice.locator('#secret').textContent()).trim();
  check(secret.startsWith('svck_'), 'a secret is shown');
  await alice.getByRole('button', { name: 'Copy' }).click();
  await alice.getByText('Copied.').waitFor();
  check((await alice.evaluate(() => navigator.clipboard.readText())) === secret, 'the copy button copies the secret');
  await visit(alice, 'api-key');
  const status = await fetch(`${base}/api/public/operations/identity/status`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: '{}',
  });
  const statusBody = await status.json();
  check(status.status === 200, `the key answers identity.status: ${JSON.stringify(statusBody)}`);
  results.identityStatus = { status: status.status, workspace: statusBody.data?.workspace?.slug ?? null };

  // 3. A forged post (no CSRF token) from the signed-in browser is refused.
  await alice.goto(workspaceUrl);
  expectingRefusal = true;
  const forged = await alice.evaluate(async (url) => {
    const response = await fetch(`${url}/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=forged&preset=operator',
    });
    return response.status;
  }, workspaceUrl);
  expectingRefusal = false;
  check(forged === 403, `a forged post is refused (got ${forged})`);
  results.forgedStatus = forged;

  // 4. An invite link for an admin, and a second User who joins with it.
  await alice.getByLabel('Role', { exact: true }).selectOption('admin');
  await alice.getByRole('button', { name: 'Create invite link' }).click();
  const link = (await alice.locator('#invite').textContent()).trim();
  check(link.startsWith(`${base}/account/join#`), 'an invite link');
  await visit(alice, 'invite');

  const bob = await newPage();
  await bob.goto(link);
  check((await bob.getByLabel('Invite code').inputValue()).length > 20, 'the code is read from the fragment');
  check(!bob.url().includes('#'), 'the code leaves the address bar');
  await visit(bob, 'join');
  await bob.getByRole('button', { name: 'Continue' }).click();
  await bob.waitForURL(`${base}/account/join/confirm`);
  await bob.getByRole('link', { name: 'Sign in' }).click();
  await bob.waitForURL(`${base}/account/setup`);
  await bob.getByLabel('Your name').fill('Bob Example');
  await bob.getByRole('button', { name: 'Continue' }).click();
  await bob.waitForURL(`${base}/account/join/confirm`);
  await visit(bob, 'join-confirm');
  await bob.getByRole('button', { name: /Join Alice Labs/ }).click();
  await bob.waitForURL(/\/account\/workspaces\//);
  check((await bob.content()).includes('your role: admin'), 'the invited User joined as admin');
  results.bobRole = (await bob.content()).match(/your role: (\w+)/)?.[1] ?? null;

  // 5. Alice sees Bob among the members.
  await alice.goto(workspaceUrl);
  check((await alice.content()).includes('Bob Example'), 'the member list shows the new member');
  await visit(alice, 'members');
} catch (error) {
  problems.push(`the flow stopped: ${error.stack ?? error}`);
} finally {
  await browser.close();
}

results.problems = problems;
console.log(JSON.stringify(results));
process.exit(problems.length === 0 ? 0 : 1);
