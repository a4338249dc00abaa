// Builds the package (dist/: ESM, CommonJS, type declarations) and the Public
// Chat page's script (../api/assets/widget.js). `npm pack` runs it (prepack).
// `--check` writes nothing under api/ and fails when the committed page script
// differs from a fresh build.
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = join(dirname(fileURLToPath(import.meta.url)), "..");
const check = process.argv.includes("--check");
const banner = '"use client";';
const common = {
  entryPoints: [join(here, "src/index.ts")],
  bundle: true,
  external: ["react", "react-dom"],
  target: "es2020",
  legalComments: "none",
  logLevel: "warning",
};

if (!check) {
  rmSync(join(here, "dist"), { recursive: true, force: true });
  await build({ ...common, format: "esm", outfile: join(here, "dist/index.js"), banner: { js: banner } });
  await build({ ...common, format: "cjs", outfile: join(here, "dist/index.cjs"), banner: { js: banner } });
  execFileSync(join(here, "node_modules/.bin/tsc"), ["-p", join(here, "tsconfig.json"), "--emitDeclarationOnly"], {
    stdio: "inherit",
  });
}

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
const script = `// Built from widget/src/page.ts by widget/scripts/build.mjs; do not edit.\n${page.outputFiles[0].text}`;
const committed = join(here, "../api/assets/widget.js");
if (check) {
  if (readFileSync(committed, "utf8") !== script) {
    console.error("api/assets/widget.js is not the build of widget/src: run `npm run build` in widget/.");
    process.exit(1);
  }
} else {
  writeFileSync(committed, script);
}
