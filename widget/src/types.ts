/** What `GET {baseUrl}/api/public/chat/{embedId}/widget` answers: the public
 * parts of an Agent's Widget configuration (contract §12). */
export interface WidgetConfiguration {
  agentId: string;
  defaultLanguage: Language;
  showBranding: boolean;
  appearance: Appearance;
  welcomePopup: { enabled: boolean; seconds: number; message: string };
  predefinedQuestions: { question: string; order?: number }[];
  collectUserInfo: { enabled: boolean; message: string };
  leadCapture: {
    enabled: boolean;
    contactEmail: string;
    calendarLink: string;
    phoneNumber: string;
    customMessage: string;
  };
}

export type Language = "en" | "es";

export interface Appearance {
  headline: string;
  description: string;
  welcomeMessage: string;
  brandColor: string;
  theme: "light" | "dark" | "auto";
  orientation: "left" | "right";
  logoUrl: string;
  bubbleStyle: "icon" | "pill";
  bubbleLabel: string | null;
  useBrandColor: boolean;
}

/** A configuration to lay over the fetched one: any part of it. */
export type ConfigurationOverride = Partial<Omit<WidgetConfiguration, "appearance">> & {
  appearance?: Partial<Appearance>;
};

/** The sources an answer drew on, best first. */
export interface AnswerSource {
  sourceId: string;
  title: string;
  uri: string;
}

export interface Answer {
  answer: string;
  conversationId: string;
  sources: AnswerSource[];
}

/** A failure, as the service reported it (or `network_error` when it could
 * not be reached). */
export interface SvcChatErrorInfo {
  code: string;
  /** The HTTP status; 0 when no response was readable. */
  status: number;
  message: string;
  requestId: string | null;
  /** Seconds to wait before asking again (`Retry-After`), when given. */
  retryAfter: number | null;
  /** `details.reason` of the problem, when given (`quota_spent`, …). */
  reason: string | null;
}
