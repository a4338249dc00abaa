import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AGENT, $, answer, configuration, fakeService, mounted, problem, settled, text } from "./helpers";

beforeEach(() => {
  sessionStorage.clear();
  document.body.replaceChildren();
});
afterEach(() => {
  vi.unstubAllGlobals();
  vi.useRealTimers();
});

const sheetText = (root: ShadowRoot) =>
  root.adoptedStyleSheets.map((s) => [...s.cssRules].map((r) => r.cssText).join("\n")).join("\n");

describe("configuration", () => {
  it("is fetched from the widget endpoint and shown whole", async () => {
    const calls = fakeService({
      widget: [
        {
          status: 200,
          body: configuration({
            predefinedQuestions: [
              { question: "Fifth", order: 5 },
              { question: "Third", order: 3 },
              { question: "First", order: 1 },
              { question: "Second", order: 2 },
              { question: "Unordered" },
            ],
            collectUserInfo: { enabled: true, message: "Tell us your name" },
            leadCapture: {
              enabled: true,
              contactEmail: "desk@harbour.test",
              calendarLink: "https://cal.test/harbour",
              phoneNumber: "+34 600 000 000",
              customMessage: "Prefer a person?",
            },
          }),
        },
      ],
    });
    const { root, host } = await mounted({ open: true });
    expect(calls[0].url).toBe(`https://svc.test/api/public/chat/${AGENT}/widget`);
    expect(calls[0].init.credentials).toBe("omit");
    expect(host.shadowRoot?.mode).toBe("open");
    expect(text(root, "h2")).toBe("Harbor Help");
    expect(text(root, ".h p")).toBe("Questions about the harbour office");
    expect(text(root, ".m li")).toContain("Ahoy! Ask me anything.");
    expect($(root, ".h img").getAttribute("src")).toBe("https://cdn.test/logo.png");
    const r = $(root, ".r");
    expect(r.className).toContain("dark");
    expect(r.className).toContain("left");
    expect(r.getAttribute("lang")).toBe("en");
    // Yellow brand: dark text on it; the colour is in the stylesheet, not inline.
    expect(sheetText(root)).toMatch(/--a:\s*#ffd400/);
    expect(sheetText(root)).toMatch(/--on:\s*#111/);
    expect(root.querySelector("[style]")).toBeNull();
    const offered = [...root.querySelectorAll(".q button")].map((b) => b.textContent);
    expect(offered).toEqual(["First", "Second", "Third", "Fifth"]);
    expect(text(root, ".f")).toBe("Powered by svc");
    expect(text(root, ".l")).toContain("Ask us");
    const notes = [...root.querySelectorAll(".note")].map((n) => n.textContent);
    expect(notes[0]).toBe("Tell us your name");
    expect(notes[1]).toContain("Prefer a person?");
    expect($(root, 'a[href="mailto:desk@harbour.test"]')).not.toBeNull();
    expect($(root, 'a[href="tel:+34600000000"]')).not.toBeNull();
    // Nothing to fill in: no operation accepts lead or user details.
    expect(root.querySelectorAll("input").length).toBe(0);
  });

  it("follows the language, the override and the branding switch", async () => {
    fakeService({ widget: [{ status: 200, body: configuration({ defaultLanguage: "es", showBranding: false }) }] });
    const { root, chat } = await mounted({
      open: true,
      configuration: { appearance: { headline: "Ayuda", brandColor: "#1a237e", theme: "light" } },
    });
    expect(text(root, "h2")).toBe("Ayuda");
    expect($(root, ".r").getAttribute("lang")).toBe("es");
    expect(text(root, "form button")).toBe("Enviar");
    expect(text(root, "label")).toBe("Tu pregunta");
    expect($(root, ".f").hidden).toBe(true);
    expect($(root, ".r").className).toContain("light");
    // Dark blue brand: white text on it.
    expect(sheetText(root)).toMatch(/--on:\s*#fff/);
    chat.update({ embedId: AGENT, baseUrl: "", open: true, language: "en" });
    expect(text(root, "form button")).toBe("Send");
    expect(text(root, "h2")).toBe("Harbor Help");
  });

  it("uses a neutral colour when the brand colour is off", async () => {
    fakeService({ widget: [{ status: 200, body: configuration() }] });
    const { root } = await mounted({ configuration: { appearance: { useBrandColor: false } } });
    expect(sheetText(root)).not.toContain("#ffd400");
  });
});

describe("asking", () => {
  it("sends on Enter, breaks the line on Shift+Enter, shows the answer with its sources", async () => {
    const calls = fakeService({ widget: [{ status: 200, body: configuration() }], answers: [{ status: 200, body: answer("Open at nine.") }] });
    const onAnswer = vi.fn();
    const { root } = await mounted({ open: true, onAnswer });
    const input = $(root, "textarea") as HTMLTextAreaElement;
    input.value = "When do you open?";
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", shiftKey: true, bubbles: true }));
    await settled();
    expect(calls.length).toBe(1);
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true, cancelable: true }));
    await settled();
    expect(calls.length).toBe(2);
    expect(JSON.parse(String(calls[1].init.body))).toEqual({ question: "When do you open?" });
    const items = [...root.querySelectorAll(".m li")].map((li) => li.textContent);
    expect(items.at(-2)).toContain("When do you open?");
    expect(items.at(-1)).toContain("Open at nine.");
    expect(items.at(-1)).toContain("Sources: Harbour FAQ");
    expect($(root, ".m").getAttribute("aria-live")).toBe("polite");
    expect(onAnswer).toHaveBeenCalledWith(expect.objectContaining({ conversationId: "conv_1" }));
  });

  it("keeps the conversation for the tab's session, per Agent", async () => {
    const calls = fakeService({
      widget: [{ status: 200, body: configuration() }, { status: 200, body: configuration() }],
      answers: [{ status: 200, body: answer("One.", "conv_kept") }, { status: 200, body: answer("Two.", "conv_kept") }],
    });
    const first = await mounted({ open: true });
    ($(first.root, "textarea") as HTMLTextAreaElement).value = "One?";
    $(first.root, "form button").closest("form")?.dispatchEvent(new Event("submit", { cancelable: true }));
    await settled();
    first.chat.destroy();
    // A reload: a new Widget for the same Agent continues the conversation and shows it.
    const again = await mounted({ open: true });
    expect(text(again.root, ".m")).toContain("One.");
    ($(again.root, "textarea") as HTMLTextAreaElement).value = "Two?";
    $(again.root, "form").dispatchEvent(new Event("submit", { cancelable: true }));
    await settled();
    expect(JSON.parse(String(calls.at(-1)?.init.body))).toEqual({ question: "Two?", conversationId: "conv_kept" });
    expect(sessionStorage.getItem(`svc-chat:${AGENT}`)).toContain("conv_kept");
    expect(sessionStorage.getItem("svc-chat:agt_other")).toBeNull();
  });

  it("a predefined question is asked by its button", async () => {
    const calls = fakeService({
      widget: [{ status: 200, body: configuration({ predefinedQuestions: [{ question: "Parking?" }] }) }],
      answers: [{ status: 200, body: answer("Free.") }],
    });
    const { root } = await mounted({ open: true });
    ($(root, ".q button") as HTMLButtonElement).click();
    await settled();
    expect(JSON.parse(String(calls[1].init.body)).question).toBe("Parking?");
    expect($(root, ".q").hidden).toBe(true);
  });
});

describe("failures a person understands", () => {
  it("a refused origin is told apart when the Widget mounts", async () => {
    fakeService({ widget: [{ status: 403, body: problem("permission_denied") }] });
    const onError = vi.fn();
    const { root } = await mounted({ open: true, onError });
    expect(onError).toHaveBeenCalledWith(
      expect.objectContaining({ code: "permission_denied", status: 403, requestId: "req_1" }),
    );
    expect(text(root, ".s")).toBe("This chat is not available on this site.");
    expect(($(root, "textarea") as HTMLTextAreaElement).disabled).toBe(true);
  });

  it("a disabled chat reads the same", async () => {
    fakeService({ widget: [{ status: 404, body: problem("resource_not_found") }] });
    const { root } = await mounted({ open: true });
    expect(text(root, ".s")).toBe("This chat is not available on this site.");
  });

  it("a network failure is not a refusal", async () => {
    fakeService({ widget: ["offline"] });
    const onError = vi.fn();
    const { root } = await mounted({ open: true, onError });
    expect(onError).toHaveBeenCalledWith(expect.objectContaining({ code: "network_error", status: 0 }));
    expect(text(root, ".s")).toContain("connection was lost");
    expect(($(root, "textarea") as HTMLTextAreaElement).disabled).toBe(false);
  });

  it("429 counts down from Retry-After, then allows asking again", async () => {
    fakeService({
      widget: [{ status: 200, body: configuration() }],
      answers: [{ status: 429, body: problem("limit_exceeded"), headers: { "retry-after": "3" } }],
    });
    const onError = vi.fn();
    const { root } = await mounted({ open: true, onError });
    vi.useFakeTimers({ toFake: ["setTimeout", "Date"] });
    ($(root, "textarea") as HTMLTextAreaElement).value = "Again?";
    $(root, "form").dispatchEvent(new Event("submit", { cancelable: true }));
    await vi.advanceTimersByTimeAsync(0);
    expect(onError).toHaveBeenCalledWith(expect.objectContaining({ status: 429, retryAfter: 3 }));
    expect(text(root, ".s")).toBe("Too many questions at once; try again in 3 s.");
    expect(($(root, "form button") as HTMLButtonElement).disabled).toBe(true);
    await vi.advanceTimersByTimeAsync(1000);
    expect(text(root, ".s")).toBe("Too many questions at once; try again in 2 s.");
    await vi.advanceTimersByTimeAsync(2100);
    expect(text(root, ".s")).toBe("");
    expect(($(root, "form button") as HTMLButtonElement).disabled).toBe(false);
  });

  it.each([
    [{ status: 403, body: problem("entitlement_required", { details: { reason: "quota_spent" } }) }, "cannot take more questions"],
    [{ status: 503, body: problem("processing_failed", { details: { reason: "model_unavailable" } }) }, "unavailable right now"],
    ["offline" as const, "connection was lost"],
    [{ status: 500, body: problem("internal_error") }, "Something went wrong"],
  ])("an answer failing says so (%#)", async (reply, words) => {
    fakeService({ widget: [{ status: 200, body: configuration() }], answers: [reply] });
    const { root } = await mounted({ open: true });
    ($(root, "textarea") as HTMLTextAreaElement).value = "Hm?";
    $(root, "form").dispatchEvent(new Event("submit", { cancelable: true }));
    await settled();
    expect(text(root, ".m li.e")).toContain(words);
  });
});

describe("bubble", () => {
  it("opens from a named launcher, Esc closes and returns focus", async () => {
    fakeService({ widget: [{ status: 200, body: configuration({ appearance: { ...configuration().appearance, bubbleStyle: "icon", bubbleLabel: null } }) }] });
    const onOpenChange = vi.fn();
    const { root } = await mounted({ onOpenChange });
    const launcher = $(root, ".l");
    expect(launcher.tagName).toBe("BUTTON");
    expect(launcher.getAttribute("aria-label")).toBe("Open chat");
    expect(launcher.getAttribute("aria-expanded")).toBe("false");
    expect($(root, ".p").hidden).toBe(true);
    launcher.click();
    expect(onOpenChange).toHaveBeenLastCalledWith(true);
    expect(launcher.getAttribute("aria-expanded")).toBe("true");
    const panel = $(root, ".p");
    expect(panel.hidden).toBe(false);
    expect(panel.getAttribute("role")).toBe("dialog");
    expect(panel.getAttribute("aria-modal")).toBe("false");
    expect(root.getElementById(panel.getAttribute("aria-labelledby") ?? "")?.textContent).toBe("Harbor Help");
    expect(root.activeElement).toBe($(root, "textarea"));
    $(root, "textarea").dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true }));
    expect(onOpenChange).toHaveBeenLastCalledWith(false);
    expect(panel.hidden).toBe(true);
    expect(root.activeElement).toBe(launcher);
  });

  it("is controlled by `open` when given", async () => {
    fakeService({ widget: [{ status: 200, body: configuration() }] });
    const onOpenChange = vi.fn();
    const { root, chat } = await mounted({ open: false, onOpenChange });
    $(root, ".l").click();
    expect(onOpenChange).toHaveBeenCalledWith(true);
    expect($(root, ".p").hidden).toBe(true);
    chat.update({ embedId: AGENT, baseUrl: "", open: true, onOpenChange });
    expect($(root, ".p").hidden).toBe(false);
  });

  it("shows the welcome popup once per session after its delay, without taking focus", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout"] });
    fakeService({
      widget: [
        { status: 200, body: configuration({ welcomePopup: { enabled: true, seconds: 3, message: "Need a hand?" } }) },
        { status: 200, body: configuration({ welcomePopup: { enabled: true, seconds: 3, message: "Need a hand?" } }) },
      ],
    });
    const outside = document.createElement("button");
    document.body.append(outside);
    outside.focus();
    const host = document.createElement("div");
    document.body.append(host);
    const { mount } = await import("../src/chat");
    const chat = mount(host, { embedId: AGENT, baseUrl: "https://svc.test" });
    const root = host.shadowRoot as ShadowRoot;
    await vi.advanceTimersByTimeAsync(2900);
    expect($(root, ".w").hidden).toBe(true);
    await vi.advanceTimersByTimeAsync(200);
    expect($(root, ".w").hidden).toBe(false);
    expect(text(root, ".w .o")).toBe("Need a hand?");
    expect(document.activeElement).toBe(outside);
    ($(root, ".w .x") as HTMLButtonElement).click();
    expect($(root, ".w").hidden).toBe(true);
    chat.destroy();
    const again = mount(host, { embedId: AGENT, baseUrl: "https://svc.test" });
    await vi.advanceTimersByTimeAsync(5000);
    expect($(host.shadowRoot as ShadowRoot, ".w").hidden).toBe(true);
    again.destroy();
  });

  it("inline shows the panel in the flow, with no launcher", async () => {
    fakeService({ widget: [{ status: 200, body: configuration() }] });
    const { root } = await mounted({ display: "inline" });
    expect($(root, ".l")).toBeNull();
    expect($(root, ".p").hidden).toBe(false);
    expect($(root, ".p").getAttribute("role")).toBe("region");
  });
});

describe("isolation", () => {
  it("resets the host and respects reduced motion", async () => {
    fakeService({ widget: [{ status: 200, body: configuration() }] });
    const { root } = await mounted();
    const css = sheetText(root);
    expect(css).toMatch(/:host\s*\{[^}]*display:\s*block\s*!important/);
    expect(css).toMatch(/\.r\s*\{[^}]*all:\s*initial/);
    expect(css).toContain("prefers-reduced-motion");
    expect(root.querySelectorAll("style").length).toBe(0);
  });

  it("falls back to a <style> carrying the nonce without constructable stylesheets", async () => {
    vi.stubGlobal("CSSStyleSheet", undefined);
    fakeService({ widget: [{ status: 200, body: configuration() }] });
    const { root } = await mounted({ nonce: "n0nce" });
    const style = root.querySelector("style");
    expect(style?.getAttribute("nonce")).toBe("n0nce");
    expect(style?.textContent).toContain("#ffd400");
  });
});

describe("live region", () => {
  it("adds each message once instead of redrawing the log", async () => {
    fakeService({
      widget: [{ status: 200, body: configuration() }],
      answers: [{ status: 200, body: answer("First.") }, { status: 200, body: answer("Second.") }],
    });
    const { root } = await mounted({ open: true });
    const ask = async (q: string) => {
      ($(root, "textarea") as HTMLTextAreaElement).value = q;
      $(root, "form").dispatchEvent(new Event("submit", { cancelable: true }));
      await settled();
    };
    await ask("One?");
    const welcome = root.querySelector(".m li");
    const firstAnswer = [...root.querySelectorAll(".m li")].at(-1);
    await ask("Two?");
    const items = [...root.querySelectorAll(".m li")];
    expect(items.length).toBe(5);
    expect(items[0]).toBe(welcome);
    expect(items[2]).toBe(firstAnswer);
  });
});
