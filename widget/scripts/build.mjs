// Builds the package (dist/: ESM, CommonJS, type declarations). `npm pack`
// runs it (prepack). The Public Chat page's script is a build of its own
// (scripts/page.mjs), so packing the Widget changes nothing outside widget/.
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = join(dirname(fileURLToPath(import.meta.url)), "..");
const banner = '"use client";';
const common = {
  entryPoints: [join(here, "src/index.ts")],
  bundle: true,
  external: ["react", "react-dom"],
  target: "es2020",
  legalComments: "none",
  logLevel: "warning",
};

rmSync(join(here, "dist"), { recursive: true, force: true });
await build({ ...common, format: "esm", outfile: join(here, "dist/index.js"), banner: { js: banner } });
await build({ ...common, format: "cjs", outfile: join(here, "dist/index.cjs"), banner: { js: banner } });
execFileSync(join(here, "node_modules/.bin/tsc"), ["-p", join(here, "tsconfig.json"), "--emitDeclarationOnly"], {
  stdio: "inherit",
});
