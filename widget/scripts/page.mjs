// Builds the Public Chat page's script (../api/assets/widget.js, which the
// API serves) from src/page.ts: `npm run page` after changing src/.
// `--check` writes nothing and fails when the committed script differs from a
// fresh build (the Widget's unit tests run it, so CI does).
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = join(dirname(fileURLToPath(import.meta.url)), "..");
const check = process.argv.includes("--check");

const page = await build({
  entryPoints: [join(here, "src/page.ts")],
  bundle: true,
  minify: true,
  format: "iife",
  target: "es2020",
  legalComments: "none",
  write: false,
  logLevel: "warning",
});
const script = `// Built from widget/src/page.ts by widget/scripts/page.mjs; do not edit.\n${page.outputFiles[0].text}`;
const committed = join(here, "../api/assets/widget.js");
if (check) {
  if (readFileSync(committed, "utf8") !== script) {
    console.error("api/assets/widget.js is not the build of widget/src: run `npm run page` in widget/.");
    process.exit(1);
  }
} else {
  writeFileSync(committed, script);
}
