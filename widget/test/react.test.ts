import { StrictMode, createElement, useState } from "react";
import { act } from "react";
import { createRoot } from "react-dom/client";
import { afterEach, beforeEach, expect, it, vi } from "vitest";
import { SvcChat } from "../src/SvcChat";
import { AGENT, $, configuration, fakeService, settled } from "./helpers";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

beforeEach(() => {
  sessionStorage.clear();
  document.body.replaceChildren();
});
afterEach(() => vi.unstubAllGlobals());

it("mounts in an open shadow root, once under strict mode, and unmounts cleanly", async () => {
  const calls = fakeService({ widget: [{ status: 200, body: configuration() }, { status: 200, body: configuration() }] });
  const container = document.createElement("div");
  document.body.append(container);
  const root = createRoot(container);
  await act(async () => {
    root.render(createElement(StrictMode, null, createElement(SvcChat, { embedId: AGENT, baseUrl: "https://svc.test" })));
  });
  await act(settled);
  const host = container.querySelector("[data-svc-chat]") as HTMLElement;
  expect(host.shadowRoot?.mode).toBe("open");
  // Strict mode mounts twice: one Widget in the end, in the same shadow root.
  expect(host.shadowRoot?.querySelectorAll(".r").length).toBe(1);
  expect(calls.every((c) => c.url.endsWith("/widget"))).toBe(true);
  expect($(host.shadowRoot as ShadowRoot, "h2").textContent).toBe("Harbor Help");
  await act(async () => root.unmount());
  expect(host.shadowRoot?.childNodes.length ?? 0).toBe(0);
});

it("open and onOpenChange control the panel", async () => {
  fakeService({ widget: [{ status: 200, body: configuration() }] });
  const seen: boolean[] = [];
  function Host() {
    const [open, setOpen] = useState(false);
    return createElement(SvcChat, {
      embedId: AGENT,
      baseUrl: "https://svc.test",
      open,
      onOpenChange: (next: boolean) => {
        seen.push(next);
        setOpen(next);
      },
    });
  }
  const container = document.createElement("div");
  document.body.append(container);
  const root = createRoot(container);
  await act(async () => root.render(createElement(Host)));
  await act(settled);
  const shadow = (container.querySelector("[data-svc-chat]") as HTMLElement).shadowRoot as ShadowRoot;
  expect($(shadow, ".p").hidden).toBe(true);
  await act(async () => $(shadow, ".l").click());
  expect(seen).toEqual([true]);
  expect($(shadow, ".p").hidden).toBe(false);
  expect($(shadow, ".l").getAttribute("aria-expanded")).toBe("true");
  await act(async () => root.unmount());
});
