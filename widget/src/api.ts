import type { Answer, SvcChatErrorInfo, WidgetConfiguration } from "./types";

/** A failed call to the service. */
export class SvcChatError extends Error implements SvcChatErrorInfo {
  code: string;
  status: number;
  requestId: string | null;
  retryAfter: number | null;
  reason: string | null;
  constructor(info: SvcChatErrorInfo) {
    super(info.message);
    this.name = "SvcChatError";
    this.code = info.code;
    this.status = info.status;
    this.requestId = info.requestId;
    this.retryAfter = info.retryAfter;
    this.reason = info.reason;
  }
}

export interface Target {
  /** The service's address: `widget.manifest`'s `publicChat.url` without its `/chat/{agentId}`. */
  baseUrl: string;
  /** The Agent id. */
  embedId: string;
}

export interface AskOptions extends Target {
  question: string;
  /** The conversation the question continues, as an earlier answer gave it. */
  conversationId?: string | null;
  signal?: AbortSignal;
}

const path = ({ baseUrl, embedId }: Target, tail: string) =>
  `${baseUrl.replace(/\/+$/, "")}/api/public/chat/${encodeURIComponent(embedId)}/${tail}`;

async function call<T>(url: string, init: RequestInit): Promise<T> {
  let response: Response;
  try {
    response = await fetch(url, { ...init, credentials: "omit", mode: "cors" });
  } catch (error) {
    // A refused origin's answer has no CORS grant and reads as a network
    // failure too; the configuration call tells the two apart first.
    if ((error as Error)?.name === "AbortError") throw error;
    throw new SvcChatError({
      code: "network_error",
      status: 0,
      message: "The service could not be reached.",
      requestId: null,
      retryAfter: null,
      reason: null,
    });
  }
  const body = await response.json().catch(() => null);
  if (response.ok && body) return body as T;
  const problem = body?.error ?? {};
  const wait = Number(response.headers.get("retry-after"));
  throw new SvcChatError({
    code: typeof problem.code === "string" ? problem.code : "internal_error",
    status: response.status,
    message: typeof problem.message === "string" ? problem.message : `HTTP ${response.status}`,
    requestId: body?.meta?.requestId ?? response.headers.get("x-request-id"),
    retryAfter: wait > 0 ? Math.ceil(wait) : null,
    reason: typeof problem.details?.reason === "string" ? problem.details.reason : null,
  });
}

/** Asks the Agent one question; throws {@link SvcChatError}. */
export function ask(options: AskOptions): Promise<Answer> {
  const body: { question: string; conversationId?: string } = { question: options.question };
  if (options.conversationId) body.conversationId = options.conversationId;
  return call<Answer>(path(options, "answers"), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: options.signal,
  });
}

/** The public Widget configuration of the Agent; throws {@link SvcChatError}
 * (`permission_denied`, status 403, on an origin the Widget does not allow). */
export function fetchConfiguration(target: Target & { signal?: AbortSignal }): Promise<WidgetConfiguration> {
  return call<WidgetConfiguration>(path(target, "widget"), { method: "GET", signal: target.signal });
}
