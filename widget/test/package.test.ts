// @vitest-environment node
import { readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";
import { expect, it } from "vitest";

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
const lock = JSON.parse(readFileSync(new URL("../package-lock.json", import.meta.url), "utf8"));
const contract = readFileSync(new URL("../../shared/contract/src/chat.rs", import.meta.url), "utf8");

/** A field of `WidgetPackage::CURRENT` in the contract crate. */
function current(field: string): string {
  const block = contract.slice(contract.indexOf("pub const CURRENT"));
  const found = block.match(new RegExp(`${field}:\\s*"([^"]+)"`));
  if (!found) throw new Error(`no ${field} in WidgetPackage::CURRENT`);
  return found[1];
}

it("is the package the contract names", () => {
  expect(pkg.name).toBe(current("package_name"));
  expect(pkg.version).toBe(current("version"));
  expect(lock.name).toBe(pkg.name);
  expect(lock.version).toBe(pkg.version);
});

it("installs beside React 18 or 19 and nothing else", () => {
  expect(pkg.dependencies ?? {}).toEqual({});
  expect(pkg.peerDependencies).toEqual({ react: "^18 || ^19", "react-dom": "^18 || ^19" });
  expect(pkg.sideEffects).toBe(false);
  expect(pkg.exports["."]).toEqual({ types: "./dist/index.d.ts", import: "./dist/index.js", require: "./dist/index.cjs" });
  expect(pkg.scripts.prepack).toBeTruthy();
});

it("weighs at most 8 kB minified and gzipped, without React", async () => {
  const out = await build({
    entryPoints: [new URL("../src/index.ts", import.meta.url).pathname],
    bundle: true,
    minify: true,
    format: "esm",
    external: ["react", "react-dom"],
    write: false,
    logLevel: "silent",
  });
  const size = gzipSync(out.outputFiles[0].contents, { level: 9 }).length;
  console.log(`svc-widget-react: ${size} bytes min+gzip`);
  expect(size).toBeLessThanOrEqual(8 * 1024);
});

it("the Public Chat page's script is the build of this source", async () => {
  const { execFileSync } = await import("node:child_process");
  const script = new URL("../scripts/page.mjs", import.meta.url).pathname;
  expect(() => execFileSync(process.execPath, [script, "--check"], { stdio: "pipe" })).not.toThrow();
});
