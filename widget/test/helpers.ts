import { vi } from "vitest";
import { type ChatHandle, type ChatOptions, mount } from "../src/chat";
import type { WidgetConfiguration } from "../src/types";

export const BASE_URL = "https://svc.test";
export const AGENT = "agt_0123456789abcdefghjkmnpqrs";

export function configuration(extra: Partial<WidgetConfiguration> = {}): WidgetConfiguration {
  return {
    agentId: AGENT,
    defaultLanguage: "en",
    showBranding: true,
    appearance: {
      headline: "Harbor Help",
      description: "Questions about the harbour office",
      welcomeMessage: "Ahoy! Ask me anything.",
      brandColor: "#ffd400",
      theme: "dark",
      orientation: "left",
      logoUrl: "https://cdn.test/logo.png",
      bubbleStyle: "pill",
      bubbleLabel: "Ask us",
      useBrandColor: true,
    },
    welcomePopup: { enabled: false, seconds: 3, message: "Need a hand?" },
    predefinedQuestions: [],
    collectUserInfo: { enabled: false, message: "" },
    leadCapture: { enabled: false, contactEmail: "", calendarLink: "", phoneNumber: "", customMessage: "" },
    ...extra,
  };
}

export interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** A fetch that answers from a queue per path tail (`widget`, `answers`) and records every request. */
export function fakeService(replies: Record<string, (Reply | "offline")[]>) {
  const calls: { url: string; init: RequestInit }[] = [];
  const fetch = vi.fn(async (url: string, init: RequestInit) => {
    calls.push({ url, init });
    const tail = url.split("/").pop() ?? "";
    const reply = replies[tail]?.shift();
    if (!reply) throw new Error(`no reply queued for ${url}`);
    if (reply === "offline") throw new TypeError("Failed to fetch");
    return new Response(JSON.stringify(reply.body), { status: reply.status, headers: reply.headers });
  });
  vi.stubGlobal("fetch", fetch);
  return calls;
}

export function problem(code: string, extra: Record<string, unknown> = {}) {
  return { error: { code, message: `${code} happened`, ...extra }, meta: { requestId: "req_1" } };
}

export function answer(text: string, conversationId = "conv_1") {
  return { answer: text, conversationId, sources: [{ sourceId: "src_1", title: "Harbour FAQ", uri: "https://harbour.test/faq" }] };
}

/** Mounts the Widget on a fresh host element and waits for it to settle. */
export async function mounted(options: Partial<ChatOptions> = {}): Promise<{ host: HTMLElement; root: ShadowRoot; chat: ChatHandle }> {
  const host = document.createElement("div");
  document.body.append(host);
  const chat = mount(host, { embedId: AGENT, baseUrl: BASE_URL, ...options });
  await settled();
  return { host, root: host.shadowRoot as ShadowRoot, chat };
}

export async function settled() {
  for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
}

export const $ = (root: ShadowRoot, selector: string) => root.querySelector(selector) as HTMLElement;
export const text = (root: ShadowRoot, selector: string) => $(root, selector)?.textContent ?? "";
