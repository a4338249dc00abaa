/** The Widget's styles, scoped by its shadow root: the page's selectors
 * cannot match inside it, and its root resets every property (`all:
 * initial`), so nothing the page makes inheritable reaches the Widget. The
 * host box keeps the few properties that would hide it or break its fixed
 * position, with `!important` (inside a shadow tree that beats the page's own
 * `!important`); its size stays the page's to set. */

const HEX = /^#[0-9a-fA-F]{6}$/;

/** Relative luminance (WCAG 2) of a `#rrggbb` colour. */
export function luminance(hex: string): number {
  const channel = (i: number) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

/** The text colour (near-black or white) with more contrast on `background`. */
export function readableOn(background: string): string {
  const l = luminance(background);
  // Contrast with white: 1.05 / (l + 0.05); with #111: (l + 0.05) / 0.0556.
  return 1.05 / (l + 0.05) >= (l + 0.05) / 0.0556 ? "#fff" : "#111";
}

const DARK_VARS = "--bg:#1b1d21;--fg:#f2f3f5;--mu:#b4b9c0;--li:#2a2d33;--bd:#444a53";
const DARK = `.dark{${DARK_VARS}}@media (prefers-color-scheme:dark){.auto{${DARK_VARS}}}`;

export function css(brand: string, useBrand: boolean): string {
  const accent = useBrand && HEX.test(brand) ? brand : "#374151";
  return `:host{display:block!important;visibility:visible!important;transform:none!important;filter:none!important;opacity:1!important}
.r{all:initial;display:block;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);--a:${accent};--on:${readableOn(accent)};--bg:#fff;--fg:#111;--mu:#555;--li:#f2f3f5;--bd:#d0d4da}
${DARK}
*,*::before,*::after{box-sizing:border-box;letter-spacing:normal;word-spacing:normal;text-transform:none;text-shadow:none}
button,textarea,a{font:inherit;color:inherit}
button{cursor:pointer;border:0;background:none;padding:0}
:focus-visible{outline:3px solid var(--a);outline-offset:2px}
.l{position:fixed;bottom:20px;right:20px;z-index:2147483000;display:flex;align-items:center;gap:8px;min-width:56px;height:56px;padding:0 16px;border-radius:28px;background:var(--a);color:var(--on);box-shadow:0 4px 14px #0004;justify-content:center}
.left .l,.left .p,.left .w{right:auto;left:20px}
.l svg{width:26px;height:26px;fill:currentColor}
.p{display:flex;flex-direction:column;background:var(--bg);color:var(--fg);border:1px solid var(--bd);border-radius:14px;overflow:hidden}
.bub .p{position:fixed;bottom:88px;right:20px;z-index:2147483000;width:min(380px,calc(100vw - 40px));height:min(560px,calc(100vh - 120px));box-shadow:0 8px 30px #0005;transition:opacity .15s,transform .15s}
.inl,.inl .p{height:100%}
.inl .p{min-height:420px}
[hidden]{display:none!important}
.h{display:flex;gap:10px;align-items:center;padding:12px 14px;background:var(--a);color:var(--on)}
.h img{width:36px;height:36px;border-radius:8px;object-fit:cover;background:#fff}
.h h2{font-size:17px;margin:0;font-weight:600}
.h p{margin:2px 0 0;font-size:13px;opacity:.92}
.h .x{margin-left:auto;width:32px;height:32px;border-radius:8px;font-size:22px;line-height:1;color:var(--on)}
.m{flex:1;overflow-y:auto;list-style:none;margin:0;padding:14px;display:flex;flex-direction:column;gap:10px}
.m li{max-width:88%;padding:8px 12px;border-radius:12px;white-space:pre-wrap;overflow-wrap:anywhere;background:var(--li)}
.m .u{align-self:flex-end;background:var(--a);color:var(--on)}
.m .e{background:none;border:1px solid var(--bd);color:var(--fg)}
.m small{display:block;margin-top:6px;color:var(--mu);font-size:12px}
.m a{color:inherit}
.q{display:flex;flex-wrap:wrap;gap:6px;padding:0 14px 10px}
.q button,.note{border:1px solid var(--a);border-radius:16px;padding:5px 11px;font-size:13px;text-align:left}
.note{display:block;margin:0 14px 10px;border-color:var(--bd);font-size:13px}
form{display:flex;gap:8px;padding:10px 14px;border-top:1px solid var(--bd);align-items:flex-end}
label,.v{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%)}
textarea{flex:1;resize:none;min-height:40px;max-height:120px;padding:9px 10px;border:1px solid var(--bd);border-radius:10px;background:var(--bg)}
form button{height:40px;padding:0 14px;border-radius:10px;background:var(--a);color:var(--on);font-weight:600}
button:disabled{opacity:.55;cursor:default}
.s{min-height:0;margin:0;padding:0 14px;color:var(--mu);font-size:13px}
.s:not(:empty){padding-bottom:8px}
.f{padding:0 14px 10px;text-align:center;font-size:11px;color:var(--mu)}
.w{position:fixed;bottom:88px;right:20px;z-index:2147483000;max-width:260px;padding:10px 34px 10px 12px;background:var(--bg);color:var(--fg);border:1px solid var(--bd);border-radius:12px;box-shadow:0 4px 14px #0003}
.w .x{position:absolute;top:4px;right:6px;width:24px;height:24px;font-size:18px}
.w .o{text-align:left}
@media (prefers-reduced-motion:reduce){*{transition:none!important;animation:none!important}}`;
}
