/** The Widget itself, with no framework: it draws into an open shadow root of
 * a host element and is driven by `update`. `SvcChat` (React) and the Public
 * Chat page both use it, so they look and behave the same. */

import { SvcChatError, ask, fetchConfiguration } from "./api";
import { css } from "./styles";
import type { Answer, AnswerSource, ConfigurationOverride, Language, SvcChatErrorInfo, WidgetConfiguration } from "./types";
import { type Words, words } from "./words";

export interface ChatOptions {
  /** The Agent id. */
  embedId: string;
  /** The service's address (`widget.manifest`'s `publicChat.url` without `/chat/{agentId}`). */
  baseUrl: string;
  /** Laid over the fetched configuration. */
  configuration?: ConfigurationOverride;
  /** The interface's language; the configuration's `defaultLanguage` otherwise. */
  language?: Language;
  /** A launcher button and a floating panel (default), or the panel in the page's flow. */
  display?: "bubble" | "inline";
  /** Controlled open state of the bubble's panel. */
  open?: boolean;
  onOpenChange?: (open: boolean) => void;
  /** A CSP nonce for the `<style>` element used where constructable stylesheets are missing. */
  nonce?: string;
  onAnswer?: (answer: Answer) => void;
  onError?: (error: SvcChatErrorInfo) => void;
  /** Whether to fetch the configuration first (the Public Chat page has it already). */
  fetchConfiguration?: boolean;
}

export interface ChatHandle {
  update(options: ChatOptions): void;
  destroy(): void;
}

interface Message {
  /** u: the visitor, a: the Agent, e: a failure. */
  r: "u" | "a" | "e";
  t: string;
  s?: AnswerSource[];
}

const BASE: WidgetConfiguration = {
  agentId: "",
  defaultLanguage: "en",
  showBranding: true,
  appearance: {
    headline: "",
    description: "",
    welcomeMessage: "",
    brandColor: "#2563eb",
    theme: "auto",
    orientation: "right",
    logoUrl: "",
    bubbleStyle: "icon",
    bubbleLabel: null,
    useBrandColor: true,
  },
  welcomePopup: { enabled: false, seconds: 5, message: "" },
  predefinedQuestions: [],
  collectUserInfo: { enabled: false, message: "" },
  leadCapture: { enabled: false, contactEmail: "", calendarLink: "", phoneNumber: "", customMessage: "" },
};

/** Predefined questions shown, at most (contract limit). */
const MAX_QUESTIONS = 4;
const ICON = "M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H8l-4 4V6a2 2 0 0 1 2-2z";

type Props = Record<string, unknown>;

/** A DOM element: attributes, `on*` listeners, children. */
function h(tag: string, props: Props | null, ...children: (Node | string | null | false)[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value as EventListener);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) if (child) el.append(child);
  return el;
}

function storage(): Storage | null {
  try {
    return window.sessionStorage;
  } catch {
    return null;
  }
}

/** The configuration a Widget shows: the fetched one under the override. */
export function merge(fetched: WidgetConfiguration | null, override?: ConfigurationOverride): WidgetConfiguration {
  const base = fetched ?? BASE;
  return {
    ...base,
    ...override,
    appearance: { ...base.appearance, ...override?.appearance },
  } as WidgetConfiguration;
}

/** The predefined questions to offer, in their order. */
export function questions(configuration: WidgetConfiguration): string[] {
  return configuration.predefinedQuestions
    .map((q, i) => ({ q: q.question, o: q.order ?? Number.MAX_SAFE_INTEGER, i }))
    .sort((a, b) => a.o - b.o || a.i - b.i)
    .slice(0, MAX_QUESTIONS)
    .map((q) => q.q);
}

/** The words a person reads for a failure. */
export function explain(error: SvcChatErrorInfo, w: Words): string {
  if ((error.status === 403 && error.code === "permission_denied") || error.status === 404) return w.unavailable;
  if (error.status === 429 || error.code === "limit_exceeded") return w.slowDown;
  if (error.code === "entitlement_required") return w.quota;
  if (error.status === 503 || error.reason === "model_unavailable") return w.modelDown;
  if (error.code === "network_error") return w.offline;
  return w.failed;
}

function info(error: unknown): SvcChatErrorInfo {
  if (error instanceof SvcChatError) {
    const { code, status, message, requestId, retryAfter, reason } = error;
    return { code, status, message, requestId, retryAfter, reason };
  }
  return { code: "internal_error", status: 0, message: String(error), requestId: null, retryAfter: null, reason: null };
}

export function mount(host: HTMLElement, initial: ChatOptions): ChatHandle {
  let options = initial;
  const inline = options.display === "inline";
  const key = `svc-chat:${options.embedId}`;
  const saved = (() => {
    try {
      return JSON.parse(storage()?.getItem(key) ?? "null") as { c: string | null; m: Message[] } | null;
    } catch {
      return null;
    }
  })();
  let conversation: string | null = saved?.c ?? null;
  let messages: Message[] = saved?.m ?? [];
  let fetched: WidgetConfiguration | null = null;
  let config = merge(null, options.configuration);
  let unavailable = false;
  let busy = false;
  let retryUntil = 0;
  let openState = false;
  /** What the log shows: its words, and how many messages. */
  let logKey = "";
  let shown = 0;
  let timers: ReturnType<typeof setTimeout>[] = [];
  const controller = new AbortController();
  const language = () => options.language ?? config.defaultLanguage;
  const w = () => words(language());
  const isOpen = () => inline || (options.open ?? openState);

  // Created in an effect, never during server rendering; an element keeps its
  // shadow root for life, so a remount (React's strict mode) reuses it.
  const shadow = host.shadowRoot ?? host.attachShadow({ mode: "open" });
  shadow.replaceChildren();
  let sheet: CSSStyleSheet | null = null;
  let styleEl: HTMLStyleElement | null = null;
  if ("adoptedStyleSheets" in shadow && typeof CSSStyleSheet !== "undefined" && "replaceSync" in CSSStyleSheet.prototype) {
    sheet = new CSSStyleSheet();
    shadow.adoptedStyleSheets = [sheet];
  } else {
    styleEl = h("style", { nonce: options.nonce }) as HTMLStyleElement;
    shadow.append(styleEl);
  }

  const id = (name: string) => `svc-${name}`;
  const send = (event?: Event) => {
    event?.preventDefault();
    void question(input.value);
  };
  const launcher = h("button", {
    type: "button",
    class: "l",
    "aria-controls": id("p"),
    onclick: () => setOpen(!isOpen(), true),
  });
  const popupText = h("button", { type: "button", class: "o", onclick: () => setOpen(true, true) });
  const popup = h(
    "div",
    { class: "w", role: "status", hidden: true },
    popupText,
    h("button", { type: "button", class: "x", onclick: () => (popup.hidden = true) }, "×"),
  );
  const popupDismiss = popup.lastChild as HTMLElement;
  const logo = h("img", { alt: "" }) as HTMLImageElement;
  const headline = h("h2", { id: id("t") });
  const description = h("p", null);
  const close = h("button", { type: "button", class: "x", onclick: () => setOpen(false, true) }, "×");
  const log = h("ol", { class: "m", "aria-live": "polite" });
  const suggested = h("div", { class: "q", role: "group" });
  const notes = h("div", null);
  const status = h("p", { class: "s", role: "status" });
  const input = h("textarea", {
    id: id("i"),
    rows: 1,
    maxlength: 2000,
    onkeydown: (event: KeyboardEvent) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) send(event);
    },
  }) as HTMLTextAreaElement;
  const label = h("label", { for: id("i") });
  const submit = h("button", { type: "submit" }) as HTMLButtonElement;
  const footer = h("p", { class: "f" });
  const panel = h(
    "section",
    inline
      ? { class: "p", id: id("p"), role: "region", "aria-labelledby": id("t") }
      : { class: "p", id: id("p"), role: "dialog", "aria-modal": "false", "aria-labelledby": id("t") },
    h("header", { class: "h" }, logo, h("div", null, headline, description), !inline && close),
    log,
    suggested,
    notes,
    status,
    h("form", { onsubmit: send }, label, input, submit),
    footer,
  );
  const root = h("div", { class: "r", hidden: true }, panel, !inline && popup, !inline && launcher);
  root.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !inline && isOpen()) {
      event.stopPropagation();
      setOpen(false, true);
    }
  });
  shadow.append(root);

  function setOpen(next: boolean, restoreFocus: boolean) {
    if (inline || next === isOpen()) return;
    if (options.open === undefined) openState = next;
    options.onOpenChange?.(next);
    draw();
    if (!restoreFocus) return;
    // Moved only on the visitor's own action: opening focuses the question,
    // closing returns to the launcher.
    if (isOpen()) input.focus();
    else launcher.focus();
  }

  function persist() {
    try {
      storage()?.setItem(key, JSON.stringify({ c: conversation, m: messages.slice(-50) }));
    } catch {
      // A full or forbidden storage only costs the memory across reloads.
    }
  }

  function fail(error: unknown) {
    const i = info(error);
    options.onError?.(i);
    if (i.status === 403 || i.status === 404) unavailable = true;
    if (i.retryAfter && (i.status === 429 || i.code === "limit_exceeded")) {
      retryUntil = Date.now() + i.retryAfter * 1000;
      tick();
    }
    return explain(i, w());
  }

  /** Counts the wait of a 429 down, a second at a time. */
  function tick() {
    if (retryUntil <= Date.now()) retryUntil = 0;
    draw();
    if (retryUntil) timers.push(setTimeout(tick, Math.min(1000, retryUntil - Date.now())));
  }

  async function question(text: string) {
    const q = text.trim();
    if (!q || busy || unavailable || retryUntil) return;
    busy = true;
    input.value = "";
    messages.push({ r: "u", t: q });
    draw();
    try {
      const answer = await ask({ ...options, question: q, conversationId: conversation, signal: controller.signal });
      conversation = answer.conversationId;
      messages.push({ r: "a", t: answer.answer, s: answer.sources });
      options.onAnswer?.(answer);
    } catch (error) {
      if (controller.signal.aborted) return;
      messages.push({ r: "e", t: fail(error) });
    }
    busy = false;
    persist();
    draw();
  }

  function message(m: Message, words: Words) {
    const sources = (m.s ?? []).map((s, i) => {
      const safe = /^https?:\/\//i.test(s.uri);
      const name = safe ? h("a", { href: s.uri, target: "_blank", rel: "noopener noreferrer" }, s.title) : s.title;
      return [i ? ", " : "", name];
    });
    return h(
      "li",
      { class: m.r },
      h("span", { class: "v" }, `${m.r === "u" ? words.you : words.agent}: `),
      m.t,
      sources.length > 0 && h("small", null, `${words.sources}: `, ...sources.flat()),
    );
  }

  function draw() {
    const words = w();
    const a = config.appearance;
    const css_ = css(a.brandColor, a.useBrandColor);
    if (sheet) sheet.replaceSync(css_);
    else if (styleEl) styleEl.textContent = css_;
    root.className = `r ${a.theme} ${a.orientation} ${inline ? "inl" : "bub"}`;
    root.setAttribute("lang", language());
    const title = a.headline || words.agent;
    headline.textContent = title;
    description.textContent = a.description;
    description.hidden = !a.description;
    logo.hidden = !a.logoUrl;
    if (a.logoUrl && logo.getAttribute("src") !== a.logoUrl) logo.src = a.logoUrl;
    const open = isOpen();
    panel.hidden = !open;
    const pill = a.bubbleStyle === "pill";
    const named = a.bubbleLabel || (pill ? title : words.open);
    launcher.replaceChildren(svg(), pill ? named : "");
    // One name, open or not: `aria-expanded` tells which.
    launcher.setAttribute("aria-label", named);
    launcher.setAttribute("aria-expanded", String(open));
    close.setAttribute("aria-label", words.close);
    popupDismiss.setAttribute("aria-label", words.dismiss);
    log.setAttribute("aria-label", words.conversation);
    suggested.setAttribute("aria-label", words.suggested);
    label.textContent = words.question;
    submit.textContent = words.send;
    const blocked = busy || unavailable || retryUntil > 0;
    submit.disabled = blocked;
    input.disabled = unavailable;
    // The log is a live region: only new messages are added, so assistive
    // technology reads each once; it is redrawn whole only when its words change.
    const key = `${language()}\n${a.welcomeMessage}`;
    if (key !== logKey) {
      logKey = key;
      shown = 0;
      log.replaceChildren(...(a.welcomeMessage ? [message({ r: "a", t: a.welcomeMessage }, words)] : []));
    }
    if (shown < messages.length) {
      log.append(...messages.slice(shown).map((m) => message(m, words)));
      shown = messages.length;
      log.scrollTop = log.scrollHeight;
    }
    const asked = messages.some((m) => m.r === "u");
    const offered = asked || unavailable ? [] : questions(config);
    suggested.replaceChildren(
      ...offered.map((q) => h("button", { type: "button", disabled: blocked, onclick: () => void question(q) }, q)),
    );
    suggested.hidden = offered.length === 0;
    const lead = config.leadCapture;
    notes.replaceChildren(
      ...(config.collectUserInfo.enabled && config.collectUserInfo.message
        ? [h("p", { class: "note" }, config.collectUserInfo.message)]
        : []),
      ...(lead.enabled ? [leadNote(lead)] : []),
    );
    const seconds = Math.max(1, Math.ceil((retryUntil - Date.now()) / 1000));
    status.textContent = unavailable
      ? words.unavailable
      : retryUntil
        ? words.slowDown.replace("{n}", String(seconds))
        : busy
          ? words.thinking
          : "";
    footer.textContent = words.branding;
    footer.hidden = !config.showBranding;
  }

  function leadNote(lead: WidgetConfiguration["leadCapture"]) {
    const parts: (Node | string)[] = [];
    if (lead.customMessage) parts.push(lead.customMessage, " ");
    if (lead.contactEmail) parts.push(h("a", { href: `mailto:${lead.contactEmail}` }, lead.contactEmail), " ");
    if (lead.phoneNumber) parts.push(h("a", { href: `tel:${lead.phoneNumber.replace(/\s/g, "")}` }, lead.phoneNumber), " ");
    if (/^https?:\/\//i.test(lead.calendarLink)) {
      parts.push(h("a", { href: lead.calendarLink, target: "_blank", rel: "noopener noreferrer" }, lead.calendarLink));
    }
    return h("p", { class: "note" }, ...parts);
  }

  function svg() {
    const ns = "http://www.w3.org/2000/svg";
    const icon = document.createElementNS(ns, "svg");
    icon.setAttribute("viewBox", "0 0 24 24");
    icon.setAttribute("aria-hidden", "true");
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", ICON);
    icon.append(path);
    return icon;
  }

  /** The welcome popup, once per tab session, after its delay, if the panel is still closed. */
  function schedulePopup() {
    const p = config.welcomePopup;
    const flag = `${key}:popup`;
    if (inline || !p.enabled || !p.message || storage()?.getItem(flag)) return;
    timers.push(
      setTimeout(() => {
        if (isOpen()) return;
        popupText.textContent = p.message;
        popup.hidden = false;
        storage()?.setItem(flag, "1");
      }, p.seconds * 1000),
    );
  }

  function settle() {
    config = merge(fetched, options.configuration);
    root.hidden = false;
    draw();
    schedulePopup();
  }

  if (options.fetchConfiguration === false) settle();
  else
    fetchConfiguration({ ...options, signal: controller.signal }).then(
      (configuration) => {
        fetched = configuration;
        settle();
      },
      (error) => {
        if (controller.signal.aborted) return;
        const text = fail(error);
        settle();
        if (!unavailable) status.textContent = text;
      },
    );

  return {
    update(next) {
      const reconfigure =
        JSON.stringify(next.configuration) !== JSON.stringify(options.configuration) || next.language !== options.language;
      options = { ...next, display: options.display, embedId: options.embedId, baseUrl: options.baseUrl };
      if (reconfigure) config = merge(fetched, options.configuration);
      if (!root.hidden) draw();
    },
    destroy() {
      controller.abort();
      for (const t of timers) clearTimeout(t);
      timers = [];
      shadow.replaceChildren();
      if (sheet) shadow.adoptedStyleSheets = [];
    },
  };
}
